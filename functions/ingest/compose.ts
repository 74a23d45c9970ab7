import { randomUUID } from 'node:crypto';
import type { Logger } from '@aws-lambda-powertools/logger';
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import type { SQSClient } from '@aws-sdk/client-sqs';
import { DynamoDbRequestLedger } from '../adapters/dynamodb-request-ledger.ts';
import { SecretsManagerIngestCredentials } from '../adapters/secrets-manager-ingest-credentials.ts';
import { SqsEventQueue } from '../adapters/sqs-event-queue.ts';
import type { Clock } from '../core/ports.ts';
import { parseCredentials } from '../core/webhook-auth.ts';
import type { IngestConfig } from '../shared/config.ts';
import { createIngestHandler } from './handler.ts';

/** What the ingest function talks to: in Lambda the AWS clients, locally the stand-ins. */
export interface IngestEdges {
  sqs: SQSClient;
  /** Needed when the configuration names a webhook secret in Secrets Manager. */
  secrets?: SecretsManagerClient;
  /** The de-duplication table's client: needed unless DEDUP_WINDOW_SECONDS is 0. */
  dynamodb?: DynamoDBClient;
  logger: Logger;
  clock?: Clock;
}

/**
 * The ingest function's composition root: validated configuration and the edges in, the Lambda
 * handler out. `index.ts` (Lambda) and the local stack both build the function with it.
 * Credentials stored in Secrets Manager are loaded before it resolves, so a bad secret stops
 * the function at cold start, not at the first request.
 */
export async function buildIngestHandler(config: Readonly<IngestConfig>, edges: IngestEdges) {
  const { logger } = edges;
  const clock = edges.clock ?? Date;
  let credentials: () => ReturnType<SecretsManagerIngestCredentials['load']>;
  if (config.webhookSecretId === undefined) {
    const fixed = parseCredentials({
      webhookSecrets: config.webhookSecrets,
      apiKeys: config.apiKeys,
    });
    credentials = async () => fixed;
  } else {
    if (!edges.secrets) throw new Error('A Secrets Manager client is needed for WEBHOOK_SECRET_ID');
    const stored = new SecretsManagerIngestCredentials(edges.secrets, config.webhookSecretId, {
      cacheMs: config.credentialsCacheSeconds * 1000,
      clock,
      onReloadError: (error) =>
        logger.error('Could not reload the webhook secret; still using the last good one', {
          error: error instanceof Error ? `${error.name}: ${error.message}` : String(error),
        }),
    });
    await stored.load();
    credentials = () => stored.load();
  }
  let ledger: DynamoDbRequestLedger | undefined;
  if (config.dedupWindowSeconds > 0) {
    if (!edges.dynamodb || config.dedupTableName === undefined)
      throw new Error('A DynamoDB client and DEDUP_TABLE_NAME are needed for de-duplication');
    ledger = new DynamoDbRequestLedger(edges.dynamodb, config.dedupTableName, {
      windowSeconds: config.dedupWindowSeconds,
      logger,
    });
  }
  return createIngestHandler({
    credentials,
    queue: new SqsEventQueue(edges.sqs, config.eventsQueueUrl),
    clock,
    newId: randomUUID,
    limits: {
      maxBodyBytes: config.maxBodyBytes,
      maxEvents: config.maxEvents,
      entities: new Set(config.entities),
      contactMatchFields: new Set(config.contactMatchFields),
    },
    ledger,
    logger,
  }).use(injectLambdaContext(logger));
}
