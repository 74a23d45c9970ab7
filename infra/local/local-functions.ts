/**
 * The relay's three functions on the local edges, each built with its own builder from an
 * environment as the stack gives it in the cloud: the refresher (on a timer and on demand), the
 * batch function behind a stand-in of its event source mapping, the ingest on a thread of its
 * own. Each pushes its stops.
 */
import type { Metrics } from '@aws-lambda-powertools/metrics';
import { buildBatchHandler } from '../../functions/batch/compose.ts';
import type { RetryPolicy } from '../../functions/core/retry-policy.ts';
import { buildRefreshHandler } from '../../functions/refresh/compose.ts';
import {
  ENV,
  loadBatchConfig,
  loadIngestConfig,
  loadRefreshConfig,
} from '../../functions/shared/config.ts';
import type { startDedupStore } from './dynamodb-local.ts';
import { type IngestThread, startIngestThread } from './ingest-thread.ts';
import { lambdaContext } from './lambda-context.ts';
import type { LineLogger } from './line-logger.ts';
import { authorizeCommand } from './local-banner.ts';
import type { LocalConfig } from './local-config.ts';
import type { LocalQueues, LocalSecrets, Stops } from './local-edges.ts';
import { LocalRefresher } from './local-refresher.ts';
import { FIFO_MAX_BATCH_SIZE, SqsEventSource } from './sqs-event-source.ts';

export type DedupStore = Awaited<ReturnType<typeof startDedupStore>>;

/** What every function logs and measures through. */
interface Observers {
  logger: LineLogger;
  metrics: Metrics;
}

/** The refresher, one run at a time as reserved concurrency 1 makes it in the cloud. */
export async function startRefresher(
  config: LocalConfig,
  secrets: LocalSecrets,
  { logger, metrics }: Observers,
  stops: Stops,
): Promise<LocalRefresher> {
  const refresh = buildRefreshHandler(
    loadRefreshConfig({
      [ENV.CLIENT_SECRET_ID]: secrets.ids.clientSecretId,
      [ENV.TOKEN_SECRET_ID]: secrets.ids.tokenSecretId,
    }),
    {
      secrets: secrets.client,
      logger,
      metrics,
      authorizeCommand: authorizeCommand(config.AUTHORIZE_PORT),
      credentialsFix: LOCAL_CREDENTIALS_FIX,
    },
  );
  const refresher = new LocalRefresher(
    (event) => refresh(event, lambdaContext('refresh', 30_000)),
    logger,
    config.REFRESH_INTERVAL_SECONDS,
  );
  await refresher.scheduled();
  const timer = setInterval(
    () => void refresher.scheduled(),
    config.REFRESH_INTERVAL_SECONDS * 1000,
  );
  stops.push(async () => {
    clearInterval(timer);
    await refresher.idle();
  });
  return refresher;
}

/**
 * The batch function, fed by one mapping with the function's concurrency: a poller reads the
 * queue when an invocation slot is free, and makes its SQS calls without the SDK's CPU cost,
 * which is not the function's in the cloud. As Lambda's mapping on a FIFO queue: batches of at most 10, no
 * window; the batch function receives the rest of its BATCH_SIZE itself within
 * BATCH_WINDOW_SECONDS.
 */
