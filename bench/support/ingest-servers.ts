/**
 * bench:ingest's server processes, each a child of the bench so that its peak RSS is its own:
 * the baseline (verify + 202), the floor (bench/support/ingest-floor.ts) and the relay's sides;
 * and the parent's side of talking to them. Only node: modules are imported up front: the
 * baseline process must not load the relay's modules, or its peak RSS would count them.
 */
import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { verifySignature } from './verify-signature.ts';

export type Side =
  | 'baseline'
  | 'floor'
  | 'relay'
  | 'relay-worker'
  | 'relay-source'
  | 'relay-dedup'
  | 'floor-100'
  | 'relay-100';

/** The local stack's default window, for the side that measures de-duplication's cost. */
const DEDUP_ON_WINDOW_SECONDS = 86_400;
export const SECRET_ENV = 'BENCH_WEBHOOK_SECRET';
const CHILD_DONE_TIMEOUT_MS = 10_000;

/** Child → parent messages. */
export type ChildMessage =
  | { type: 'ready'; url: string }
  | { type: 'done'; maxRssKiB: number; queued?: number }
  | { type: 'failed'; message: string };

export function nextMessage<T extends ChildMessage['type']>(
  child: ChildProcess,
  type: T,
  timeoutMs: number,
): Promise<Extract<ChildMessage, { type: T }>> {
  return new Promise((resolve, reject) => {
    const cleanup = () => {
      clearTimeout(timer);
      child.off('message', onMessage).off('exit', onExit);
    };
    const timer = setTimeout(() => {
      cleanup();
      reject(new Error(`the server process sent no "${type}" within ${timeoutMs} ms`));
    }, timeoutMs);
    const onMessage = (message: ChildMessage) => {
      if (message.type === 'failed') {
        cleanup();
        reject(new Error(`the server process failed: ${message.message}`));
      } else if (message.type === type) {
        cleanup();
        resolve(message as Extract<ChildMessage, { type: T }>);
      }
    };
    const onExit = (code: number | null, signal: string | null) => {
      cleanup();
      reject(new Error(`the server process exited (${signal ?? code}) before "${type}"`));
    };
    child.on('message', onMessage).on('exit', onExit);
  });
}

/** Waits a little for the child to leave by itself, then kills it. */
export async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const timer = setTimeout(() => child.kill('SIGKILL'), CHILD_DONE_TIMEOUT_MS);
  if (child.connected) child.disconnect();
  await exited;
  clearTimeout(timer);
}

// ---- the server processes ----

export async function serve(side: Side): Promise<void> {
  const reply = (message: ChildMessage) => process.send?.(message);
  // The parent is gone: nobody will ask this process to stop.
  process.once('disconnect', () => process.exit(0));
  try {
    const secret = process.env[SECRET_ENV];
    if (secret === undefined) throw new Error(`${SECRET_ENV} is not set`);
    const server =
      side === 'baseline'
        ? await startBaseline(secret)
        : side.startsWith('floor')
          ? await startFloor(secret)
          : await startRelay(secret, side);
    process.on('message', (message: { type?: string }) => {
      if (message.type !== 'stop') return;
      void (async () => {
        const queued = await server.stop();
        const done: Extract<ChildMessage, { type: 'done' }> = {
          type: 'done',
          maxRssKiB: process.resourceUsage().maxRSS,
        };
        if (queued !== undefined) done.queued = queued;
        reply(done);
      })().catch((error: unknown) => reply({ type: 'failed', message: String(error) }));
    });
    reply({ type: 'ready', url: server.url });
  } catch (error) {
    reply({ type: 'failed', message: error instanceof Error ? error.message : String(error) });
    process.exitCode = 1;
  }
}

/** Resolves to the number of messages queued, where there is a queue. */
interface BenchServer {
  url: string;
  stop(): Promise<number | undefined>;
}

/**
 * The real ingest function (its builder, as the local stack builds it) behind the local front,
 * queuing to fauxqs in this process: on the same event loop ('relay'), or from a worker thread
 * of its own ('relay-worker'), as a separate function would be; 'relay-source' as 'relay-worker',
 * with the Stripe example's source in its SOURCES_FILE.
 */
