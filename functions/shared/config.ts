import { type CircuitSettings, circuitSettings } from '../core/delivery/circuit.ts';
import { CONTACT_FIELD_PATTERN, ENTITY_PATTERN } from '../core/mautic-names.ts';
import { MAX_RETRY_HORIZON_SECONDS, type RetryPolicy, retryPolicy } from '../core/retry-policy.ts';
import {
  type CrossCheck,
  commaList,
  httpUrl,
  integer,
  listOf,
  optional,
  type Rule,
  readSettings,
  required,
  type Settings,
} from './setting-rules.ts';

/** The rules the local stack's own settings share (infra/local/local-config.ts). */
export { commaList, httpUrl, integer, type Rule } from './setting-rules.ts';

/** Environment variable names, shared by the functions and the stack so they cannot drift. */
export const ENV = {
  MAUTIC_BASE_URL: 'MAUTIC_BASE_URL',
  TOKEN_SECRET_ID: 'TOKEN_SECRET_ID',
  EVENTS_QUEUE_URL: 'EVENTS_QUEUE_URL',
  DEAD_LETTER_QUEUE_URL: 'DEAD_LETTER_QUEUE_URL',
  REFRESH_FUNCTION_NAME: 'REFRESH_FUNCTION_NAME',
  BATCH_SIZE: 'BATCH_SIZE',
  BATCH_WINDOW_SECONDS: 'BATCH_WINDOW_SECONDS',
  DELIVERY_CONCURRENCY: 'DELIVERY_CONCURRENCY',
  MAUTIC_TIMEOUT_MS: 'MAUTIC_TIMEOUT_MS',
  TOKEN_CACHE_SECONDS: 'TOKEN_CACHE_SECONDS',
  MAX_DELAY_SECONDS: 'MAX_DELAY_SECONDS',
  WEBHOOK_SECRET_ID: 'WEBHOOK_SECRET_ID',
  WEBHOOK_SECRET: 'WEBHOOK_SECRET',
  INGEST_API_KEYS: 'INGEST_API_KEYS',
  MAX_BODY_BYTES: 'MAX_BODY_BYTES',
  MAX_EVENTS_PER_REQUEST: 'MAX_EVENTS_PER_REQUEST',
  CREDENTIALS_CACHE_SECONDS: 'CREDENTIALS_CACHE_SECONDS',
  CLIENT_SECRET_ID: 'CLIENT_SECRET_ID',
  REFRESH_AHEAD_SECONDS: 'REFRESH_AHEAD_SECONDS',
  REFRESH_TOKEN_LIFETIME_SECONDS: 'REFRESH_TOKEN_LIFETIME_SECONDS',
  ENTITIES: 'ENTITIES',
  CONTACT_MATCH_FIELDS: 'CONTACT_MATCH_FIELDS',
  DEDUP_WINDOW_SECONDS: 'DEDUP_WINDOW_SECONDS',
  DEDUP_TABLE_NAME: 'DEDUP_TABLE_NAME',
  RETRY_BASE_SECONDS: 'RETRY_BASE_SECONDS',
  RETRY_MAX_DELAY_SECONDS: 'RETRY_MAX_DELAY_SECONDS',
  RETRY_HORIZON_SECONDS: 'RETRY_HORIZON_SECONDS',
  MAX_RECEIVE_COUNT: 'MAX_RECEIVE_COUNT',
  MAX_CONCURRENCY: 'MAX_CONCURRENCY',
  CIRCUIT_PROBE_BASE_SECONDS: 'CIRCUIT_PROBE_BASE_SECONDS',
  CIRCUIT_PROBE_MAX_SECONDS: 'CIRCUIT_PROBE_MAX_SECONDS',
  SOURCES_DOCUMENT: 'SOURCES_DOCUMENT',
  SOURCES_SECRET_PREFIX: 'SOURCES_SECRET_PREFIX',
  OUTCOME_RETENTION_SECONDS: 'OUTCOME_RETENTION_SECONDS',
  OUTCOME_TABLE_NAME: 'OUTCOME_TABLE_NAME',
  MAX_RECORD_EVENTS_PER_MINUTE: 'MAX_RECORD_EVENTS_PER_MINUTE',
} as const;

