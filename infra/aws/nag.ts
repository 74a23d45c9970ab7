import { type Stack, Validations } from 'aws-cdk-lib';
import type { CfnTable } from 'aws-cdk-lib/aws-dynamodb';
import type { IConstruct } from 'constructs';

/**
 * The cdk-nag (AwsSolutions) findings we accept, each on its own construct with the reason it
 * does not apply here. Anything else cdk-nag finds fails the synth and the infra tests.
 */
const FINDINGS: Array<{
  path: string;
  id: string;
  reason: string;
  /** Where the finding may not arise: acknowledged only where it does. */
  applies?: (construct: IConstruct) => boolean;
}> = [
  {
    path: 'ClientSecret',
    id: 'AwsSolutions::AwsSolutions-SMG4',
    reason:
      'The Mautic OAuth2 credential is issued by Mautic; it is rotated in Mautic by an operator, who then stores it with the credentials command. Secrets Manager cannot rotate it.',
  },
  {
    path: 'TokenSecret',
    id: 'AwsSolutions::AwsSolutions-SMG4',
    reason:
      'The refresh function rewrites this secret before every access token expires (hourly); it is its own rotation, with a single writer.',
  },
  {
    path: 'WebhookSecret',
    id: 'AwsSolutions::AwsSolutions-SMG4',
    reason:
      'The webhook secret is shared with the sending systems, so it is rotated by hand with an overlap: several secrets are accepted at once (docs/operations.md, Sender credentials).',
  },
  {
    path: 'DedupTable',
    id: 'AwsSolutions::AwsSolutions-DDB3',
    reason:
      'Point-in-time recovery is on where the environment keeps its data (retainData, as prod does); not here. The table holds the request ids the ingest accepted within the de-duplication window (a day by default) and the addPoints ledger, each key kept 42 days by TTL. Losing it loses no event, but a request retried within the window may be queued twice, and an addPoints event redriven later may add its points twice: accepted for an environment whose data is not kept.',
    applies: (table) =>
      (table.node.defaultChild as CfnTable).pointInTimeRecoverySpecification === undefined,
  },
  {
    path: 'OutcomeTable',
    id: 'AwsSolutions::AwsSolutions-DDB3',
    reason:
      "The table holds each event's outcome for a few days (OUTCOME_RETENTION_SECONDS), each swept by TTL: observability the relay never acts on, which the functions write again as events move. A restore would bring back only stale statuses.",
  },
  {
    path: 'Api/GET--events',
    id: 'AwsSolutions::AwsSolutions-APIG4',
    reason:
      'A lookup of outcomes (contract §1.6) is authenticated inside the ingest function exactly as POST /events is: a Standard Webhooks signature (over the empty body) or an API key, in constant time; each sender sees only its own events.',
  },
  {
    path: 'Api/GET--events--{eventId}',
    id: 'AwsSolutions::AwsSolutions-APIG4',
    reason:
      "The lookup of one event's outcome (contract §1.6): authenticated inside the ingest function as POST /events is, signature or API key, and answered only to the sender that sent the event.",
  },
  {
    path: 'Api/POST--events',
    id: 'AwsSolutions::AwsSolutions-APIG4',
    reason:
      'Senders are authenticated inside the ingest function, by Standard Webhooks HMAC signatures over the raw body (authorizers never see the body) or by API keys compared in constant time.',
  },
  {
    path: 'Api/POST--sources--{name}',
    id: 'AwsSolutions::AwsSolutions-APIG4',
    reason:
      "Each source's sender is authenticated inside the ingest function by its provider's own signature scheme over the raw body (authorizers never see the body), or by its API key, in constant time (contract §6).",
  },
];

export function acknowledgeFindings(stack: Stack): void {
  for (const { path, id, reason, applies } of FINDINGS) {
    const construct = path
      .split('/')
      .reduce<IConstruct>((parent, child) => parent.node.findChild(child), stack);
    if (applies === undefined || applies(construct))
      Validations.of(construct).acknowledge({ id, reason });
  }
}
