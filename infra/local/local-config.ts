import * as z from 'zod';
import { ConfigError, SettingProblem } from '../../functions/core/errors.ts';
import {
  MAX_RETRY_HORIZON_SECONDS,
  type RetryPolicy,
  retryPolicy,
} from '../../functions/core/retry-policy.ts';
import {
  commaList,
  contactMatchFieldList,
  DEFAULTS,
  dedupWindow,
  entityList,
  httpUrl,
  integer,
  outcomeRetention,
  type Rule,
  recordEventsPerMinute,
} from '../../functions/shared/config.ts';
import { LINE_NAMES } from '../../mautic-simulator/versions.ts';

/** A rule of the functions' settings (setting-rules.ts) as a field of the schema below. */
const setting = <T>(rule: Rule<T>) =>
  z
    .string()
    .optional()
    .transform((value, ctx): T => {
      try {
        return rule(value);
      } catch (error) {
        if (!(error instanceof SettingProblem)) throw error;
        ctx.addIssue({ code: 'custom', message: error.message });
        return z.NEVER;
      }
    });

/** Contract §3, and a few knobs beyond it (documented in docs/configuration.md). */
const localSchema = z
  .object({
    PORT: setting(integer(0, 65_535, 3000)),
    MAUTIC_BASE_URL: setting((value) => (value === undefined ? undefined : httpUrl(value))),
    MAUTIC_CLIENT_ID: z.string().optional(),
    MAUTIC_CLIENT_SECRET: z.string().optional(),
    MAUTIC_GRANT_TYPE: z
      .enum(['client_credentials', 'authorization_code'])
      .default('client_credentials'),
    WEBHOOK_SECRET: setting(commaList),
    INGEST_API_KEYS: setting(commaList),
    BATCH_SIZE: setting(integer(1, 200, DEFAULTS.batchSize)),
    BATCH_WINDOW_SECONDS: setting(integer(0, 300, DEFAULTS.batchWindowSeconds)),
    // Unset: derived from the retry settings (contract §3), as the stack derives it.
    MAX_RECEIVE_COUNT: setting(integer(1, 1000)),
    RETRY_BASE_SECONDS: setting(integer(1, 43_200, DEFAULTS.retryBaseSeconds)),
    RETRY_MAX_DELAY_SECONDS: setting(integer(1, 43_200, DEFAULTS.retryMaxDelaySeconds)),
    RETRY_HORIZON_SECONDS: setting(
      integer(1, MAX_RETRY_HORIZON_SECONDS, DEFAULTS.retryHorizonSeconds),
    ),
    MAX_CONCURRENCY: setting(integer(1, 20, 2)),
    // Unset: derived from the retry settings, as in the cloud (docs/configuration.md).
    CIRCUIT_PROBE_BASE_SECONDS: setting(integer(1, 600, 0)),
    CIRCUIT_PROBE_MAX_SECONDS: setting(integer(1, 600, 0)),
    // As the stack's: the function's 60 s fits a real Mautic's slowest 200-item calls (4–7 s on
    // 2 cores) many times over, and the visibility timeout is 6 times it.
    VISIBILITY_TIMEOUT_SECONDS: setting(integer(1, 43_200, 360)),
    BATCH_TIMEOUT_SECONDS: setting(integer(1, 900, 60)),
    REFRESH_INTERVAL_SECONDS: setting(integer(1, 86_400, 300)),
    TOKEN_CACHE_SECONDS: setting(integer(0, 3600, DEFAULTS.tokenCacheSeconds)),
    LOG_LEVEL: z.enum(['DEBUG', 'INFO']).default('INFO'),
    /** The port `authorize --local` listens on; the embedded simulator registers its redirect URI. */
    AUTHORIZE_PORT: setting(integer(1, 65_535, 8765)),
    ENTITIES: setting(entityList),
    CONTACT_MATCH_FIELDS: setting(contactMatchFieldList),
    DEDUP_WINDOW_SECONDS: setting(dedupWindow),
    /** One busy record never stalls the others (contract §2); 0 turns the bound off. */
    MAX_RECORD_EVENTS_PER_MINUTE: setting(recordEventsPerMinute),
    /** The sources document (contract §6), with its secrets; read again when it changes. */
    /** How long each event's outcome is kept (contract §1.6); 0 keeps none. */
    OUTCOME_RETENTION_SECONDS: setting(outcomeRetention),
    SOURCES_FILE: z.string().min(1).optional(),
    /** The Mautic line the embedded simulator plays (docs/mautic.md §8); 5.1 when unset. */
    MAUTIC_SIMULATOR_VERSION: z
      .enum(LINE_NAMES, { error: `must be one of ${LINE_NAMES.join(', ')}` })
      .optional(),
  })
  .superRefine((env, ctx) => {
    if (env.MAUTIC_BASE_URL && (!env.MAUTIC_CLIENT_ID || !env.MAUTIC_CLIENT_SECRET)) {
      ctx.addIssue({
        code: 'custom',
        path: ['MAUTIC_CLIENT_ID'],
        message: 'and MAUTIC_CLIENT_SECRET are required with MAUTIC_BASE_URL',
      });
    }
    if (env.MAUTIC_BASE_URL && env.MAUTIC_SIMULATOR_VERSION) {
      ctx.addIssue({
        code: 'custom',
        path: ['MAUTIC_SIMULATOR_VERSION'],
        message: 'sets the embedded simulator, which MAUTIC_BASE_URL replaces: unset one of them',
      });
    }
    if (env.BATCH_TIMEOUT_SECONDS > env.VISIBILITY_TIMEOUT_SECONDS) {
      ctx.addIssue({
        code: 'custom',
        path: ['BATCH_TIMEOUT_SECONDS'],
        message: 'must not exceed VISIBILITY_TIMEOUT_SECONDS',
      });
    }
  });
export type LocalConfig = z.output<typeof localSchema>;

/** Reads the local stack's environment, naming every bad variable. */
export function loadLocalConfig(env: Readonly<Record<string, string | undefined>>): LocalConfig {
  const result = localSchema.safeParse(env);
  if (result.success) return result.data;
  throw new ConfigError(
    `Invalid configuration: ${result.error.issues.map((i) => `${i.path.join('.')} ${i.message}`).join('; ')}`,
  );
}

/** The retry policy of the local settings; without MAX_RECEIVE_COUNT, derived as the stack does. */
export function localRetryPolicy(config: LocalConfig): RetryPolicy {
  return retryPolicy({
    baseSeconds: config.RETRY_BASE_SECONDS,
    maxDelaySeconds: config.RETRY_MAX_DELAY_SECONDS,
    horizonSeconds: config.RETRY_HORIZON_SECONDS,
    maxReceiveCount: config.MAX_RECEIVE_COUNT,
  });
}