/** Every default of the functions' settings, read by the functions, local stack and CLI. */
export const DEFAULTS = Object.freeze({
  batchSize: 200,
  batchWindowSeconds: 5, // after a full hand of 10: how long the batch gathers a burst's rest
  deliveryConcurrency: 2,
  mauticTimeoutMs: 10_000,
  tokenCacheSeconds: 30,
  maxDelaySeconds: 3600, // the longest visibility delay after a 429
  maxBodyBytes: 1024 * 1024,
  maxEventsPerRequest: 500,
  credentialsCacheSeconds: 300,
  refreshAheadSeconds: 900,
  refreshTokenLifetimeSeconds: 1_209_600, // Mautic's default (14 days); it says none per token
  dedupWindowSeconds: 86_400, // how long a request id is remembered (contract §1.3): a day
  retryBaseSeconds: 30,
  retryMaxDelaySeconds: 900,
  retryHorizonSeconds: 86_400, // a day, like EventBridge's retry limit
  outcomeRetentionSeconds: 259_200, // each event's outcome (contract §1.6): three days
  maxRecordEventsPerMinute: 600, // contract §2: ten a second, far more than a contact's changes
  maxConcurrency: 2, // the event source's concurrent invocations (cdk.json's `maxConcurrency`)
});

/**
 * `ENTITIES`' default: the entities with batch writes under a one-word path (`focus`, `tweets`:
 * Mautic's bundled plugins; not `campaigns/events`, read only, nor two-word paths).
 */
export const DEFAULT_ENTITIES: ReadonlyArray<string> = Object.freeze(
  `contacts companies segments notes devices tags assets campaigns categories messages
  dynamiccontents emails forms notifications pages points reports smses stages users roles
  hooks focus tweets`.split(/\s+/),
);

/** The longest window accepted: 30 days. */
export const MAX_DEDUP_WINDOW_SECONDS = 2_592_000;

/** The de-duplication table's key and TTL (Powertools idempotency's), its failure's log event. */
export const DEDUP_TABLE_KEY = 'id';
export const DEDUP_TTL_ATTRIBUTE = 'expiration';
export const DEDUP_STORE_FAILED_EVENT = 'dedup_store_failed';

/** `OUTCOME_RETENTION_SECONDS` (contract §1.6): 0 keeps no outcome, at most 30 days. */
export const outcomeRetention = integer(0, 2_592_000, DEFAULTS.outcomeRetentionSeconds);
const outcomeSettings = {
  [ENV.OUTCOME_RETENTION_SECONDS]: outcomeRetention,
  [ENV.OUTCOME_TABLE_NAME]: optional,
};
/** Where outcomes are kept and how long; undefined: none is (retention 0, or no table set). */
type OutcomeEnv = { OUTCOME_RETENTION_SECONDS: number; OUTCOME_TABLE_NAME?: string | undefined };
const outcomesOf = (env: OutcomeEnv) =>
  env.OUTCOME_RETENTION_SECONDS === 0 || env.OUTCOME_TABLE_NAME === undefined
    ? undefined
    : { tableName: env.OUTCOME_TABLE_NAME, retentionSeconds: env.OUTCOME_RETENTION_SECONDS };

