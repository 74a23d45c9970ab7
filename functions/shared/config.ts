import { z } from 'zod';

/** Environment variable names, shared by the functions and the stack so they cannot drift. */
export const ENV = {
  MAUTIC_BASE_URL: 'MAUTIC_BASE_URL',
  TOKEN_SECRET_ID: 'TOKEN_SECRET_ID',
  EVENTS_QUEUE_URL: 'EVENTS_QUEUE_URL',
  DEAD_LETTER_QUEUE_URL: 'DEAD_LETTER_QUEUE_URL',
  REFRESH_FUNCTION_NAME: 'REFRESH_FUNCTION_NAME',
  BATCH_SIZE: 'BATCH_SIZE',
  DELIVERY_CONCURRENCY: 'DELIVERY_CONCURRENCY',
  MAUTIC_TIMEOUT_MS: 'MAUTIC_TIMEOUT_MS',
  TOKEN_CACHE_SECONDS: 'TOKEN_CACHE_SECONDS',
  MAX_DELAY_SECONDS: 'MAX_DELAY_SECONDS',
} as const;

/** A configuration that cannot work; the message names every bad variable. */
export class ConfigError extends Error {
  override name = 'ConfigError';
}

const integer = (min: number, max: number, fallback: number) =>
  z
    .string()
    .regex(/^\d+$/, 'must be a whole number')
    .transform(Number)
    .pipe(z.number().min(min, `must be at least ${min}`).max(max, `must be at most ${max}`))
    .optional()
    .transform((value) => value ?? fallback);
const required = z.string({ error: 'is required' }).min(1, 'is required');

const batchSchema = z.object({
  [ENV.MAUTIC_BASE_URL]: z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' }),
  [ENV.TOKEN_SECRET_ID]: required,
  [ENV.EVENTS_QUEUE_URL]: required,
  [ENV.DEAD_LETTER_QUEUE_URL]: required,
  [ENV.REFRESH_FUNCTION_NAME]: required,
  [ENV.BATCH_SIZE]: integer(1, 200, 200),
  [ENV.DELIVERY_CONCURRENCY]: integer(1, 10, 2),
  [ENV.MAUTIC_TIMEOUT_MS]: integer(100, 120_000, 10_000),
  [ENV.TOKEN_CACHE_SECONDS]: integer(0, 3600, 30),
  // 12 hours is the longest visibility timeout SQS accepts.
  [ENV.MAX_DELAY_SECONDS]: integer(0, 43_200, 3600),
});

/** The batch function's configuration. */
export interface BatchConfig {
  mauticBaseUrl: string;
  tokenSecretId: string;
  eventsQueueUrl: string;
  deadLetterQueueUrl: string;
  refreshFunctionName: string;
  batchSize: number;
  deliveryConcurrency: number;
  mauticTimeoutMs: number;
  tokenCacheSeconds: number;
  maxDelaySeconds: number;
}

/**
 * Reads and checks the batch function's environment once, at cold start. Throws a
 * `ConfigError` naming every missing or invalid variable (never its value).
 */
export function loadBatchConfig(
  env: Readonly<Record<string, string | undefined>>,
): Readonly<BatchConfig> {
  const values = parse(batchSchema, env);
  return Object.freeze({
    mauticBaseUrl: values.MAUTIC_BASE_URL,
    tokenSecretId: values.TOKEN_SECRET_ID,
    eventsQueueUrl: values.EVENTS_QUEUE_URL,
    deadLetterQueueUrl: values.DEAD_LETTER_QUEUE_URL,
    refreshFunctionName: values.REFRESH_FUNCTION_NAME,
    batchSize: values.BATCH_SIZE,
    deliveryConcurrency: values.DELIVERY_CONCURRENCY,
    mauticTimeoutMs: values.MAUTIC_TIMEOUT_MS,
    tokenCacheSeconds: values.TOKEN_CACHE_SECONDS,
    maxDelaySeconds: values.MAX_DELAY_SECONDS,
  });
}

function parse<T extends z.ZodType>(
  schema: T,
  env: Readonly<Record<string, string | undefined>>,
): z.output<T> {
  const result = schema.safeParse(env);
  if (result.success) return result.data;
  const problems = result.error.issues.map((issue) => `${issue.path.join('.')} ${issue.message}`);
  throw new ConfigError(`Invalid configuration: ${problems.join('; ')}`);
}
