import { randomUUID } from 'node:crypto';
import { Logger } from '@aws-lambda-powertools/logger';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SQSClient } from '@aws-sdk/client-sqs';
import { DynamoDbRequestLedger } from '../adapters/dynamodb-request-ledger.ts';
import { SecretsManagerIngestCredentials } from '../adapters/secrets-manager-ingest-credentials.ts';
import { SqsEventQueue } from '../adapters/sqs-event-queue.ts';
import { parseCredentials } from '../core/webhook-auth.ts';
import { loadIngestConfig } from '../shared/config.ts';
import { createIngestHandler } from './handler.ts';

const config = loadIngestConfig(process.env);
const clock = { now: () => Date.now() };
const logger = new Logger();
const stored =
  config.webhookSecretId === undefined
    ? undefined
    : new SecretsManagerIngestCredentials(new SecretsManagerClient({}), config.webhookSecretId, {
        cacheMs: config.credentialsCacheSeconds * 1000,
        clock,
        onReloadError: (error) =>
          logger.error('Could not reload the webhook secret; still using the last good one', {
            error: error instanceof Error ? `${error.name}: ${error.message}` : String(error),
          }),
      });
const fixed = stored
  ? undefined
  : parseCredentials({ webhookSecrets: config.webhookSecrets, apiKeys: config.apiKeys });
// Loaded now so a bad secret stops the function at cold start, not at the first request.
await stored?.load();

export const handler = createIngestHandler({
  credentials: async () => (stored ? stored.load() : (fixed as NonNullable<typeof fixed>)),
  queue: new SqsEventQueue(new SQSClient({}), config.eventsQueueUrl),
  clock,
  newId: randomUUID,
  limits: {
    maxBodyBytes: config.maxBodyBytes,
    maxEvents: config.maxEvents,
    entities: new Set(config.entities),
  },
  // De-duplication (contract §1, Idempotency); the stack always sets the table.
  ledger:
    config.dedupWindowSeconds > 0 && config.dedupTableName !== undefined
      ? new DynamoDbRequestLedger(new DynamoDBClient({}), config.dedupTableName, {
          windowSeconds: config.dedupWindowSeconds,
          logger,
        })
      : undefined,
  logger,
});
