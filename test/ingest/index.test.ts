import type { APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { lambdaContext } from '../../infra/local/lambda-context.ts';
import { startLocalDynamoDb } from '../support/dedup.ts';
import { httpApiEvent, signedHeaders, WEBHOOK_SECRET } from '../support/ingest.ts';

afterEach(() => {
  vi.unstubAllEnvs();
  vi.resetModules();
});

describe('ingest function cold start', () => {
  it('builds the handler from secrets in the environment', async () => {
    vi.stubEnv('EVENTS_QUEUE_URL', 'https://sqs.eu-west-1.amazonaws.com/123456789012/events');
    vi.stubEnv(
      'WEBHOOK_SECRET',
      'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw, whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYX',
    );
    vi.stubEnv('AWS_REGION', 'eu-west-1');
    vi.stubEnv('DEDUP_TABLE_NAME', 'relay-dedup');

    const { handler } = await import('../../functions/ingest/index.ts');

    expect(typeof handler).toBe('function');
  });

  it('checks every request id against the table it is given, and refuses with 503 when the table cannot be reached', async () => {
    const gone = await startLocalDynamoDb();
    await gone.close();
    vi.stubEnv('EVENTS_QUEUE_URL', 'https://sqs.eu-west-1.amazonaws.com/123456789012/events');
    vi.stubEnv('WEBHOOK_SECRET', WEBHOOK_SECRET);
    vi.stubEnv('AWS_REGION', 'eu-west-1');
    vi.stubEnv('AWS_ACCESS_KEY_ID', 'test');
    vi.stubEnv('AWS_SECRET_ACCESS_KEY', 'test');
    vi.stubEnv('AWS_ENDPOINT_URL_DYNAMODB', gone.endpoint);
    vi.stubEnv('DEDUP_TABLE_NAME', 'relay-dedup');
    vi.stubEnv('POWERTOOLS_LOG_LEVEL', 'SILENT');
    const { handler } = await import('../../functions/ingest/index.ts');
    const body = JSON.stringify({ entity: 'contacts', action: 'delete', id: 1 });

    const result = (await handler(
      httpApiEvent({
        body,
        headers: signedHeaders(body, { timestamp: Math.floor(Date.now() / 1000) }),
      }),
      lambdaContext('ingest', 10_000),
    )) as APIGatewayProxyStructuredResultV2;

    expect(result.statusCode).toBe(503);
    expect(JSON.parse(String(result.body)).error.code).toBe('queue_unavailable');
  });

  it('stops at cold start on a bad webhook secret, naming it by position only', async () => {
    vi.stubEnv('EVENTS_QUEUE_URL', 'https://sqs.eu-west-1.amazonaws.com/123456789012/events');
    vi.stubEnv('WEBHOOK_SECRET', 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw,whsec_c2hvcnQ=');
    vi.stubEnv('DEDUP_TABLE_NAME', 'relay-dedup');

    await expect(import('../../functions/ingest/index.ts')).rejects.toThrow(
      /webhook secret #2 must encode 24 to 64 bytes/,
    );
  });

  it('stops at cold start when no credential is configured', async () => {
    vi.stubEnv('EVENTS_QUEUE_URL', 'https://sqs.eu-west-1.amazonaws.com/123456789012/events');
    vi.stubEnv('WEBHOOK_SECRET', undefined);
    vi.stubEnv('INGEST_API_KEYS', undefined);
    vi.stubEnv('WEBHOOK_SECRET_ID', undefined);

    await expect(import('../../functions/ingest/index.ts')).rejects.toThrow(
      /WEBHOOK_SECRET_ID or WEBHOOK_SECRET or INGEST_API_KEYS is required/,
    );
  });
});