const batchRules = {
  [ENV.MAUTIC_BASE_URL]: httpUrl,
  [ENV.TOKEN_SECRET_ID]: required,
  [ENV.EVENTS_QUEUE_URL]: required,
  [ENV.DEAD_LETTER_QUEUE_URL]: required,
  [ENV.REFRESH_FUNCTION_NAME]: required,
  [ENV.BATCH_SIZE]: integer(1, 200, DEFAULTS.batchSize),
  [ENV.BATCH_WINDOW_SECONDS]: integer(0, 300, DEFAULTS.batchWindowSeconds),
  [ENV.DELIVERY_CONCURRENCY]: integer(1, 10, DEFAULTS.deliveryConcurrency),
  // Unset: each Mautic call's timeout follows Mautic's observed pace (call-budget.ts); set, at
  // most this (a fixed 10 s would retry, or doubt, calls of a slow Mautic that worked).
  [ENV.MAUTIC_TIMEOUT_MS]: integer(100, 900_000),
  [ENV.TOKEN_CACHE_SECONDS]: integer(0, 3600, DEFAULTS.tokenCacheSeconds),
  // 12 hours is the longest visibility timeout SQS accepts.
  [ENV.MAX_DELAY_SECONDS]: integer(1, 43_200, DEFAULTS.maxDelaySeconds),
  [ENV.RETRY_BASE_SECONDS]: integer(1, 43_200, DEFAULTS.retryBaseSeconds),
  [ENV.RETRY_MAX_DELAY_SECONDS]: integer(1, 43_200, DEFAULTS.retryMaxDelaySeconds),
  [ENV.RETRY_HORIZON_SECONDS]: integer(1, MAX_RETRY_HORIZON_SECONDS, DEFAULTS.retryHorizonSeconds),
  [ENV.MAX_RECEIVE_COUNT]: integer(1, 1000),
  [ENV.MAX_CONCURRENCY]: integer(1, 1000, DEFAULTS.maxConcurrency),
  [ENV.CIRCUIT_PROBE_BASE_SECONDS]: integer(1, 600),
  [ENV.CIRCUIT_PROBE_MAX_SECONDS]: integer(1, 600),
  // The action ledger's and Mautic's health's table, made even with de-duplication off.
  [ENV.DEDUP_TABLE_NAME]: required,
  ...outcomeSettings,
};

/** The batch function's configuration. */
export interface BatchConfig {
  mauticBaseUrl: string;
  tokenSecretId: string;
  eventsQueueUrl: string;
  deadLetterQueueUrl: string;
  refreshFunctionName: string;
  batchSize: number;
  /** How long to gather events before delivering them (the invocation's own receives). */
  batchWindowSeconds: number;
  deliveryConcurrency: number;
  /** The longest a Mautic call may take; unset, its own timeout follows Mautic's pace only. */
  mauticTimeoutMs: number | undefined;
  tokenCacheSeconds: number;
  maxDelaySeconds: number;
  retry: RetryPolicy;
  circuit: CircuitSettings;
  /** The table of the action ledger (`addPoints` at most once) and of Mautic's health. */
  actionLedgerTableName: string;
  outcomes: ReturnType<typeof outcomesOf>;
}

/** Reads the batch function's environment at cold start; a `ConfigError` names what is wrong. */
export function loadBatchConfig(
  env: Readonly<Record<string, string | undefined>>,
): Readonly<BatchConfig> {
  const values = readSettings(env, batchRules);
  return Object.freeze({
    mauticBaseUrl: values.MAUTIC_BASE_URL,
    tokenSecretId: values.TOKEN_SECRET_ID,
    eventsQueueUrl: values.EVENTS_QUEUE_URL,
    deadLetterQueueUrl: values.DEAD_LETTER_QUEUE_URL,
    refreshFunctionName: values.REFRESH_FUNCTION_NAME,
    batchSize: values.BATCH_SIZE,
    batchWindowSeconds: values.BATCH_WINDOW_SECONDS,
    deliveryConcurrency: values.DELIVERY_CONCURRENCY,
    mauticTimeoutMs: values.MAUTIC_TIMEOUT_MS,
    tokenCacheSeconds: values.TOKEN_CACHE_SECONDS,
    maxDelaySeconds: values.MAX_DELAY_SECONDS,
    retry: retryPolicy({
      baseSeconds: values.RETRY_BASE_SECONDS,
      maxDelaySeconds: values.RETRY_MAX_DELAY_SECONDS,
      horizonSeconds: values.RETRY_HORIZON_SECONDS,
      maxReceiveCount: values.MAX_RECEIVE_COUNT,
    }),
    circuit: circuitSettings({
      probeBaseSeconds: values.CIRCUIT_PROBE_BASE_SECONDS,
      probeMaxSeconds: values.CIRCUIT_PROBE_MAX_SECONDS,
      retryBaseSeconds: values.RETRY_BASE_SECONDS,
      maxConcurrency: values.MAX_CONCURRENCY,
      deliveryConcurrency: values.DELIVERY_CONCURRENCY,
    }),
    actionLedgerTableName: values.DEDUP_TABLE_NAME,
    outcomes: outcomesOf(values),
  });
}

const entityNames = listOf(ENTITY_PATTERN, 'must list Mautic API path names such as "contacts"');
/** `ENTITIES`: comma-separated entity names, each a Mautic API path name; unset: the default. */
export const entityList: Rule<string[]> = (value) => {
  const names = entityNames(value);
  return names.length === 0 ? [...DEFAULT_ENTITIES] : names;
};

