import { resolve } from 'node:path';
import { openSourcesFile } from '../../functions/ingest/compose.ts';
import { endpointsPathIn, writeLocalEndpoints } from '../cli/local-endpoints.ts';
import { startControlServer } from './control.ts';
import { startDedupStore } from './dynamodb-local.ts';
import { CountingMetrics, FlowCounters } from './flow-counters.ts';
import { LineLogger } from './line-logger.ts';
import { printBanner } from './local-banner.ts';
import { type LocalConfig, localRetryPolicy } from './local-config.ts';
import {
  type LocalQueues,
  type LocalSecrets,
  type Stops,
  startMautic,
  startQueues,
  startSecrets,
  storeSenders,
} from './local-edges.ts';
import { startBatchFunction, startIngestFunction, startRefresher } from './local-functions.ts';

export interface LocalStack {
  readonly ingestUrl: string;
  /** Stops taking requests, finishes the batches in hand, then stops everything. */
  stop(): Promise<void>;
}

/**
 * The whole relay on one machine (contract §3): the real ingest, batch and refresh handlers, with
 * local edges in place of AWS: an HTTP front for API Gateway, fauxqs for SQS (events queue and
 * dead-letter queue with the stack's redrive), pollers that feed the batch handler as the event
 * source mapping does, a Secrets Manager stand-in for the token store, the refresher on a timer
 * and on demand, and, with no MAUTIC_BASE_URL, the Mautic simulator.
 */
export async function startLocalStack(
  config: LocalConfig,
  print: (line: string) => void,
  options: { endpointsDir?: string } = {},
): Promise<LocalStack> {
  const stops: Stops = [];
  const stopAll = async () => {
    for (const stop of stops.splice(0).reverse()) await stop().catch(() => {});
  };
  try {
    return await start(config, print, stops, stopAll, options);
  } catch (error) {
    await stopAll();
    throw error;
  }
}

async function start(
  config: LocalConfig,
  print: (line: string) => void,
  stops: Stops,
  stopAll: () => Promise<void>,
  options: { endpointsDir?: string },
): Promise<LocalStack> {
  // First, before anything starts: a SOURCES_FILE that cannot work is refused, naming the source
  // and the problem. The ingest thread compiles it again for itself (compiled expressions cannot
  // cross to a thread), then watches it.
  const sourcesFile = config.SOURCES_FILE === undefined ? undefined : resolve(config.SOURCES_FILE);
  const sourceNames = sourcesFile === undefined ? [] : (await openSourcesFile(sourcesFile)).names();
  const logger = new LineLogger({ print, debug: config.LOG_LEVEL === 'DEBUG' });
  const { flow, metrics, accepted } = localMetrics();
  const observers = { logger, metrics };
  const retry = localRetryPolicy(config);

  const mautic = await startMautic(config, stops);
  const secrets = await startSecrets(mautic.credential, stops);
  const queues = await startQueues(config, retry, print, stops);
  const refresher = await startRefresher(config, secrets, observers, stops);
  // The de-duplication table and the action ledger's: dynalite, living as
  // long as the local stack. Started before the batch function and so stopped after it: the
  // batches it finishes on the way out still use the ledger.
  const dedup = await startDedupStore(config.DEDUP_WINDOW_SECONDS);
  stops.push(() => dedup.close());
  const mauticBaseUrl = mautic.credential.baseUrl;
  const edges = { mauticBaseUrl, retry, secrets, queues, dedup, refresher, accepted };
  startBatchFunction(config, edges, observers, stops);
  const generatedSecret = await storeSenders(config, secrets);
  const front = await startIngestFunction(config, { sourcesFile, ...edges }, print, stops);
  // For the operator commands' --local: a control endpoint (refresh now), and below, the file
  // that says where everything is.
  const control = await startControlServer({ refresher, logger, flow });
  stops.push(() => control.close());

  const ingestUrl = announce(config, print, stops, options, {
    ...{ mautic, retry, secrets, queues, dedup, front, control },
    ...{ sourcesFile, sourceNames, generatedSecret },
  });

  let stopping: Promise<void> | undefined;
  return {
    ingestUrl,
    stop: () => {
      stopping ??= stopAll();
      return stopping;
    },
  };
}