async function startRelay(secret: string, side: Side): Promise<BenchServer> {
  const { queueCounts, startLocalSqs } = await import('../../test/support/local-sqs.ts');
  const { createQueuePair } = await import('../../infra/local/queue-pair.ts');
  const { startDedupStore } = await import('../../infra/local/dynamodb-local.ts');
  const local = await startLocalSqs();
  const dedup = await startDedupStore(side === 'relay-dedup' ? DEDUP_ON_WINDOW_SECONDS : 0);
  const sources =
    side === 'relay-source'
      ? (await import('./stripe-source.ts')).writeStripeSourcesFile(secret)
      : undefined;
  const release = async () => {
    await local.stop();
    await dedup.close();
    sources?.remove();
  };
  try {
    const { queueUrl, deadLetterQueueUrl } = await createQueuePair(local.sqs, {
      name: `bench-events-${randomUUID().slice(0, 8)}`,
      maxReceiveCount: 5,
      visibilityTimeoutSeconds: 30,
    });
    const front = await startFront(side, {
      secret,
      endpoint: local.endpoint,
      queueUrl,
      ...(sources ? { sources: { file: sources.path, deadLetterQueueUrl } } : {}),
      // Only the dedup side de-duplicates: the store runs for every side now (the local stack
      // always has it, for the action ledger), and the others measure the ingest without it.
      ...(side === 'relay-dedup'
        ? { dedup: { endpoint: dedup.endpoint, tableName: dedup.tableName } }
        : {}),
    });
    return {
      url: front.url,
      async stop() {
        await front.close();
        const { visible } = await queueCounts(local.sqs, queueUrl);
        await release();
        return visible;
      },
    };
  } catch (error) {
    await release();
    throw error;
  }
}

interface FrontData {
  secret: string;
  endpoint: string;
  queueUrl: string;
  /** De-duplication is off unless a store is given (then dynalite, in this process). */
  dedup?: { endpoint: string; tableName: string };
  /** The SOURCES_FILE, and the dead-letter queue a payload it cannot map would go to. */
  sources?: { file: string; deadLetterQueueUrl: string };
}

/**
 * The ingest function behind the local front, built as the local stack builds it
 * (infra/local/ingest-thread.ts): on a thread of its own for 'relay-worker' and 'relay-source',
 * else on this process's loop, beside the queue emulator.
 */
async function startFront(
  side: Side,
  data: FrontData,
): Promise<{ url: string; close(): Promise<void> }> {
  const [{ startIngestFront, startIngestThread }, { ENV, loadIngestConfig }] = await Promise.all([
    import('../../infra/local/ingest-thread.ts'),
    import('../../functions/shared/config.ts'),
  ]);
  const { dedup, sources } = data;
  const config = loadIngestConfig({
    [ENV.EVENTS_QUEUE_URL]: data.queueUrl,
    [ENV.WEBHOOK_SECRET]: data.secret,
    [ENV.DEDUP_WINDOW_SECONDS]: String(dedup ? DEDUP_ON_WINDOW_SECONDS : 0),
    // The store's side counts its records too (one store call per event here: each names its own).
    ...(dedup ? {} : { [ENV.MAX_RECORD_EVENTS_PER_MINUTE]: '0' }),
    ...(dedup ? { [ENV.DEDUP_TABLE_NAME]: dedup.tableName } : {}),
    ...(sources ? { [ENV.DEAD_LETTER_QUEUE_URL]: sources.deadLetterQueueUrl } : {}),
  });
  const options = {
    config,
    sqsEndpoint: data.endpoint,
    ...(dedup ? { dynamodbEndpoint: dedup.endpoint } : {}),
    ...(sources ? { sourcesFile: sources.file } : {}),
    debug: false,
  };
  // Nothing is printed on the happy path; a refused request would fail the run anyway.
  const print = () => {};
  return side === 'relay-worker' || side === 'relay-source' || side === 'relay-100'
    ? startIngestThread(options, print)
    : startIngestFront(options, print);
}

/**
 * The floor (bench/support/ingest-floor.ts) on a thread of its own, queuing to fauxqs on this
 * process's loop: the relay-worker side's shape, with the same FIFO queue pair.
 */
async function startFloor(secret: string): Promise<BenchServer> {
  const { queueCounts, startLocalSqs } = await import('../../test/support/local-sqs.ts');
  const { createQueuePair } = await import('../../infra/local/queue-pair.ts');
  const { startIngestFloorThread } = await import('./ingest-floor.ts');
  const local = await startLocalSqs();
  try {
    const { queueUrl } = await createQueuePair(local.sqs, {
      name: `bench-floor-${randomUUID().slice(0, 8)}`,
      maxReceiveCount: 5,
      visibilityTimeoutSeconds: 30,
    });
    const floor = await startIngestFloorThread({ secret, endpoint: local.endpoint, queueUrl });
    return {
      url: floor.url,
      async stop() {
        await floor.close();
        const { visible } = await queueCounts(local.sqs, queueUrl);
        await local.stop();
        return visible;
      },
    };
  } catch (error) {
    await local.stop();
    throw error;
  }
}

/** The least a receiver must do: check the Standard Webhooks signature, answer 202. */
async function startBaseline(secret: string): Promise<BenchServer> {
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const valid = verifySignature(key, req.headers, Buffer.concat(chunks));
      res
        .writeHead(valid ? 202 : 401, { 'content-type': 'application/json' })
        .end(valid ? '{"accepted":1}' : '{"error":{"code":"unauthorized"}}');
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    async stop() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await closed;
      return undefined;
    },
  };
}