export function startBatchFunction(
  config: LocalConfig,
  edges: {
    mauticBaseUrl: string;
    retry: RetryPolicy;
    secrets: LocalSecrets;
    queues: LocalQueues;
    dedup: DedupStore;
    refresher: LocalRefresher;
  },
  { logger, metrics }: Observers,
  stops: Stops,
): void {
  const { retry, queues, dedup } = edges;
  const batch = buildBatchHandler(
    loadBatchConfig({
      [ENV.MAUTIC_BASE_URL]: edges.mauticBaseUrl,
      [ENV.TOKEN_SECRET_ID]: edges.secrets.ids.tokenSecretId,
      [ENV.EVENTS_QUEUE_URL]: queues.queueUrl,
      [ENV.DEAD_LETTER_QUEUE_URL]: queues.deadLetterQueueUrl,
      [ENV.REFRESH_FUNCTION_NAME]: 'local-refresher',
      [ENV.BATCH_SIZE]: String(config.BATCH_SIZE),
      [ENV.BATCH_WINDOW_SECONDS]: String(config.BATCH_WINDOW_SECONDS),
      [ENV.TOKEN_CACHE_SECONDS]: String(config.TOKEN_CACHE_SECONDS),
      [ENV.RETRY_BASE_SECONDS]: String(config.RETRY_BASE_SECONDS),
      [ENV.RETRY_MAX_DELAY_SECONDS]: String(config.RETRY_MAX_DELAY_SECONDS),
      [ENV.RETRY_HORIZON_SECONDS]: String(config.RETRY_HORIZON_SECONDS),
      [ENV.MAX_RECEIVE_COUNT]: String(retry.maxReceiveCount),
      [ENV.MAX_CONCURRENCY]: String(config.MAX_CONCURRENCY),
      ...(config.CIRCUIT_PROBE_BASE_SECONDS
        ? { [ENV.CIRCUIT_PROBE_BASE_SECONDS]: String(config.CIRCUIT_PROBE_BASE_SECONDS) }
        : {}),
      ...(config.CIRCUIT_PROBE_MAX_SECONDS
        ? { [ENV.CIRCUIT_PROBE_MAX_SECONDS]: String(config.CIRCUIT_PROBE_MAX_SECONDS) }
        : {}),
      [ENV.DEDUP_TABLE_NAME]: dedup.tableName,
      ...outcomeSettings(config, dedup),
    }),
    {
      secrets: edges.secrets.client,
      sqs: queues.sqs,
      dynamodb: dedup.client,
      // Like the RequestResponse invoke: a call into the one-at-a-time refresher.
      refresher: edges.refresher,
      logger,
      metrics,
    },
  );
  const mappingSqs = queues.fauxqs.mappingSqs();
  stops.push(async () => mappingSqs.destroy());
  const poller = new SqsEventSource({
    sqs: mappingSqs,
    queueUrl: queues.queueUrl,
    queueArn: queues.queueArn,
    handler: batch,
    batchSize: Math.min(FIFO_MAX_BATCH_SIZE, config.BATCH_SIZE),
    batchWindowMs: 0,
    functionTimeoutMs: config.BATCH_TIMEOUT_SECONDS * 1000,
    maxConcurrency: config.MAX_CONCURRENCY,
    onError: (error) => logger.warn('Polling the events queue failed', { error: String(error) }),
    // Lambda's REPORT line, as it were: what each invocation was billed (printed at DEBUG).
    onInvoke: (report) =>
      logger.info('Batch invocation', {
        event: 'invocation',
        messages: report.messageIds.length,
        billedMs: report.billedMs,
      }),
  });
  poller.start();
  stops.push(() => poller.stop());
}

/**
 * The ingest function and its HTTP front on a thread of its own, as a function of its own:
 * requests and deliveries do not wait on each other's event loop.
 */
export async function startIngestFunction(
  config: LocalConfig,
  edges: {
    sourcesFile: string | undefined;
    secrets: LocalSecrets;
    queues: LocalQueues;
    dedup: DedupStore;
    /** Told how many events each accepted request queued (the console's chart). */
    accepted: (count: number) => void;
  },
  print: (line: string) => void,
  stops: Stops,
): Promise<IngestThread> {
  const { sourcesFile, secrets, queues, dedup } = edges;
  const ingestConfig = loadIngestConfig({
    [ENV.EVENTS_QUEUE_URL]: queues.queueUrl,
    [ENV.WEBHOOK_SECRET_ID]: secrets.webhookSecretId,
    [ENV.CREDENTIALS_CACHE_SECONDS]: '1',
    [ENV.ENTITIES]: config.ENTITIES.join(','),
    [ENV.CONTACT_MATCH_FIELDS]: config.CONTACT_MATCH_FIELDS.join(','),
    [ENV.DEDUP_WINDOW_SECONDS]: String(config.DEDUP_WINDOW_SECONDS),
    [ENV.DEDUP_TABLE_NAME]: dedup.tableName,
    [ENV.MAX_RECORD_EVENTS_PER_MINUTE]: String(config.MAX_RECORD_EVENTS_PER_MINUTE),
    ...outcomeSettings(config, dedup),
    // Where a source's payload that cannot be mapped is kept (contract §6), as in the cloud.
    ...(sourcesFile === undefined
      ? {}
      : { [ENV.DEAD_LETTER_QUEUE_URL]: queues.deadLetterQueueUrl }),
  });
  const front = await startIngestThread(
    {
      config: ingestConfig,
      sqsEndpoint: queues.endpoint,
      secretsEndpoint: secrets.endpoint,
      dynamodbEndpoint: dedup.endpoint,
      port: config.PORT,
      debug: config.LOG_LEVEL === 'DEBUG',
      ...(sourcesFile === undefined ? {} : { sourcesFile }),
    },
    print,
    edges.accepted,
  );
  stops.push(() => front.close());
  return front;
}

/** Each event's outcome (contract §1.6), in the same dynalite, written by both functions. */
function outcomeSettings(config: LocalConfig, dedup: DedupStore) {
  return {
    [ENV.OUTCOME_TABLE_NAME]: dedup.outcomeTableName,
    [ENV.OUTCOME_RETENTION_SECONDS]: String(config.OUTCOME_RETENTION_SECONDS),
  };
}

/** The local stack takes its Mautic credential from its environment, at start. */
const LOCAL_CREDENTIALS_FIX =
  'stop "npm start" and start it again with the right MAUTIC_CLIENT_ID and MAUTIC_CLIENT_SECRET (Mautic: Settings, API Credentials)';