const contactFields = listOf(
  CONTACT_FIELD_PATTERN,
  'must list contact field aliases such as "crm_id" (/^[a-z][a-z0-9_]{0,63}$/)',
);
/**
 * `CONTACT_MATCH_FIELDS`: contact field aliases an event may `match` on (contract §5); `email`
 * always, listed or not (Mautic keeps it unique by itself, and it is the contract's default).
 */
export const contactMatchFieldList: Rule<string[]> = (value) => [
  ...new Set(['email', ...contactFields(value)]),
];

/** `DEDUP_WINDOW_SECONDS`: 0 turns de-duplication off. */
export const dedupWindow = integer(0, MAX_DEDUP_WINDOW_SECONDS, DEFAULTS.dedupWindowSeconds);

/** `MAX_RECORD_EVENTS_PER_MINUTE`: 0 turns the bound off. */
export const MAX_RECORD_EVENTS_PER_MINUTE = 1_000_000;
export const recordEventsPerMinute = integer(
  0,
  MAX_RECORD_EVENTS_PER_MINUTE,
  DEFAULTS.maxRecordEventsPerMinute,
);

const ingestRules = {
  [ENV.EVENTS_QUEUE_URL]: required,
  [ENV.WEBHOOK_SECRET_ID]: optional,
  [ENV.WEBHOOK_SECRET]: commaList,
  [ENV.INGEST_API_KEYS]: commaList,
  [ENV.MAX_BODY_BYTES]: integer(1024, 6 * 1024 * 1024, DEFAULTS.maxBodyBytes),
  [ENV.MAX_EVENTS_PER_REQUEST]: integer(1, 10_000, DEFAULTS.maxEventsPerRequest),
  [ENV.CREDENTIALS_CACHE_SECONDS]: integer(0, 3600, DEFAULTS.credentialsCacheSeconds),
  [ENV.ENTITIES]: entityList,
  [ENV.CONTACT_MATCH_FIELDS]: contactMatchFieldList,
  [ENV.DEDUP_WINDOW_SECONDS]: dedupWindow,
  [ENV.DEDUP_TABLE_NAME]: optional,
  [ENV.MAX_RECORD_EVENTS_PER_MINUTE]: recordEventsPerMinute,
  [ENV.SOURCES_DOCUMENT]: optional,
  [ENV.SOURCES_SECRET_PREFIX]: optional,
  [ENV.DEAD_LETTER_QUEUE_URL]: optional,
  ...outcomeSettings,
};

/** The ingest's rules across its variables, once each is valid. */
const ingestChecks: ReadonlyArray<CrossCheck<Settings<typeof ingestRules>>> = [
  (env) =>
    env.SOURCES_DOCUMENT !== undefined && env.DEAD_LETTER_QUEUE_URL === undefined
      ? [
          ENV.DEAD_LETTER_QUEUE_URL,
          'is required with SOURCES_DOCUMENT (a payload that cannot be mapped is kept there)',
        ]
      : undefined,
  (env) =>
    env.SOURCES_DOCUMENT !== undefined && env.SOURCES_SECRET_PREFIX === undefined
      ? [ENV.SOURCES_SECRET_PREFIX, 'is required with SOURCES_DOCUMENT']
      : undefined,
  (env) =>
    (env.DEDUP_WINDOW_SECONDS > 0 || env.MAX_RECORD_EVENTS_PER_MINUTE > 0) &&
    env.DEDUP_TABLE_NAME === undefined
      ? [
          ENV.DEDUP_TABLE_NAME,
          'is required unless DEDUP_WINDOW_SECONDS and MAX_RECORD_EVENTS_PER_MINUTE are 0',
        ]
      : undefined,
  (env) =>
    env.WEBHOOK_SECRET_ID === undefined &&
    env.WEBHOOK_SECRET.length === 0 &&
    env.INGEST_API_KEYS.length === 0
      ? [ENV.WEBHOOK_SECRET_ID, 'or WEBHOOK_SECRET or INGEST_API_KEYS is required']
      : undefined,
];

