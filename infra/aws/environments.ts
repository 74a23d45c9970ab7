import * as logs from 'aws-cdk-lib/aws-logs';
import * as z from 'zod';
import { SourceConfigError } from '../../functions/core/errors.ts';
import { CONTACT_FIELD_PATTERN, ENTITY_PATTERN } from '../../functions/core/events.ts';
import {
  MAX_RETRY_HORIZON_SECONDS,
  type RetryPolicy,
  retryPolicy,
} from '../../functions/core/retry-policy.ts';
import {
  compileSources,
  parseSourcesDocument,
  type SourceDefinition,
} from '../../functions/core/sources.ts';
import { MAX_DEDUP_WINDOW_SECONDS } from '../../functions/shared/config.ts';

/** The log retentions CloudWatch offers, by days, as far as the relay offers them. */
const LOG_RETENTION: Readonly<Record<number, logs.RetentionDays>> = {
  1: logs.RetentionDays.ONE_DAY,
  3: logs.RetentionDays.THREE_DAYS,
  5: logs.RetentionDays.FIVE_DAYS,
  7: logs.RetentionDays.ONE_WEEK,
  14: logs.RetentionDays.TWO_WEEKS,
  30: logs.RetentionDays.ONE_MONTH,
  60: logs.RetentionDays.TWO_MONTHS,
  90: logs.RetentionDays.THREE_MONTHS,
  180: logs.RetentionDays.SIX_MONTHS,
  365: logs.RetentionDays.ONE_YEAR,
};

/**
 * The batch function gathers its batch for at most this share of its timeout: the rest is for
 * the Mautic calls and the settling, which must end before the timeout does.
 */
const MAX_WINDOW_SHARE_OF_TIMEOUT = 0.25;

/** One environment's settings, from `cdk.json` context `environments.<name>`. */
const settingsSchema = z.strictObject({
  mauticBaseUrl: z.url({ protocol: /^https$/, error: 'must be an https URL' }),
  /** Items per Mautic call; Mautic's api_batch_max_limit is 200. */
  batchSize: z.number().int().min(1).max(200),
  /**
   * How long the batch function gathers events from the queue before it delivers them
   * (`BATCH_WINDOW_SECONDS`): the event source hands it at most 10 from the FIFO queue, it
   * receives the rest itself. Needed above 10 items; at most a quarter of `batchTimeoutSeconds`.
   */
  batchingWindowSeconds: z.number().int().min(0).max(300),
  /** Concurrent batch invocations toward Mautic (the mapping's maximumConcurrency, 2–1000). */
  maxConcurrency: z.number().int().min(2).max(1000),
  /** First delay before a failed event comes back (contract §2 `RETRY_BASE_SECONDS`). */
  retryBaseSeconds: z.number().int().min(1).max(43_200),
  /** Longest delay between two tries (`RETRY_MAX_DELAY_SECONDS`). */
  retryMaxDelaySeconds: z.number().int().min(1).max(43_200),
  /** How long an event is retried before it is dead-lettered (`RETRY_HORIZON_SECONDS`), in hours. */
  retryHorizonHours: z
    .number()
    .positive()
    .max(MAX_RETRY_HORIZON_SECONDS / 3600),
  /**
   * Keep the queues (with their events) and the secrets when the stack is deleted or they are
   * replaced. Only an environment whose data may be lost (a developer's) should say false.
   */
  retainData: z.boolean(),
  /**
   * The batch function's timeout. A Mautic call may take the whole of it less a few seconds'
   * margin, so give a slow Mautic (many seconds per 200 contacts) a minute or more.
   */
  batchTimeoutSeconds: z.number().int().min(10).max(900),
  /**
   * How often the refresher runs, as an EventBridge rate of 1 to 10 minutes: tokens are renewed
   * once they have less than 15 minutes left, so a slower schedule would let them lapse.
   */
  refreshSchedule: z
    .string()
    .regex(
      /^rate\((1 minute|([2-9]|10) minutes)\)$/,
      'must be rate(1 minute) to rate(10 minutes): tokens are renewed 15 minutes ahead',
    ),
  /** Where alarms are e-mailed; empty for none (the SNS topic is created anyway). */
  alarmEmail: z.union([z.literal(''), z.email()]),
  oldestEventAlarmSeconds: z.number().int().min(60),
  apiThrottle: z.strictObject({
    rateLimit: z.number().positive(),
    burstLimit: z.number().int().positive(),
  }),
  logRetentionDays: z
    .number()
    .refine(
      (days) => days in LOG_RETENTION,
      `must be one of ${Object.keys(LOG_RETENTION).join(', ')}`,
    )
    .transform((days) => LOG_RETENTION[days] as logs.RetentionDays),
  logLevel: z.enum(['DEBUG', 'INFO', 'WARN', 'ERROR']),
  /**
   * The entities events may name (`ENTITIES`): "standard" for the standard Mautic entities that
   * take batch writes (docs/configuration.md lists them), or a list of Mautic API path names.
   */
  entities: z.union([
    z.literal('standard'),
    z
      .array(z.string().regex(ENTITY_PATTERN, 'must be Mautic API path names such as "contacts"'))
      .min(1),
  ]),
  /**
   * The contact fields events may `match` on besides `email`, which is always allowed
   * (`CONTACT_MATCH_FIELDS`, contract §5): field aliases such as "crm_id".
   */
  contactMatchFields: z.array(
    z
      .string()
      .regex(CONTACT_FIELD_PATTERN, 'must be contact field aliases such as "crm_id" or "email"'),
  ),
  /** How long a request id is remembered (`DEDUP_WINDOW_SECONDS`); 0 turns de-duplication off. */
  dedupWindowSeconds: z.number().int().min(0).max(MAX_DEDUP_WINDOW_SECONDS),
  /**
   * The sources (contract §6): what a sources document holds under `"sources"`, without secrets
   * (each source's secret is in Secrets Manager, set with `sources set-secret`). `{}`: none.
   */
  sources: z.record(z.string(), z.unknown()),
});
/** One environment's settings and its name, as the stack takes them. */
export type RelaySettings = Omit<z.output<typeof settingsSchema>, 'sources'> & {
  name: string;
  /** The retry policy the settings make, `maxReceiveCount` derived. */
  retry: RetryPolicy;
  /** The sources, checked: every expression compiles and none holds a secret. */
  sources: SourceDefinition[];
  /** The sources document as the ingest reads it (SOURCES_DOCUMENT): compact JSON. */
  sourcesDocument: string;
};

