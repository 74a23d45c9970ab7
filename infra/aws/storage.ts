import { Duration, type RemovalPolicy, SecretValue, type Stack, Validations } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { OUTCOME_TABLE } from '../../functions/core/outcome-records.ts';
import { queueRetentionSeconds, type RetryPolicy } from '../../functions/core/retry-policy.ts';
import { DEDUP_TABLE_KEY, DEDUP_TTL_ATTRIBUTE } from '../../functions/shared/config.ts';
import { secretNames, sourceSecretName } from '../../functions/shared/secret-names.ts';
import type { RelaySettings } from './environments.ts';

/*
 * Where the relay keeps what must outlive an invocation: events, request ids and secrets. Each is
 * created in the stack's own scope under the id it always had, so that its logical id, and with it
 * the live resource and its data, survives an upgrade. A change CloudFormation can only make by
 * replacement (the queues becoming FIFO) makes a new, empty resource under the same id; the old
 * one is then kept aside or deleted as the environment's `retainData` says.
 */

export interface RelayQueues {
  readonly events: sqs.Queue;
  readonly deadLetter: sqs.Queue;
}

/**
 * FIFO queues: each message's group is its record, so a record's events are handed out in the
 * order the ingest accepted them and none while an earlier one is in flight (docs/architecture.md).
 * High throughput: deduplication and the throughput quota per message group, not per queue; every
 * send names its deduplication id. Since a standard queue cannot become FIFO in place, the first
 * deploy of these replaces both queues (docs/operations.md, Upgrade).
 */
/**
 * SQS's largest message, stated rather than left to the default (256 KiB before August 2025):
 * the ingest queues events of up to 1 MiB less room for attributes (`MAX_MESSAGE_BYTES` in
 * functions/core/ingest/queue-messages.ts), and the batch function's dead letters carry them whole.
 */
export const MAX_MESSAGE_SIZE_BYTES = 1_048_576;

const FIFO = {
  fifo: true,
  contentBasedDeduplication: false,
  deduplicationScope: sqs.DeduplicationScope.MESSAGE_GROUP,
  fifoThroughputLimit: sqs.FifoThroughputLimit.PER_MESSAGE_GROUP_ID,
} as const satisfies sqs.QueueProps;

/**
 * SSE and TLS only. The events queue keeps an event a day beyond its retry horizon (at least the
 * SQS default of 4 days), so a backlog cannot outlive it; the dead-letter queue keeps messages
 * the longest SQS allows. A FIFO queue's dead-letter queue must be FIFO too.
 */
export function relayQueues(
  stack: Stack,
  settings: RelaySettings,
  retry: RetryPolicy,
  removalPolicy: RemovalPolicy,
): RelayQueues {
  const deadLetter = new sqs.Queue(stack, 'DeadLetterQueue', {
    ...FIFO,
    encryption: sqs.QueueEncryption.SQS_MANAGED,
    enforceSSL: true,
    maxMessageSizeBytes: MAX_MESSAGE_SIZE_BYTES,
    retentionPeriod: Duration.days(14),
    removalPolicy,
  });
  const events = new sqs.Queue(stack, 'EventsQueue', {
    ...FIFO,
    encryption: sqs.QueueEncryption.SQS_MANAGED,
    enforceSSL: true,
    maxMessageSizeBytes: MAX_MESSAGE_SIZE_BYTES,
    retentionPeriod: Duration.seconds(queueRetentionSeconds(retry.horizonSeconds)),
    // AWS: at least 6 times the function timeout, so retries inside it never overlap a redelivery.
    visibilityTimeout: Duration.seconds(6 * settings.batchTimeoutSeconds),
    // Failures that are not the events' own are retried for a horizon of time, not a number of
    // receives: maxReceiveCount is derived from it and is only a backstop, for receives the
    // function never settles (e.g. crashes).
    deadLetterQueue: { queue: deadLetter, maxReceiveCount: retry.maxReceiveCount },
    removalPolicy,
  });
  return { events, deadLetter };
}

export interface RelaySecrets {
  readonly client: secretsmanager.Secret;
  readonly token: secretsmanager.Secret;
  readonly webhook: secretsmanager.Secret;
  /** One per source (contract §6), by source name. */
  readonly sources: ReadonlyMap<string, secretsmanager.Secret>;
}

/**
 * The client and token secrets start as `{}`: `credentials` and the refresher (or `authorize`)
 * write their values. The webhook secret starts with a generated key. Each source's secret starts
 * as `{}` too, which holds no secret: the ingest refuses that source's requests until `sources
 * set-secret` writes one. A redeploy leaves the values alone only while each secret's id, name,
 * `SecretString` and `generateSecretString` stay exactly as they are: CloudFormation writes a new
 * value (a newly generated key, or `{}`) when either block changes, and makes a new, empty secret
 * when the id or name does. test/infra/secrets.test.ts pins them: never change them.
 */
