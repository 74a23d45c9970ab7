import { GetEventSourceMappingCommand } from '@aws-sdk/client-lambda';
import { GetSecretValueCommand } from '@aws-sdk/client-secrets-manager';
import { ListSubscriptionsByTopicCommand } from '@aws-sdk/client-sns';
import { GetQueueAttributesCommand } from '@aws-sdk/client-sqs';
import { secretNames } from '../../functions/shared/secret-names.ts';
import type { RelaySettings } from '../aws/environments.ts';
import type { DoctorCheck, DoctorDeps, Reached } from './doctor-types.ts';

/*
 * The checks of a deployed stack: before an upgrade, that the queues it replaces are drained;
 * after a deploy (`--after-deploy`), that it runs as it should: its status, the alarm e-mail
 * confirmed, the event source enabled, the refresher's tokens stored.
 */

const UPGRADING = 'docs/operations.md, Upgrading to the FIFO queues';

/**
 * A stack of the version before the FIFO queues has standard queues, which this version's
 * deploy replaces: what they still hold is then deleted with them (retainData off) or kept aside
 * where nothing reads it (retainData on). So they must be drained before the upgrade.
 */
export async function queues(
  settings: RelaySettings,
  reached: Reached,
  { sqs }: Pick<DoctorDeps, 'sqs'>,
): Promise<DoctorCheck> {
  if (!reached.stack?.deployed)
    return { check: 'queues', ok: true, detail: 'no queues yet: the deploy creates them.' };
  const standard = (await reached.resources()).filter(
    (resource) => resource.type === 'AWS::SQS::Queue' && !resource.id.endsWith('.fifo'),
  );
  if (standard.length === 0)
    return { check: 'queues', ok: true, detail: "the stack's queues are FIFO queues already." };
  const held = await Promise.all(
    standard.map(async (queue) => {
      const { Attributes = {} } = await sqs.send(
        new GetQueueAttributesCommand({
          QueueUrl: queue.id,
          AttributeNames: [
            'ApproximateNumberOfMessages',
            'ApproximateNumberOfMessagesNotVisible',
            'ApproximateNumberOfMessagesDelayed',
          ],
        }),
      );
      const count = Object.values(Attributes).reduce((sum, value) => sum + Number(value), 0);
      return { name: queue.logicalId, count };
    }),
  );
  const holding = held.filter(({ count }) => count > 0);
  if (holding.length === 0)
    return {
      check: 'queues',
      ok: true,
      detail: `the stack's standard queues are empty: this version's deploy replaces them with FIFO queues (${UPGRADING}).`,
    };
  const fate = settings.retainData
    ? 'keeps the old ones aside (retainData) with what they hold, which nothing reads any more'
    : 'deletes the old ones with what they hold (retainData is off)';
  return {
    check: 'queues',
    ok: false,
    detail: `the stack's queues are the standard queues of an earlier version, and ${holding.map(({ name, count }) => `${name} holds ${count}`).join(', ')}: this version's deploy replaces them with FIFO queues and ${fate}. Drain them first (${UPGRADING}).`,
  };
}

/** After a deploy: the stack's last change completed, not rolled back or under way. */
export function stackStatus(settings: RelaySettings, reached: Reached): DoctorCheck {
  const { stack } = reached;
  const deploy = `npx cdk deploy -c env=${settings.name}`;
  if (!stack?.deployed)
    return {
      check: 'stack',
      ok: false,
      detail: `no deployed stack MauticRelay-${settings.name} in ${settings.region}${stack ? ` (it is ${stack.status})` : ''}: run "${deploy}".`,
    };
  if (stack.status === 'UPDATE_ROLLBACK_COMPLETE')
    return {
      check: 'stack',
      ok: false,
      detail: `the last update of ${stack.name} failed and was rolled back: it runs the version before. Read its events in the CloudFormation console, fix the cause, and run "${deploy}" again.`,
    };
  if (!stack.status.endsWith('_COMPLETE'))
    return {
      check: 'stack',
      ok: false,
      detail: `${stack.name} is ${stack.status}: check again once it is done.`,
    };
  return { check: 'stack', ok: true, detail: `${stack.name} is ${stack.status}.` };
}

/**
 * After a deploy: the alarm e-mail's subscription is confirmed. AWS e-mails nothing to an
 * address until someone clicks the link of its "Subscription Confirmation" e-mail.
 */