/**
 * Metrics are the cloud's business; locally the line logger tells what happened, and the
 * counters keep the per-minute numbers the console's chart shows.
 */
function localMetrics() {
  process.env.POWERTOOLS_METRICS_DISABLED = 'true';
  const flow = new FlowCounters();
  const metrics = new CountingMetrics(flow, {
    namespace: 'MauticBatchRelay/local',
    serviceName: 'local',
  });
  const accepted = (count: number) => flow.add('accepted', count);
  return { flow, metrics, accepted };
}

/** Where `npx mautic-relay … --local` finds this stack; answers what removes the file. */
/** What npm start prints once it is up, and the endpoints file the `--local` commands read. */
function announce(
  config: LocalConfig,
  print: (line: string) => void,
  stops: Stops,
  options: { endpointsDir?: string },
  parts: {
    mautic: Awaited<ReturnType<typeof startMautic>>;
    retry: ReturnType<typeof localRetryPolicy>;
    secrets: LocalSecrets;
    queues: LocalQueues;
    dedup: { description: string; endpoint: string; tableName: string; outcomeTableName: string };
    front: { url: string };
    control: { url: string };
    sourcesFile: string | undefined;
    sourceNames: ReadonlyArray<string>;
    generatedSecret: string | undefined;
  },
): string {
  const { mautic, secrets, queues, sourcesFile } = parts;
  const mauticUrl = mautic.credential.baseUrl;
  printBanner(
    config,
    {
      mauticUrl,
      simulated: mautic.simulated,
      grantType: mautic.credential.grantType,
      retry: parts.retry,
      secretsEndpoint: secrets.endpoint,
      dedupDescription: parts.dedup.description,
      dynamodbEndpoint: parts.dedup.endpoint,
      frontUrl: parts.front.url,
      sourcesFile,
      sourceNames: parts.sourceNames,
      generatedSecret: parts.generatedSecret,
    },
    print,
  );
  const ingestUrl = `${parts.front.url}/events`;
  if (options.endpointsDir !== undefined) {
    const where = { ingestUrl, sourcesFile, secrets, queues, controlUrl: parts.control.url };
    const removeEndpoints = writeEndpoints(options.endpointsDir, config, {
      ...where,
      mauticUrl,
      dedup: parts.dedup,
    });
    // Pushed last, so it runs first: the commands stop finding the stack as soon as it stops.
    stops.push(async () => removeEndpoints());
  }
  print(
    'Operator commands: npx mautic-relay status --local (dead-letters, redrive, events, senders)',
  );
  print(`Ready: ingest listening on ${ingestUrl} (Ctrl-C to stop)`);
  return ingestUrl;
}

function writeEndpoints(
  dir: string,
  config: LocalConfig,
  where: {
    ingestUrl: string;
    sourcesFile: string | undefined;
    secrets: LocalSecrets;
    queues: LocalQueues;
    controlUrl: string;
    mauticUrl: string;
    dedup: { endpoint: string; tableName: string; outcomeTableName: string };
  },
): () => void {
  const { sourcesFile, secrets, queues } = where;
  return writeLocalEndpoints(endpointsPathIn(dir), {
    ingestUrl: where.ingestUrl,
    sqsEndpoint: queues.endpoint,
    queueUrl: queues.queueUrl,
    deadLetterQueueUrl: queues.deadLetterQueueUrl,
    secretsEndpoint: secrets.endpoint,
    tokenSecretId: secrets.ids.tokenSecretId,
    clientSecretId: secrets.ids.clientSecretId,
    mauticUrl: where.mauticUrl,
    webhookSecretId: secrets.webhookSecretId,
    ...(sourcesFile === undefined ? {} : { sourcesFile }),
    entities: config.ENTITIES,
    contactMatchFields: config.CONTACT_MATCH_FIELDS,
    controlUrl: where.controlUrl,
    // dynalite: its de-duplication table (Mautic's shared health, for `status --local`) and the
    // outcome table.
    dynamodbEndpoint: where.dedup.endpoint,
    dedupTableName: where.dedup.tableName,
    outcomeTableName: where.dedup.outcomeTableName,
    outcomeRetentionSeconds: config.OUTCOME_RETENTION_SECONDS,
    pid: process.pid,
    startedAt: new Date().toISOString(),
  });
}
