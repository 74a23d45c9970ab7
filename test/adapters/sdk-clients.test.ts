import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { ListQueuesCommand, SQSClient } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { withoutSdkLogging } from '../../functions/adapters/sdk-clients.ts';
import { buildBatchHandler } from '../../functions/batch/compose.ts';
import { buildIngestHandler } from '../../functions/ingest/compose.ts';
import { ENV, loadBatchConfig, loadIngestConfig } from '../../functions/shared/config.ts';
import { API_KEY } from '../support/ingest.ts';
import { type LocalSqs, startLocalSqs } from '../support/local-sqs.ts';

const REGION = { region: 'eu-west-1' };

/** Whether the client still runs the SDK's logger middleware. */
function logs(client: { middlewareStack: { identify(): string[] } }): boolean {
  return client.middlewareStack.identify().some((entry) => entry.startsWith('loggerMiddleware'));
}

describe('withoutSdkLogging', () => {
  let local: LocalSqs;
  beforeAll(async () => {
    local = await startLocalSqs();
  });
  afterAll(() => local.stop());

  it('stops the SDK copying each input and output for the client logger', async () => {
    const info = vi.fn();
    const logger = { debug() {}, info, warn() {}, error() {} };
    const sqs = new SQSClient({
      ...REGION,
      endpoint: local.endpoint,
      logger,
      credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
    });
    try {
      await sqs.send(new ListQueuesCommand({ QueueNamePrefix: 'copied' }));
      // The SDK as it comes: a filtered copy of the input for the logger, made on every call.
      expect(info).toHaveBeenCalledWith(
        expect.objectContaining({
          commandName: 'ListQueuesCommand',
          input: { QueueNamePrefix: 'copied' },
        }),
      );

      expect(withoutSdkLogging(sqs)).toBe(sqs);
      info.mockClear();
      const answer = await sqs.send(new ListQueuesCommand({ QueueNamePrefix: 'copied' }));

      expect(answer.$metadata.httpStatusCode).toBe(200);
      expect(info).not.toHaveBeenCalled();
      expect(logs(sqs)).toBe(false);
    } finally {
      sqs.destroy();
    }
  });

  it('is applied by both composition roots to every client they are given', async () => {
    const ingestEdges = {
      sqs: new SQSClient(REGION),
      secrets: new SecretsManagerClient(REGION),
      dynamodb: new DynamoDBClient(REGION),
    };
    const batchEdges = {
      sqs: new SQSClient(REGION),
      secrets: new SecretsManagerClient(REGION),
      dynamodb: new DynamoDBClient(REGION),
    };
    expect([...Object.values(ingestEdges), ...Object.values(batchEdges)].every(logs)).toBe(true);

    await buildIngestHandler(
      loadIngestConfig({
        [ENV.EVENTS_QUEUE_URL]: 'https://sqs.eu-west-1.amazonaws.com/1/events.fifo',
        [ENV.INGEST_API_KEYS]: API_KEY,
        [ENV.DEDUP_TABLE_NAME]: 'relay-dedup',
      }),
      { ...ingestEdges, logger: new Logger({ serviceName: 'ingest-test' }) },
    );
    buildBatchHandler(
      loadBatchConfig({
        [ENV.MAUTIC_BASE_URL]: 'https://mautic.example.com',
        [ENV.TOKEN_SECRET_ID]: 'relay/dev/token',
        [ENV.EVENTS_QUEUE_URL]: 'https://sqs.eu-west-1.amazonaws.com/1/events.fifo',
        [ENV.DEAD_LETTER_QUEUE_URL]: 'https://sqs.eu-west-1.amazonaws.com/1/dlq.fifo',
        [ENV.REFRESH_FUNCTION_NAME]: 'relay-dev-refresh',
        [ENV.DEDUP_TABLE_NAME]: 'relay-dedup',
      }),
      {
        ...batchEdges,
        refresher: { refreshNow: async () => ({ kind: 'busy' as const }) },
        logger: new Logger({ serviceName: 'batch-test' }),
        metrics: new Metrics({ namespace: 'MauticBatchRelayTest', serviceName: 'batch-test' }),
      },
    );

    for (const [name, client] of Object.entries(ingestEdges))
      expect(logs(client), `ingest's ${name}`).toBe(false);
    for (const [name, client] of Object.entries(batchEdges))
      expect(logs(client), `batch's ${name}`).toBe(false);
    for (const client of [...Object.values(ingestEdges), ...Object.values(batchEdges)])
      client.destroy();
  });
});