/** The ingest function's configuration. */
export interface IngestConfig {
  eventsQueueUrl: string;
  /** Secrets Manager secret with the credentials (the cloud); else the two lists below (local). */
  webhookSecretId: string | undefined;
  webhookSecrets: string[];
  apiKeys: string[];
  maxBodyBytes: number;
  maxEvents: number;
  credentialsCacheSeconds: number;
  entities: string[];
  /** The contact fields `match` may name (`CONTACT_MATCH_FIELDS`), `email` always among them. */
  contactMatchFields: string[];
  /** 0: de-duplication is off. */
  dedupWindowSeconds: number;
  dedupTableName: string | undefined;
  /** The most events a record may have accepted in a minute (contract §2); 0: no bound. */
  maxRecordEventsPerMinute: number;
  /**
   * The cloud's sources (contract §6): the document (JSON, no secrets) and its secrets' name
   * prefix. Undefined: none (or, locally, SOURCES_FILE, which the ingest thread reads itself).
   */
  sources: { document: string; secretPrefix: string } | undefined;
  /** Where a source's payload that cannot be mapped is kept (contract §6); needed with sources. */
  deadLetterQueueUrl: string | undefined;
  outcomes: ReturnType<typeof outcomesOf>;
}

/** Reads and checks the ingest function's environment once, at cold start. */
export function loadIngestConfig(
  env: Readonly<Record<string, string | undefined>>,
): Readonly<IngestConfig> {
  const values = readSettings(env, ingestRules, ingestChecks);
  return Object.freeze({
    eventsQueueUrl: values.EVENTS_QUEUE_URL,
    webhookSecretId: values.WEBHOOK_SECRET_ID,
    webhookSecrets: values.WEBHOOK_SECRET,
    apiKeys: values.INGEST_API_KEYS,
    maxBodyBytes: values.MAX_BODY_BYTES,
    maxEvents: values.MAX_EVENTS_PER_REQUEST,
    credentialsCacheSeconds: values.CREDENTIALS_CACHE_SECONDS,
    entities: values.ENTITIES,
    contactMatchFields: values.CONTACT_MATCH_FIELDS,
    dedupWindowSeconds: values.DEDUP_WINDOW_SECONDS,
    dedupTableName: values.DEDUP_TABLE_NAME,
    maxRecordEventsPerMinute: values.MAX_RECORD_EVENTS_PER_MINUTE,
    sources:
      values.SOURCES_DOCUMENT === undefined
        ? undefined
        : { document: values.SOURCES_DOCUMENT, secretPrefix: values.SOURCES_SECRET_PREFIX ?? '' },
    deadLetterQueueUrl: values.DEAD_LETTER_QUEUE_URL,
    outcomes: outcomesOf(values),
  });
}

const refreshRules = {
  [ENV.CLIENT_SECRET_ID]: required,
  [ENV.TOKEN_SECRET_ID]: required,
  [ENV.REFRESH_AHEAD_SECONDS]: integer(60, 86_400, DEFAULTS.refreshAheadSeconds),
  [ENV.REFRESH_TOKEN_LIFETIME_SECONDS]: integer(
    3600,
    31_536_000,
    DEFAULTS.refreshTokenLifetimeSeconds,
  ),
  [ENV.MAUTIC_TIMEOUT_MS]: integer(100, 120_000, DEFAULTS.mauticTimeoutMs),
};

/** The token refresher's configuration. */
export interface RefreshConfig {
  clientSecretId: string;
  tokenSecretId: string;
  refreshAheadSeconds: number;
  refreshTokenLifetimeSeconds: number;
  mauticTimeoutMs: number;
}

/** Reads and checks the refresher's environment once, at cold start. */
export function loadRefreshConfig(
  env: Readonly<Record<string, string | undefined>>,
): Readonly<RefreshConfig> {
  const values = readSettings(env, refreshRules);
  return Object.freeze({
    clientSecretId: values.CLIENT_SECRET_ID,
    tokenSecretId: values.TOKEN_SECRET_ID,
    refreshAheadSeconds: values.REFRESH_AHEAD_SECONDS,
    refreshTokenLifetimeSeconds: values.REFRESH_TOKEN_LIFETIME_SECONDS,
    mauticTimeoutMs: values.MAUTIC_TIMEOUT_MS,
  });
}