export function relaySecrets(
  stack: Stack,
  environment: string,
  removalPolicy: RemovalPolicy,
  sourceNames: ReadonlyArray<string> = [],
): RelaySecrets {
  const names = secretNames(environment);
  const client = new secretsmanager.Secret(stack, 'ClientSecret', {
    secretName: names.client,
    description:
      'Mautic OAuth2 credential (written with "npx mautic-relay credentials"; read by the refresher only)',
    secretStringValue: SecretValue.unsafePlainText('{}'),
    removalPolicy,
  });
  const token = new secretsmanager.Secret(stack, 'TokenSecret', {
    secretName: names.token,
    description: 'Mautic tokens (written by the refresher only; read by the batch function)',
    secretStringValue: SecretValue.unsafePlainText('{}'),
    removalPolicy,
  });
  const webhook = new secretsmanager.Secret(stack, 'WebhookSecret', {
    secretName: names.webhook,
    description:
      'Ingest credentials: whsec_ + generatedSecret, plus optional webhookSecrets and apiKeys lists',
    generateSecretString: {
      secretStringTemplate: JSON.stringify({ webhookSecrets: [], apiKeys: [] }),
      generateStringKey: 'generatedSecret',
      // 32 letters and digits are the base64 of 24 bytes: a valid Standard Webhooks key.
      passwordLength: 32,
      excludePunctuation: true,
      includeSpace: false,
    },
    removalPolicy,
  });
  const sources = new Map(
    sourceNames.map((name) => [name, sourceSecret(stack, environment, name, removalPolicy)]),
  );
  return { client, token, webhook, sources };
}

/**
 * A source's secret: its value is the sender's signing secret or API key, written by `sources
 * set-secret` (never by the template, whose value stays `{}`). Made under an id of its own
 * name, so adding or removing a source leaves the others' secrets where they are.
 */
function sourceSecret(
  stack: Stack,
  environment: string,
  source: string,
  removalPolicy: RemovalPolicy,
): secretsmanager.Secret {
  const secret = new secretsmanager.Secret(stack, `SourceSecret-${source}`, {
    secretName: sourceSecretName(environment, source),
    description: `Secrets of the source "${source}" (written with "npx mautic-relay sources set-secret ${source}"; read by the ingest only)`,
    secretStringValue: SecretValue.unsafePlainText('{}'),
    removalPolicy,
  });
  // Acknowledged here, not in nag.ts's list: these secrets come and go with the sources.
  Validations.of(secret).acknowledge({
    id: 'AwsSolutions::AwsSolutions-SMG4',
    reason:
      'A source secret is issued by the outside system that signs its webhooks (Stripe, Shopify, GitHub…); it is rotated there, then stored with "sources set-secret --add", several secrets being accepted at once. Secrets Manager cannot rotate it.',
  });
  return secret;
}

/**
 * Request ids the ingest has accepted (contract §1, Idempotency), and the batch function's action
 * ledger (contract §2, `addPoints` at most once): records that DynamoDB's TTL sweeps away; on
 * demand, since traffic is bursty. Made whatever the de-duplication window: the ledger needs it.
 * Where the environment keeps its data (`keep`, retainData), it has point-in-time recovery and
 * deletion protection: losing the ledger (42 days of it) lets a redriven `addPoints` add its
 * points twice.
 */
export function dedupTable(
  stack: Stack,
  removalPolicy: RemovalPolicy,
  keep: boolean,
): dynamodb.Table {
  return new dynamodb.Table(stack, 'DedupTable', {
    partitionKey: { name: DEDUP_TABLE_KEY, type: dynamodb.AttributeType.STRING },
    billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
    timeToLiveAttribute: DEDUP_TTL_ATTRIBUTE,
    encryption: dynamodb.TableEncryption.AWS_MANAGED,
    removalPolicy,
    ...(keep
      ? {
          pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
          deletionProtection: true,
        }
      : {}),
  });
}

/**
 * Each event's outcome (contract §1.6): ids, statuses and times, two small records per event (the
 * ingest's `queued`, the batch function's latest), keyed by the event's id and `<slot>#<sender>`,
 * each swept by TTL `OUTCOME_RETENTION_SECONDS` after its write. A table of its own, not the
 * de-duplication table: the functions are granted exactly its batch reads and writes, and
 * nothing of the request ids or the action ledger. On demand, like the traffic it follows.
 */
export function outcomeTable(stack: Stack, removalPolicy: RemovalPolicy): dynamodb.Table {
  return new dynamodb.Table(stack, 'OutcomeTable', {
    partitionKey: { name: OUTCOME_TABLE.partitionKey, type: dynamodb.AttributeType.STRING },
    sortKey: { name: OUTCOME_TABLE.sortKey, type: dynamodb.AttributeType.STRING },
    billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
    timeToLiveAttribute: OUTCOME_TABLE.ttl,
    encryption: dynamodb.TableEncryption.AWS_MANAGED,
    removalPolicy,
  });
}
