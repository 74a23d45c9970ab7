import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../functions/core/errors.ts';
import {
  DEFAULT_ENTITIES,
  loadBatchConfig,
  loadIngestConfig,
} from '../../functions/shared/config.ts';

const required = {
  MAUTIC_BASE_URL: 'https://mautic.example.com',
  TOKEN_SECRET_ID: 'relay/dev/token',
  EVENTS_QUEUE_URL: 'https://sqs/events',
  DEAD_LETTER_QUEUE_URL: 'https://sqs/dlq',
  REFRESH_FUNCTION_NAME: 'relay-dev-refresh',
};

describe('loadBatchConfig', () => {
  it('fills the tunables with their documented defaults', () => {
    expect(loadBatchConfig(required)).toEqual({
      mauticBaseUrl: 'https://mautic.example.com',
      tokenSecretId: 'relay/dev/token',
      eventsQueueUrl: 'https://sqs/events',
      deadLetterQueueUrl: 'https://sqs/dlq',
      refreshFunctionName: 'relay-dev-refresh',
      batchSize: 200,
      batchWindowSeconds: 1,
      deliveryConcurrency: 2,
      mauticTimeoutMs: undefined,
      tokenCacheSeconds: 30,
      maxDelaySeconds: 3600,
      retry: {
        baseSeconds: 30,
        maxDelaySeconds: 900,
        horizonSeconds: 86_400,
        maxReceiveCount: 198,
      },
    });
  });

  it('reads the tunables from the environment', () => {
    const config = loadBatchConfig({
      ...required,
      BATCH_SIZE: '50',
      DELIVERY_CONCURRENCY: '1',
      MAX_DELAY_SECONDS: '1',
    });

    expect(config).toMatchObject({ batchSize: 50, deliveryConcurrency: 1, maxDelaySeconds: 1 });
  });

  it('reads the batch window, within 0 to 300 seconds', () => {
    expect(loadBatchConfig({ ...required, BATCH_WINDOW_SECONDS: '0' }).batchWindowSeconds).toBe(0);
    expect(() => loadBatchConfig({ ...required, BATCH_WINDOW_SECONDS: '301' })).toThrow(
      /BATCH_WINDOW_SECONDS must be at most 300/,
    );
  });

  it('names every missing or invalid variable in one error, without its value', () => {
    const load = () =>
      loadBatchConfig({
        ...required,
        TOKEN_SECRET_ID: undefined,
        MAUTIC_BASE_URL: 'ftp://secret-host',
        BATCH_SIZE: '201',
        MAUTIC_TIMEOUT_MS: 'soon',
      });

    expect(load).toThrow(ConfigError);
    expect(load).toThrow(/TOKEN_SECRET_ID is required/);
    expect(load).toThrow(/MAUTIC_BASE_URL must be an http\(s\) URL/);
    expect(load).toThrow(/BATCH_SIZE must be at most 200/);
    expect(load).toThrow(/MAUTIC_TIMEOUT_MS must be a whole number/);
    expect(load).not.toThrow(/secret-host/);
  });
});

describe('loadIngestConfig', () => {
  it('reads comma-separated secrets and keys, with documented defaults', () => {
    expect(
      loadIngestConfig({
        EVENTS_QUEUE_URL: 'https://sqs/events',
        WEBHOOK_SECRET: 'whsec_a, whsec_b',
        INGEST_API_KEYS: 'k1,,k2 ',
        DEDUP_TABLE_NAME: 'relay-dedup',
      }),
    ).toEqual({
      eventsQueueUrl: 'https://sqs/events',
      webhookSecretId: undefined,
      webhookSecrets: ['whsec_a', 'whsec_b'],
      apiKeys: ['k1', 'k2'],
      maxBodyBytes: 1024 * 1024,
      maxEvents: 500,
      credentialsCacheSeconds: 300,
      entities: [...DEFAULT_ENTITIES],
      dedupWindowSeconds: 86_400,
      dedupTableName: 'relay-dedup',
    });
  });

  it('reads ENTITIES and DEDUP_WINDOW_SECONDS, 0 turning de-duplication off without a table', () => {
    const config = loadIngestConfig({
      EVENTS_QUEUE_URL: 'q',
      INGEST_API_KEYS: 'k',
      ENTITIES: 'contacts, companies',
      DEDUP_WINDOW_SECONDS: '0',
    });

    expect(config.entities).toEqual(['contacts', 'companies']);
    expect(config.dedupWindowSeconds).toBe(0);
    expect(() => loadIngestConfig({ EVENTS_QUEUE_URL: 'q', INGEST_API_KEYS: 'k' })).toThrow(
      /DEDUP_TABLE_NAME is required unless DEDUP_WINDOW_SECONDS is 0/,
    );
    expect(() =>
      loadIngestConfig({
        EVENTS_QUEUE_URL: 'q',
        INGEST_API_KEYS: 'k',
        DEDUP_TABLE_NAME: 't',
        ENTITIES: 'contacts,campaigns/events',
        DEDUP_WINDOW_SECONDS: '2592001',
      }),
    ).toThrow(
      /ENTITIES.*must list Mautic API path names.*DEDUP_WINDOW_SECONDS must be at most 2592000/,
    );
  });

  it('defaults ENTITIES to the one-word standard Mautic entities with batch routes', () => {
    expect(DEFAULT_ENTITIES).toContain('contacts');
    expect(DEFAULT_ENTITIES).toContain('companies');
    expect(DEFAULT_ENTITIES).toContain('segments');
    expect(DEFAULT_ENTITIES).not.toContain('events');
    expect(DEFAULT_ENTITIES).toHaveLength(24);
    for (const entity of DEFAULT_ENTITIES) expect(entity).toMatch(/^[a-z][a-zA-Z]{1,63}$/);
  });

  it('takes a Secrets Manager secret id instead, and names what is missing', () => {
    expect(
      loadIngestConfig({
        EVENTS_QUEUE_URL: 'q',
        WEBHOOK_SECRET_ID: 'relay/dev/webhook',
        DEDUP_WINDOW_SECONDS: '0',
      }).webhookSecretId,
    ).toBe('relay/dev/webhook');
    expect(() => loadIngestConfig({ WEBHOOK_SECRET_ID: 'x', MAX_EVENTS_PER_REQUEST: '0' })).toThrow(
      /EVENTS_QUEUE_URL is required; MAX_EVENTS_PER_REQUEST must be at least 1/,
    );
  });
});
