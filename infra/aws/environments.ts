import * as logs from 'aws-cdk-lib/aws-logs';
import * as z from 'zod';
import { SourceConfigError } from '../../functions/core/errors.ts';
import { CONTACT_FIELD_PATTERN, ENTITY_PATTERN } from '../../functions/core/mautic-names.ts';
import {
  MAX_RETRY_HORIZON_SECONDS,
  type RetryPolicy,
  retryPolicy,
} from '../../functions/core/retry-policy.ts';
import {
  compileSources,
  parseSourcesDocument,
  type SourceDefinition,
} from '../../functions/core/sources/sources.ts';
import {
  type FreshnessPolicy,
  keepsToWriteInterval,
  MIN_SECRET_WRITE_INTERVAL_SECONDS,
} from '../../functions/core/tokens/token-freshness.ts';
import {
  DEFAULTS,
  MAX_DEDUP_WINDOW_SECONDS,
  MAX_RECORD_EVENTS_PER_MINUTE,
} from '../../functions/shared/config.ts';

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

/**
 * The AWS account the shipped `cdk.json` binds its environments to: AWS's documentation example,
 * which no credentials match, so such an environment synthesizes but never deploys.
 */
export const PLACEHOLDER_ACCOUNT = '123456789012';

/** One environment's settings, from `cdk.json` context `environments.<name>`. */
const settingsSchema = z.strictObject({
  /**
   * The account and region the stack is bound to: `cdk deploy` (and `cdk bootstrap`) refuse
   * credentials of another account, so `-c env=prod` never lands where the shell happens to point.
   */
  account: z.string().regex(/^\d{12}$/, 'must be a 12-digit AWS account id'),
  region: z
    .string()
    .regex(/^[a-z]{2}(-gov)?-[a-z]+-\d$/, 'must be an AWS region such as eu-west-1'),
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
  /**
   * Reserve concurrency: 1 for the refresher, `maxConcurrency` for the batch function, so that no
   * other function of the account can starve them. Lambda keeps 100 unreserved, so the account's
   * concurrency quota must be at least 101 + `maxConcurrency` (new accounts often have 10 or 50:
   * `npx mautic-relay doctor` says). Off, the refresher's compare-and-swap writes keep it the
   * single writer of the tokens all the same.
   */
  reservedConcurrency: z.boolean(),
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
  /**
   * Mautic's access token lifetime, as its Configuration, API Settings, says ("Access token
   * lifetime (in minutes)", 60 by default): how often the refresher writes the token secret.
   * `cdk synth` warns when it and `refreshSchedule` make that more than once per 10 minutes.
   */
  mauticAccessTokenLifetimeMinutes: z.number().int().min(1).max(525_600),
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
   * How long each event's outcome is kept (`OUTCOME_RETENTION_SECONDS`, contract §1.6), at most
   * 30 days; 0 keeps none (GET /events answers 404 outcomes_disabled, the functions are granted
   * nothing on the outcome table).
   */
  outcomeRetentionSeconds: z.number().int().min(0).max(MAX_DEDUP_WINDOW_SECONDS),
  /**
   * The most events one record may have accepted in a minute (`MAX_RECORD_EVENTS_PER_MINUTE`,
   * contract §2); 0 turns the bound off.
   */
  maxRecordEventsPerMinute: z.number().int().min(0).max(MAX_RECORD_EVENTS_PER_MINUTE),
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
 * is an error that says what to write. Its sources are compiled: `loadSourceCompiler()` first.
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
  checkPlaceholders(name, result.data);
  return { ...result.data, name, retry, ...checkSources(name, result.data.sources) };
}

/** The refresher's renewal policy in this environment: its schedule, and the default ahead time. */
export function refreshPolicy(settings: Pick<RelaySettings, 'refreshSchedule'>): FreshnessPolicy {
  // rate(1 minute) to rate(10 minutes), as the schema allows.
  const minutes = Number(/\d+/.exec(settings.refreshSchedule)?.[0]);
  return { refreshAheadSeconds: DEFAULTS.refreshAheadSeconds, scheduleSeconds: minutes * 60 };
}

/**
 * What `cdk synth` warns of when the refresher, with this token lifetime and schedule, would
 * write the token secret more often than AWS's one PutSecretValue per secret every 10 minutes:
 * it renews tokens before they lapse all the same (functions/core/tokens/token-freshness.ts). Nothing
 * when it keeps to it.
 */
export function secretWriteWarning(
  settings: Pick<RelaySettings, 'name' | 'refreshSchedule' | 'mauticAccessTokenLifetimeMinutes'>,
): string | undefined {
  const policy = refreshPolicy(settings);
  const keeps = (minutes: number, scheduleSeconds = policy.scheduleSeconds) =>
    keepsToWriteInterval(minutes * 60, { ...policy, scheduleSeconds });
  const lifetime = settings.mauticAccessTokenLifetimeMinutes;
  if (keeps(lifetime)) return undefined;
  // Found by 21 minutes: 10 for the interval, 10 for the longest schedule, 1 for its slack.
  let shortest = lifetime + 1;
  while (!keeps(shortest)) shortest++;
  const faster = keeps(lifetime, 60) ? ', or refreshSchedule to rate(1 minute)' : '';
  return `Environment "${settings.name}": with mauticAccessTokenLifetimeMinutes ${lifetime} and refreshSchedule ${settings.refreshSchedule}, the refresher would write the token secret more often than AWS's one write per secret every ${MIN_SECRET_WRITE_INTERVAL_SECONDS / 60} minutes, to renew the tokens before they expire. Set Mautic's access token lifetime (Configuration, API Settings), and this setting with it, to ${shortest} minutes or more${faster}`;
}

/** A value the shipped `cdk.json` holds only to be replaced: example.com and its subdomains. */
const EXAMPLE_DOMAIN = /(^|[.@])example\.com$/i;

/**
 * Refuses an environment bound to a real account that still holds a shipped placeholder: a
 * deploy would deliver to no Mautic, or e-mail its alarms to no one. One still bound to the
 * placeholder account synthesizes (`npm run synth` checks the shipped environments) and cannot
 * deploy anywhere.
 */
function checkPlaceholders(
  name: string,
  settings: { account: string; mauticBaseUrl: string; alarmEmail: string },
): void {
  if (settings.account === PLACEHOLDER_ACCOUNT) return;
  const left = [
    EXAMPLE_DOMAIN.test(new URL(settings.mauticBaseUrl).hostname)
      ? `mauticBaseUrl (${settings.mauticBaseUrl}: your Mautic's https URL)`
      : undefined,
    EXAMPLE_DOMAIN.test(settings.alarmEmail)
      ? `alarmEmail (${settings.alarmEmail}: where alarms go, or "" for none)`
      : undefined,
  ].filter((problem) => problem !== undefined);
  if (left.length > 0) {
    throw new Error(
      `Invalid settings for environment "${name}" in cdk.json: it is bound to account ${settings.account} but still holds the example placeholder of ${left.join(' and ')}`,
    );
  }
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
