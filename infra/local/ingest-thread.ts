/**
 * The ingest function behind the local HTTP front, on a worker thread of its own. In the cloud
 * the ingest and batch functions are separate functions on separate CPUs; on one event loop here,
 * a burst of requests and a drain slowed each other (bench:ingest measures both shapes). The
 * thread builds the function with its own builder (functions/ingest/compose.ts) and its own AWS
 * clients, pointed at the local stand-ins by endpoint, and prints through the caller's `print`.
 */
import { type Stats, unwatchFile, watchFile } from 'node:fs';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SQSClient } from '@aws-sdk/client-sqs';
import type { APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { buildIngestHandler, openSourcesFile } from '../../functions/ingest/compose.ts';
import type { IngestConfig } from '../../functions/shared/config.ts';
import { dynamoDbClient } from './dynamodb-local.ts';
import { startHttpFront } from './http-front.ts';
import { LineLogger } from './line-logger.ts';

export interface IngestThreadOptions {
  /** As `loadIngestConfig` gives it. */
  config: Readonly<IngestConfig>;
  /** The queue emulator: `http://127.0.0.1:<port>`. */
  sqsEndpoint: string;
  /** The Secrets Manager stand-in; needed when the configuration names a webhook secret. */
  secretsEndpoint?: string;
  /** The de-duplication store; needed unless DEDUP_WINDOW_SECONDS and MAX_RECORD_EVENTS_PER_MINUTE are 0. */
  dynamodbEndpoint?: string;
  /** Default 0 (ephemeral); the host is always 127.0.0.1. */
  port?: number;
  /** The line logger prints its DEBUG lines too. */
  debug: boolean;
  /** The function's memory size: the thread's heap is sized as Lambda sizes it. Default 512. */
  memoryMb?: number;
  /**
   * SOURCES_FILE (contract §6), read when the thread starts (a file that cannot work stops it,
   * naming the source and the problem) and again whenever it changes.
   */
  sourcesFile?: string;
}

export interface IngestThread {
  /** `http://127.0.0.1:<port>`: POST /events. */
  url: string;
  close(): Promise<void>;
}

const READY_TIMEOUT_MS = 30_000;
/** The stack's function memory size (infra/aws/relay-function.ts). */
const DEFAULT_MEMORY_MB = 512;
const CLOSE_TIMEOUT_MS = 10_000;
/** How often SOURCES_FILE is looked at: a change takes effect within about this long. */
const SOURCES_FILE_POLL_MS = 500;
/** Marks the thread started below, so another worker that imports this module starts none. */
const INGEST_THREAD = 'mautic-relay:ingest-thread';

/** Ingest thread → caller. */
type ThreadMessage =
  | { line: string }
  | { accepted: number }
  | { url: string }
  | { error: string }
  | { closed: true };

const LOCAL_CREDENTIALS = { accessKeyId: 'local', secretAccessKey: 'local' };

if (!isMainThread && parentPort && (workerData as { kind?: unknown })?.kind === INGEST_THREAD) {
  await serve(parentPort, (workerData as { options: IngestThreadOptions }).options);
}

async function serve(
  port: NonNullable<typeof parentPort>,
  options: IngestThreadOptions,
): Promise<void> {
  const post = (message: ThreadMessage) => port.postMessage(message);
  try {
    const front = await startIngestFront(
      options,
      (line) => post({ line }),
      (accepted) => post({ accepted }),
    );
    port.once('message', () => {
      void front.close().finally(() => post({ closed: true }));
    });
    post({ url: front.url });
  } catch (error) {
    post({ error: error instanceof Error ? error.message : String(error) });
  }
}

/**
 * The ingest function behind the local HTTP front, on the calling thread: what the ingest thread
 * runs, and bench:ingest's one-loop shape. Its AWS clients reach the stand-ins by endpoint.
 */
export async function startIngestFront(
  options: IngestThreadOptions,
  print: (line: string) => void,
  accepted: (count: number) => void = () => {},
): Promise<IngestThread> {
  // First: a SOURCES_FILE that cannot work stops the start before anything is made.
  const sources =
    options.sourcesFile === undefined
      ? undefined
      : await watchSourcesFile(options.sourcesFile, print);
  const local = { region: 'us-east-1', credentials: LOCAL_CREDENTIALS };
  const sqs = new SQSClient({ ...local, endpoint: options.sqsEndpoint });
  const secrets =
    options.secretsEndpoint === undefined
      ? undefined
      : new SecretsManagerClient({ ...local, endpoint: options.secretsEndpoint });
  const dynamodb =
    options.dynamodbEndpoint === undefined ? undefined : dynamoDbClient(options.dynamodbEndpoint);
  const release = () => {
    sqs.destroy();
    secrets?.destroy();
    dynamodb?.destroy();
    sources?.stop();
  };
  try {
    const logger = new LineLogger({ print, debug: options.debug });
    const ingest = await buildIngestHandler(options.config, {
      sqs,
      logger,
      ...(secrets ? { secrets } : {}),
      ...(dynamodb ? { dynamodb } : {}),
      ...(sources ? { sources: sources.registry } : {}),
    });
    const front = await startHttpFront({
      handler: async (event, context) => {
        const answer = await ingest(event, context);
        logger.refusedRequest(answer, event.requestContext.requestId);
        accepted(acceptedCount(answer));
        return answer;
      },
      ...(options.port === undefined ? {} : { port: options.port }),
      maxBodyBytes: options.config.maxBodyBytes,
    });
    return {
      url: front.url,
      async close() {
        try {
          await front.close();
        } finally {
          release();
        }
      },
    };
  } catch (error) {
    release();
    throw error;
  }
}

/** The events a 202 says were queued (contract §1), for the console's chart; else 0. */
function acceptedCount(answer: APIGatewayProxyStructuredResultV2): number {
  if (answer.statusCode !== 202) return 0;
  try {
    const { accepted } = JSON.parse(String(answer.body)) as { accepted?: unknown };
    return typeof accepted === 'number' ? accepted : 0;
  } catch {
    return 0;
  }
}

/**
 * SOURCES_FILE, open, and read again when it changes: by polling its status rather than
 * `fs.watch`, which loses a file that an editor replaces by renaming a new one over it. A valid
 * new version takes effect for the next request; an invalid one is refused with a line naming
 * the problem (never a secret), and the previous version stays.
 */
async function watchSourcesFile(path: string, print: (line: string) => void) {
  const file = await openSourcesFile(path);
  const changed = (current: Stats, previous: Stats) => {
    if (current.mtimeMs === previous.mtimeMs && current.size === previous.size) return;
    try {
      const names = file.reload();
      print(`sources: reloaded ${path}: ${names.length === 0 ? 'no sources' : names.join(', ')}`);
    } catch (error) {
      const problem = error instanceof Error ? error.message : String(error);
      print(`error: ${problem}; the previous version of the sources stays`);
    }
  };
  // Not persistent: the thread ends when its server does, whatever the watcher.
  watchFile(path, { interval: SOURCES_FILE_POLL_MS, persistent: false }, changed);
  return { registry: file.registry, stop: () => unwatchFile(path, changed) };
}

/**
 * V8's heap limits as Lambda's Node.js bootstrap sets them for a function of `memoryMb`: a tenth
 * for the young generation (`--max-semi-space-size` of half that), the rest for the old one.
 * V8's young generation is three semi-spaces in size (two and a large-object space). Without
 * them V8 sizes the heap for this machine's memory: under bench:ingest's load the young
 * generation alone grew to 128 MB.
 */
function lambdaHeapLimits(memoryMb: number): {
  maxYoungGenerationSizeMb: number;
  maxOldGenerationSizeMb: number;
} {
  const newSpaceMb = Math.floor(memoryMb / 10);
  return {
    maxYoungGenerationSizeMb: Math.floor(newSpaceMb / 2) * 3,
    maxOldGenerationSizeMb: memoryMb - newSpaceMb,
  };
}

/**
 * Starts the ingest function and its HTTP front on a worker thread. Rejects with the thread's
 * error when it cannot start (a bad webhook secret, a port in use); its log lines reach `print`.
 */
export async function startIngestThread(
  options: IngestThreadOptions,
  print: (line: string) => void,
  accepted: (count: number) => void = () => {},
): Promise<IngestThread> {
  const worker = new Worker(new URL(import.meta.url), {
    workerData: { kind: INGEST_THREAD, options },
    resourceLimits: lambdaHeapLimits(options.memoryMb ?? DEFAULT_MEMORY_MB),
  });
  let onClosed: (() => void) | undefined;
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      void worker.terminate();
      reject(new Error(`the ingest thread did not start within ${READY_TIMEOUT_MS} ms`));
    }, READY_TIMEOUT_MS);
    const fail = (error: Error) => {
      clearTimeout(timer);
      void worker.terminate();
      reject(error);
    };
    worker.on('message', (message: ThreadMessage) => {
      if ('line' in message) print(message.line);
      else if ('accepted' in message) {
        if (message.accepted > 0) accepted(message.accepted);
      } else if ('url' in message) {
        clearTimeout(timer);
        resolve(message.url);
      } else if ('error' in message) fail(new Error(message.error));
      else onClosed?.();
    });
    worker.once('error', fail);
    worker.once('exit', (code) => fail(new Error(`the ingest thread exited (${code})`)));
  });
  // After a start, a failure of the thread is told, not thrown: the rest of the stack runs on.
  worker.removeAllListeners('error').removeAllListeners('exit');
  worker.on('error', (error) => print(`error: the ingest thread failed: ${error.message}`));
  const exit = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
  let closing: Promise<void> | undefined;
  return {
    url,
    close() {
      // A thread that already ended (a heap over its limit, say) has nothing left to close:
      // `exit` has settled, and the race below ends at once.
      closing ??= (async () => {
        let timer: NodeJS.Timeout | undefined;
        const closed = new Promise<void>((resolve) => {
          onClosed = resolve;
        });
        worker.postMessage('close');
        await Promise.race([
          closed,
          exit,
          new Promise<void>((resolve) => {
            timer = setTimeout(resolve, CLOSE_TIMEOUT_MS);
          }),
        ]);
        clearTimeout(timer);
        await worker.terminate();
      })();
      return closing;
    },
  };
}