export async function alarmEmail(
  settings: RelaySettings,
  reached: Reached,
  { sns }: Pick<DoctorDeps, 'sns'>,
): Promise<DoctorCheck> {
  const email = settings.alarmEmail;
  if (email === '')
    return {
      check: 'alarm-email',
      ok: true,
      detail:
        'no alarmEmail in cdk.json: alarms go to the stack\'s Alarms topic and nobody is e-mailed (docs/operations.md, "Nobody paged").',
    };
  const topic = (await reached.resources()).find((resource) => resource.type === 'AWS::SNS::Topic');
  if (topic === undefined)
    return {
      check: 'alarm-email',
      ok: false,
      detail: 'the stack has no Alarms topic: deploy again.',
    };
  const subscription = await subscriptionOf(sns, topic.id, email);
  if (subscription === undefined)
    return {
      check: 'alarm-email',
      ok: false,
      detail: `the Alarms topic has no subscription of ${email}: deploy again (npx cdk deploy -c env=${settings.name}).`,
    };
  if (!subscription.startsWith('arn:'))
    return {
      check: 'alarm-email',
      ok: false,
      detail: `${email} has not confirmed the alarms' subscription (${subscription}): nothing is e-mailed until someone clicks "Confirm subscription" in the e-mail "AWS Notification - Subscription Confirmation" (check the spam folder; the link expires after 3 days: docs/operations.md, First deploy).`,
    };
  return { check: 'alarm-email', ok: true, detail: `${email} is subscribed and confirmed.` };
}

/** Pages of a topic's subscriptions read at most (100 each). */
const MAX_SUBSCRIPTION_PAGES = 10;

/** The subscription ARN (or `PendingConfirmation`) of `email` on the topic; undefined: none. */
async function subscriptionOf(
  sns: DoctorDeps['sns'],
  TopicArn: string,
  email: string,
): Promise<string | undefined> {
  let NextToken: string | undefined;
  for (let page = 0; page < MAX_SUBSCRIPTION_PAGES; page++) {
    const listed = await sns.send(new ListSubscriptionsByTopicCommand({ TopicArn, NextToken }));
    const found = (listed.Subscriptions ?? []).find(
      (subscription) =>
        subscription.Protocol === 'email' &&
        subscription.Endpoint?.toLowerCase() === email.toLowerCase(),
    );
    if (found !== undefined) return found.SubscriptionArn ?? 'unknown';
    NextToken = listed.NextToken;
    if (NextToken === undefined) return undefined;
  }
  return undefined;
}

/** After a deploy: the event source that feeds the batch function is enabled. */
export async function eventSource(
  settings: RelaySettings,
  reached: Reached,
  { lambda }: Pick<DoctorDeps, 'lambda'>,
): Promise<DoctorCheck> {
  const mapping = (await reached.resources()).find(
    (resource) => resource.type === 'AWS::Lambda::EventSourceMapping',
  );
  if (mapping === undefined)
    return {
      check: 'event-source',
      ok: false,
      detail: `the stack has no event source for the batch function: deploy again (npx cdk deploy -c env=${settings.name}).`,
    };
  const found = await lambda.send(new GetEventSourceMappingCommand({ UUID: mapping.id }));
  const state = found.State ?? 'unknown';
  if (state === 'Enabled')
    return {
      check: 'event-source',
      ok: true,
      detail: `the events queue feeds the batch function (event source ${mapping.id} is Enabled).`,
    };
  const why = found.StateTransitionReason ? ` (${found.StateTransitionReason})` : '';
  return {
    check: 'event-source',
    ok: false,
    detail: /ing$/.test(state)
      ? `event source ${mapping.id} is ${state}${why}: check again in a minute.`
      : `event source ${mapping.id} is ${state}${why}: nothing delivers the queued events. Enable it (aws lambda update-event-source-mapping --uuid ${mapping.id} --enabled), or deploy again.`,
  };
}

/**
 * After a deploy: the refresher has stored Mautic tokens that are still good. Read from the
 * token secret, only its times: the token itself is never kept or shown.
 */
export async function refresher(
  settings: RelaySettings,
  { secrets, now }: Pick<DoctorDeps, 'secrets' | 'now'>,
): Promise<DoctorCheck> {
  const env = settings.name;
  const { SecretString } = await secrets.send(
    new GetSecretValueCommand({ SecretId: secretNames(env).token }),
  );
  let stored: { accessToken?: unknown; accessTokenExpiresAt?: unknown; updatedAt?: unknown } = {};
  try {
    stored = JSON.parse(SecretString ?? '{}') ?? {};
  } catch {
    // Unreadable: no tokens, said below.
  }
  const refresh = `npx mautic-relay refresh --env ${env}`;
  if (typeof stored.accessToken !== 'string' || stored.accessToken === '')
    return {
      check: 'refresher',
      ok: false,
      detail: `no Mautic tokens stored yet: store the credential ("npx mautic-relay credentials --env ${env}", README, Deploy), then run "${refresh}", which says what stops it.`,
    };
  const left = Math.round((Date.parse(String(stored.accessTokenExpiresAt)) - now()) / 60_000);
  if (!(left > 0))
    return {
      check: 'refresher',
      ok: false,
      detail: `the stored access token expired at ${String(stored.accessTokenExpiresAt)} and no refresh replaced it: run "${refresh}", which says why (RefreshFailedAlarm's runbook in docs/operations.md).`,
    };
  return {
    check: 'refresher',
    ok: true,
    detail: `the refresher stored tokens at ${String(stored.updatedAt)}; the access token is good for ${left} more minutes.`,
  };
}
