import { build } from 'esbuild';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../functions/core/errors.ts';
import {
  DEFAULT_ENTITIES,
  loadBatchConfig,
  loadIngestConfig,
} from '../../functions/shared/config.ts';
import { secretNames, sourceSecretName } from '../../functions/shared/secret-names.ts';
import { loadLocalConfig } from '../../infra/local/local-config.ts';

const required = {
  MAUTIC_BASE_URL: 'https://mautic.example.com',
  TOKEN_SECRET_ID: 'relay/dev/token',
  EVENTS_QUEUE_URL: 'https://sqs/events',
  DEAD_LETTER_QUEUE_URL: 'https://sqs/dlq',
  REFRESH_FUNCTION_NAME: 'relay-dev-refresh',
  DEDUP_TABLE_NAME: 'relay-dev-dedup',
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
      batchWindowSeconds: 5,
      deliveryConcurrency: 2,
      mauticTimeoutMs: undefined,
      tokenCacheSeconds: 30,
      maxDelaySeconds: 3600,
      retry: {
        baseSeconds: 30,
        maxDelaySeconds: 900,
        horizonSeconds: 86_400,
        // What the backoff needs (198), returns at times Mautic names (100), and returns of
        // events the circuit holds (120).
        maxReceiveCount: 418,
      },
      // Probes from 5 s, doubling, up to the first retry delay (30 s): 5, 10, 20 s. Calls in
      // flight: 2 invocations × 2 entities each.
      circuit: { probeBaseMs: 5_000, probeMaxMs: 30_000, ceiling: 4 },
      actionLedgerTableName: 'relay-dev-dedup',
      // No OUTCOME_TABLE_NAME: no outcomes are kept.
      outcomes: undefined,
    });
  });

  it('reads the circuit settings, shortened with the first retry delay unless set', () => {
    const circuit = (env: Record<string, string>) =>
      loadBatchConfig({ ...required, ...env }).circuit;

    expect(circuit({ RETRY_BASE_SECONDS: '2' })).toMatchObject({
      probeBaseMs: 2_000,
      probeMaxMs: 2_000,
    });
    expect(
      circuit({ CIRCUIT_PROBE_BASE_SECONDS: '3', CIRCUIT_PROBE_MAX_SECONDS: '90' }),
    ).toMatchObject({ probeBaseMs: 3_000, probeMaxMs: 90_000 });
    expect(circuit({ MAX_CONCURRENCY: '5', DELIVERY_CONCURRENCY: '3' }).ceiling).toBe(15);
    expect(() => circuit({ CIRCUIT_PROBE_MAX_SECONDS: '601' })).toThrow(
      /CIRCUIT_PROBE_MAX_SECONDS must be at most 600/,
    );
  });

  it('keeps outcomes in OUTCOME_TABLE_NAME for three days by default, 0 keeping none', () => {
    const read = (env: Record<string, string>) => loadBatchConfig({ ...required, ...env }).outcomes;

    expect(read({ OUTCOME_TABLE_NAME: 'relay-dev-outcomes' })).toEqual({
      tableName: 'relay-dev-outcomes',
      retentionSeconds: 259_200,
    });
    expect(
      read({ OUTCOME_TABLE_NAME: 'relay-dev-outcomes', OUTCOME_RETENTION_SECONDS: '3600' }),
    ).toEqual({ tableName: 'relay-dev-outcomes', retentionSeconds: 3600 });
    expect(read({ OUTCOME_TABLE_NAME: 't', OUTCOME_RETENTION_SECONDS: '0' })).toBeUndefined();
    expect(() => read({ OUTCOME_TABLE_NAME: 't', OUTCOME_RETENTION_SECONDS: '2592001' })).toThrow(
      /OUTCOME_RETENTION_SECONDS must be at most 2592000/,
    );
    expect(
      loadIngestConfig({
        EVENTS_QUEUE_URL: 'q',
        INGEST_API_KEYS: 'k',
        DEDUP_WINDOW_SECONDS: '0',
        MAX_RECORD_EVENTS_PER_MINUTE: '0',
        OUTCOME_TABLE_NAME: 't',
        OUTCOME_RETENTION_SECONDS: '60',
      }).outcomes,
    ).toEqual({ tableName: 't', retentionSeconds: 60 });
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
      contactMatchFields: ['email'],
      dedupWindowSeconds: 86_400,
      dedupTableName: 'relay-dedup',
      outcomes: undefined,
      maxRecordEventsPerMinute: 600,
    });
  });

  it('reads ENTITIES and DEDUP_WINDOW_SECONDS, 0 turning de-duplication off without a table', () => {
    const config = loadIngestConfig({
      EVENTS_QUEUE_URL: 'q',
      INGEST_API_KEYS: 'k',
      ENTITIES: 'contacts, companies',
      DEDUP_WINDOW_SECONDS: '0',
      MAX_RECORD_EVENTS_PER_MINUTE: '0',
    });

    expect(config.entities).toEqual(['contacts', 'companies']);
    expect(config.dedupWindowSeconds).toBe(0);
    expect(() => loadIngestConfig({ EVENTS_QUEUE_URL: 'q', INGEST_API_KEYS: 'k' })).toThrow(
      /DEDUP_TABLE_NAME is required unless DEDUP_WINDOW_SECONDS and MAX_RECORD_EVENTS_PER_MINUTE are 0/,
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

  it('reads MAX_RECORD_EVENTS_PER_MINUTE, 600 by default; a bound needs the table, 0 turns it off', () => {
    const base = { EVENTS_QUEUE_URL: 'q', INGEST_API_KEYS: 'k' };
    const withTable = { ...base, DEDUP_TABLE_NAME: 't' };

    expect(loadIngestConfig(withTable).maxRecordEventsPerMinute).toBe(600);
    expect(
      loadIngestConfig({ ...withTable, MAX_RECORD_EVENTS_PER_MINUTE: '5' })
        .maxRecordEventsPerMinute,
    ).toBe(5);
    expect(() => loadIngestConfig({ ...base, DEDUP_WINDOW_SECONDS: '0' })).toThrow(
      /DEDUP_TABLE_NAME is required unless DEDUP_WINDOW_SECONDS and MAX_RECORD_EVENTS_PER_MINUTE/,
    );
    expect(() =>
      loadIngestConfig({ ...withTable, MAX_RECORD_EVENTS_PER_MINUTE: '1000001' }),
    ).toThrow(/MAX_RECORD_EVENTS_PER_MINUTE must be at most 1000000/);
    expect(() => loadIngestConfig({ ...withTable, MAX_RECORD_EVENTS_PER_MINUTE: '-1' })).toThrow(
      /MAX_RECORD_EVENTS_PER_MINUTE must be a whole number/,
    );
    expect(loadLocalConfig({}).MAX_RECORD_EVENTS_PER_MINUTE).toBe(600);
    expect(
      loadLocalConfig({ MAX_RECORD_EVENTS_PER_MINUTE: '0' }).MAX_RECORD_EVENTS_PER_MINUTE,
    ).toBe(0);
  });

  it('defaults ENTITIES to the one-word standard Mautic entities with batch routes', () => {
    expect(DEFAULT_ENTITIES).toContain('contacts');
    expect(DEFAULT_ENTITIES).toContain('companies');
    expect(DEFAULT_ENTITIES).toContain('segments');
    expect(DEFAULT_ENTITIES).not.toContain('events');
    expect(DEFAULT_ENTITIES).toHaveLength(24);
    for (const entity of DEFAULT_ENTITIES) expect(entity).toMatch(/^[a-z][a-zA-Z]{1,63}$/);
  });

  it('reads CONTACT_MATCH_FIELDS, email allowed whether listed or not', () => {
    const read = (value: string | undefined) =>
      loadIngestConfig({
        EVENTS_QUEUE_URL: 'q',
        INGEST_API_KEYS: 'k',
        DEDUP_WINDOW_SECONDS: '0',
        MAX_RECORD_EVENTS_PER_MINUTE: '0',
        CONTACT_MATCH_FIELDS: value,
      }).contactMatchFields;

    expect(read(undefined)).toEqual(['email']);
    expect(read('')).toEqual(['email']);
    expect(read('crm_id, shop_customer_id,')).toEqual(['email', 'crm_id', 'shop_customer_id']);
    expect(read('crm_id,email,crm_id')).toEqual(['email', 'crm_id']);
    expect(read(`a${'b'.repeat(63)}`)).toEqual(['email', `a${'b'.repeat(63)}`]);
  });

  it.each([
    ['an upper-case alias', 'CRM_ID'],
    ['a dash', 'crm-id'],
    ['a leading digit', '1crm'],
    ['a leading underscore', '_crm'],
    ['a JSON path', 'data.email'],
    ['an alias over 64 characters', `a${'b'.repeat(64)}`],
  ])('refuses CONTACT_MATCH_FIELDS with %s, naming the variable but not the value', (_, bad) => {
    const load = () =>
      loadIngestConfig({
        EVENTS_QUEUE_URL: 'q',
        INGEST_API_KEYS: 'k',
        DEDUP_WINDOW_SECONDS: '0',
        MAX_RECORD_EVENTS_PER_MINUTE: '0',
        CONTACT_MATCH_FIELDS: `crm_id,${bad}`,
      });

    expect(load).toThrow(ConfigError);
    expect(load).toThrow(
      /^Invalid configuration: CONTACT_MATCH_FIELDS\S* must list contact field aliases such as "crm_id"/,
    );
    expect(load).not.toThrow(bad);
  });

  it('reads CONTACT_MATCH_FIELDS for npm start too, refusing a bad one at start', () => {
    expect(loadLocalConfig({}).CONTACT_MATCH_FIELDS).toEqual(['email']);
    expect(loadLocalConfig({ CONTACT_MATCH_FIELDS: 'crm_id' }).CONTACT_MATCH_FIELDS).toEqual([
      'email',
      'crm_id',
    ]);
    expect(() => loadLocalConfig({ CONTACT_MATCH_FIELDS: 'crm id' })).toThrow(
      /CONTACT_MATCH_FIELDS\S* must list contact field aliases/,
    );
  });

  it('reads the cloud’s sources document with the prefix of its secrets’ names, the one needing the other', () => {
    const cloud = {
      EVENTS_QUEUE_URL: 'q',
      WEBHOOK_SECRET_ID: 'MauticRelay/dev/webhook',
      DEDUP_WINDOW_SECONDS: '0',
      MAX_RECORD_EVENTS_PER_MINUTE: '0',
      DEAD_LETTER_QUEUE_URL: 'dlq',
    };
    const document = JSON.stringify({ sources: {} });

    expect(loadIngestConfig(cloud).sources).toBeUndefined();
    expect(
      loadIngestConfig({
        ...cloud,
        SOURCES_DOCUMENT: document,
        SOURCES_SECRET_PREFIX: 'MauticRelay/dev/sources/',
      }).sources,
    ).toEqual({ document, secretPrefix: 'MauticRelay/dev/sources/' });
    expect(() => loadIngestConfig({ ...cloud, SOURCES_DOCUMENT: document })).toThrow(
      /SOURCES_SECRET_PREFIX is required with SOURCES_DOCUMENT/,
    );
  });

  it('names each source’s secret after the environment and the source', () => {
    expect(secretNames('dev').sourcePrefix).toBe('MauticRelay/dev/sources/');
    expect(sourceSecretName('prod', 'stripe-customers')).toBe(
      'MauticRelay/prod/sources/stripe-customers',
    );
    expect(() => sourceSecretName('Prod', 'shop')).toThrow(ConfigError);
  });

  it('reads SOURCES_FILE for npm start, unset by default', () => {
    expect(loadLocalConfig({}).SOURCES_FILE).toBeUndefined();
    expect(loadLocalConfig({ SOURCES_FILE: 'sources.json' }).SOURCES_FILE).toBe('sources.json');
    expect(() => loadLocalConfig({ SOURCES_FILE: '' })).toThrow(/SOURCES_FILE/);
  });

  it('takes a Secrets Manager secret id instead, and names what is missing', () => {
    expect(
      loadIngestConfig({
        EVENTS_QUEUE_URL: 'q',
        WEBHOOK_SECRET_ID: 'relay/dev/webhook',
        DEDUP_WINDOW_SECONDS: '0',
        MAX_RECORD_EVENTS_PER_MINUTE: '0',
      }).webhookSecretId,
    ).toBe('relay/dev/webhook');
    expect(() => loadIngestConfig({ WEBHOOK_SECRET_ID: 'x', MAX_EVENTS_PER_REQUEST: '0' })).toThrow(
      /EVENTS_QUEUE_URL is required; MAX_EVENTS_PER_REQUEST must be at least 1/,
    );
  });
});

describe('the functions’ settings', () => {
  it('are read without any package: zod’s schemas took every cold start milliseconds (issue 38)', async () => {
    const { metafile } = await build({
      entryPoints: [`${import.meta.dirname}/../../functions/shared/config.ts`],
      bundle: true,
      write: false,
      metafile: true,
      platform: 'node',
      format: 'esm',
      logLevel: 'silent',
    });

    expect(Object.keys(metafile.inputs).filter((input) => input.includes('node_modules'))).toEqual(
      [],
    );
  });

  it('refuse a variable set but empty, and check across variables once each is valid', () => {
    expect(() => loadBatchConfig({ ...required, OUTCOME_TABLE_NAME: '' })).toThrow(
      /^Invalid configuration: OUTCOME_TABLE_NAME must not be empty$/,
    );
    // DEDUP_TABLE_NAME is missing too, but that is said once MAX_BODY_BYTES is right.
    expect(() =>
      loadIngestConfig({ EVENTS_QUEUE_URL: 'q', INGEST_API_KEYS: 'k', MAX_BODY_BYTES: 'x' }),
    ).toThrow(/^Invalid configuration: MAX_BODY_BYTES must be a whole number$/);
  });
});