/**
 * Picks and checks the settings of `-c env=NAME`. A missing or unknown name, or a bad setting,
 * is an error that says what to write.
 */
export function environmentSettings(name: unknown, environments: unknown): RelaySettings {
  const known =
    typeof environments === 'object' && environments !== null ? Object.keys(environments) : [];
  if (typeof name !== 'string' || name === '') {
    throw new Error(
      `Choose an environment with -c env=NAME; known environments: ${known.join(', ') || '(none in cdk.json)'}`,
    );
  }
  if (!known.includes(name)) {
    throw new Error(`Unknown environment "${name}"; known environments: ${known.join(', ')}`);
  }
  if (!/^[a-z][a-z0-9-]{0,31}$/.test(name)) {
    throw new Error(`Environment name "${name}" must be lower-case letters, digits and dashes`);
  }
  const result = settingsSchema.safeParse((environments as Record<string, unknown>)[name]);
  if (!result.success) {
    const problems = result.error.issues.map((issue) => `${issue.path.join('.')} ${issue.message}`);
    throw new Error(
      `Invalid settings for environment "${name}" in cdk.json: ${problems.join('; ')}`,
    );
  }
  if (result.data.batchSize > 10 && result.data.batchingWindowSeconds < 1) {
    throw new Error(
      `Invalid settings for environment "${name}": batchSize above 10 needs batchingWindowSeconds of at least 1`,
    );
  }
  if (
    result.data.batchingWindowSeconds >
    result.data.batchTimeoutSeconds * MAX_WINDOW_SHARE_OF_TIMEOUT
  ) {
    throw new Error(
      `Invalid settings for environment "${name}": batchingWindowSeconds (${result.data.batchingWindowSeconds}) must be at most a quarter of batchTimeoutSeconds (${result.data.batchTimeoutSeconds}), so that the batch it gathers can still be delivered and settled in the invocation; lower the window or raise the timeout`,
    );
  }
  let retry: RetryPolicy;
  try {
    retry = retryPolicy({
      baseSeconds: result.data.retryBaseSeconds,
      maxDelaySeconds: result.data.retryMaxDelaySeconds,
      horizonSeconds: Math.round(result.data.retryHorizonHours * 3600),
    });
  } catch (error) {
    throw new Error(
      `Invalid settings for environment "${name}": retryHorizonHours, retryMaxDelaySeconds: ${(error as Error).message}`,
    );
  }
  return { ...result.data, name, retry, ...checkSources(name, result.data.sources) };
}

/**
 * The environment's sources, compiled as the ingest will compile them (so `cdk synth` refuses
 * what the function would), without the secrets, which cdk.json, being committed, must not hold.
 */
function checkSources(
  environment: string,
  sources: Record<string, unknown>,
): { sources: SourceDefinition[]; sourcesDocument: string } {
  const invalid = (problem: string) =>
    new Error(`Invalid settings for environment "${environment}" in cdk.json: sources: ${problem}`);
  let definitions: SourceDefinition[];
  try {
    definitions = parseSourcesDocument({ sources });
    compileSources(definitions, { requireSecrets: false });
  } catch (error) {
    if (error instanceof SourceConfigError) throw invalid(error.message);
    throw error;
  }
  const withSecret = definitions.find((definition) => definition.secrets.length > 0);
  if (withSecret !== undefined) {
    throw invalid(
      `Source "${withSecret.name}": cdk.json is committed, so it holds no secret: remove verify.secret and verify.secrets, and set it with "npx mautic-relay sources set-secret ${withSecret.name} --env ${environment}"`,
    );
  }
  // Its size is checked with the rest of the ingest's environment (environment-size.ts).
  return { sources: definitions, sourcesDocument: JSON.stringify({ sources }) };
}
