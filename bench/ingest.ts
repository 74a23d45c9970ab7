/**
 * What the ingest path costs: requests per second, p50/p99 latency and peak memory of the real
 * ingest handler behind the local HTTP front (signature check, schema, SendMessageBatch to an
 * in-process fauxqs queue), against a bare node:http server that only verifies the Standard
 * Webhooks signature and answers 202. Each server runs in a child process of its own, so its
 * peak RSS is its own; the load (signed 1 KiB bodies over keep-alive connections) comes from
 * this process, the same for both.
 *
 *   npm run bench:ingest -- [requests=3000] [concurrency=16]
 *
 * The relay's process also holds the queue emulator, so its memory and CPU include fauxqs'. It
 * is measured with de-duplication off (DEDUP_WINDOW_SECONDS=0) twice: the front on the
 * emulator's event loop, and the front on a thread of its own (the local stack's shape:
 * infra/local/ingest-thread.ts, with fauxqs on another thread). Then once more with de-duplication on, on one loop, where every
 * request also makes two calls to the store (a conditional put to claim its id, an update with
 * the answer): locally the store is dynalite, which manages only several hundred conditional
 * writes per second, so that side measures dynalite, not DynamoDB. And once as a source
 * (contract §6), on a thread of its own as the plain two-thread side: `POST
 * /sources/stripe-customers` with the shipped Stripe example's source (examples/sources/), each
 * request Stripe's documented `customer.created` sample of the same size, signed with Stripe's
 * library, verified, filtered and mapped by JSONata; its throughput is compared with the plain
 * two-thread side's of the same run (goal: at least 0.7 of it). The last line is
 * `SUMMARY {json}` for scripts; its value is the ratio of the two-thread shape, `source_ratio`
 * the source's to the plain endpoint's.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { createHmac, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import { Agent, createServer, type IncomingHttpHeaders, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { availableParallelism, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
// Only node:crypto behind this one: the baseline process must not load the relay's modules,
// or its peak RSS would count them. The relay's are imported in startRelay.
import { parseCredentials, signWebhook } from '../functions/core/ingest/webhook-auth.ts';
import { loadAverage, percentile, positiveInteger, round } from './support/figures.ts';
import type { SignedRequest } from './support/stripe-source.ts';

type Side =
  | 'baseline'
  | 'floor'
  | 'relay'
  | 'relay-worker'
  | 'relay-source'
  | 'relay-dedup'
  | 'floor-100'
  | 'relay-100';
/**
 * The source side right after the plain one it is compared with, under the same load; each floor
 * right before the relay side measured against it.
 */
const SIDES: ReadonlyArray<Side> = [
  'baseline',
  'floor',
  'relay-worker',
  'relay-source',
  'relay',
  'relay-dedup',
  'floor-100',
  'relay-100',
];
/** Events per request of the '-100' sides, where the per-record send rule applies. */
const MANY_EVENTS = 100;
/** The '-100' sides send this fraction of the requests (at least MIN_MANY_REQUESTS). */
const MANY_REQUESTS_DIVISOR = 20;
const MIN_MANY_REQUESTS = 50;
const MANY_WARM_UP_REQUESTS = 20;
/** The source side's goal: its requests per second over the plain two-thread side's. */
const SOURCE_RATIO_GOAL = 0.7;
/** The local stack's default window, for the side that measures de-duplication's cost. */
const DEDUP_ON_WINDOW_SECONDS = 86_400;

const WARM_UP_REQUESTS = 300;
const BODY_BYTES = 1024;
const REQUEST_TIMEOUT_MS = 10_000;
const CHILD_READY_TIMEOUT_MS = 20_000;
const CHILD_DONE_TIMEOUT_MS = 10_000;
/** The whole run, children included, stops here whatever happens. */
const RUN_TIMEOUT_MS = 300_000;
const SECRET_ENV = 'BENCH_WEBHOOK_SECRET';

/** Child → parent messages. */
type ChildMessage =
  | { type: 'ready'; url: string }
  | { type: 'done'; maxRssKiB: number; queued?: number }
  | { type: 'failed'; message: string };

interface ChildReport {
  maxRssKiB: number;
  queued?: number;
}

interface PhaseResult {
  seconds: number;
  latenciesMs: number[];
  statuses: Map<number, number>;
  samples: Map<number, string>;
  errors: string[];
}

if (process.argv[2] === 'serve') {
  await serve(process.argv[3] as Side);
} else {
  await main();
}

async function main(): Promise<void> {
  const requests = positiveInteger(process.argv[2], 3000, 'requests');
  const concurrency = positiveInteger(process.argv[3], 16, 'concurrency');
  const secret = `whsec_${randomBytes(32).toString('base64')}`;
  const children = new Set<ChildProcess>();
  const watchdog = setTimeout(() => {
    console.error(`bench:ingest: the run took longer than ${RUN_TIMEOUT_MS / 1000} s; stopping`);
    for (const child of children) child.kill('SIGKILL');
    process.exit(1);
  }, RUN_TIMEOUT_MS);
  watchdog.unref();

  try {
    const results = {} as Record<Side, { phase: PhaseResult; report: ChildReport }>;
    for (const side of SIDES) {
      const load = loadOf(side, requests);
      results[side] = await measure(side, { ...load, concurrency, secret, children });
      const queued = results[side].report.queued;
      const expected = (load.warmUp + load.requests) * load.events;
      if (side !== 'baseline' && queued !== expected) {
        throw new Error(`the ${side} queue holds ${queued} messages, not ${expected}`);
      }
    }
    print(results, { requests, concurrency });
  } catch (error) {
    console.error(`bench:ingest failed: ${error instanceof Error ? error.message : error}`);
    process.exitCode = 1;
  } finally {
    for (const child of children) child.kill('SIGKILL');
    clearTimeout(watchdog);
  }
}

interface Load {
  warmUp: number;
  requests: number;
  /** Events per request. */
  events: number;
}

/** What a side is sent: single-event requests, or fewer of MANY_EVENTS events for '-100'. */
function loadOf(side: Side, requests: number): Load {
  if (!side.endsWith('-100')) return { warmUp: WARM_UP_REQUESTS, requests, events: 1 };
  return {
    warmUp: MANY_WARM_UP_REQUESTS,
    requests: Math.max(MIN_MANY_REQUESTS, Math.ceil(requests / MANY_REQUESTS_DIVISOR)),
    events: MANY_EVENTS,
  };
}

async function measure(
  side: Side,
  options: Load & { concurrency: number; secret: string; children: Set<ChildProcess> },
): Promise<{ phase: PhaseResult; report: ChildReport }> {
  const { warmUp, requests, events, concurrency, secret, children } = options;
  const child = fork(fileURLToPath(import.meta.url), ['serve', side], {
    env: { ...process.env, [SECRET_ENV]: secret },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  children.add(child);
  try {
    const ready = await nextMessage(child, 'ready', CHILD_READY_TIMEOUT_MS);
    const source = side === 'relay-source' ? await import('./support/stripe-source.ts') : undefined;
    const url = `${ready.url}${source?.SOURCE_PATH ?? '/events'}`;
    const sign = source
      ? (prefix: string, count: number) =>
          source.stripeSignedRequests(secret, prefix, count, BODY_BYTES)
      : webhookSigner(secret, events);
    const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
    try {
      const warmUpPhase = await runPhase(url, agent, await sign(`${side}-w`, warmUp), concurrency);
      requireAll202(side, 'warm-up', warmUpPhase);
      const phase = await runPhase(url, agent, await sign(side, requests), concurrency);
      requireAll202(side, 'measured run', phase);
      child.send({ type: 'stop' });
      const done = await nextMessage(child, 'done', CHILD_DONE_TIMEOUT_MS);
      const report: ChildReport = { maxRssKiB: done.maxRssKiB };
      if (done.queued !== undefined) report.queued = done.queued;
      return { phase, report };
    } finally {
      agent.destroy();
    }
  } finally {
    await stopChild(child);
    children.delete(child);
  }
}

/** The plain sides' requests: Standard Webhooks signatures with the bench's secret. */
function webhookSigner(
  secret: string,
  events: number,
): (prefix: string, count: number) => SignedRequest[] {
  const key = parseCredentials({ webhookSecrets: [secret], apiKeys: [] }).webhookKeys[0];
  if (key === undefined) throw new Error('the generated secret gave no key');
  return (prefix, count) => signedRequests(key, prefix, count, events);
}

/**
 * Requests signed up front, so the load generator spends its time sending. Each carries one
 * contacts create event padded to exactly BODY_BYTES (or `events` of them, unpadded: see
 * manyEvents), and a webhook id of its own.
 */
function signedRequests(
  key: Buffer,
  prefix: string,
  count: number,
  events: number,
): SignedRequest[] {
  const timestamp = Math.floor(Date.now() / 1000);
  return Array.from({ length: count }, (_, index) => {
    const id = `msg_${prefix}_${index}`;
    const body = events === 1 ? paddedEvent(index) : manyEvents(`${prefix}-${index}`, events);
    return {
      body,
      headers: {
        'content-type': 'application/json',
        'content-length': String(body.length),
        'webhook-id': id,
        'webhook-timestamp': String(timestamp),
        'webhook-signature': signWebhook(key, id, timestamp, body),
      },
    };
  });
}

function paddedEvent(index: number): Buffer {
  const event = (notes: string) => ({
    entity: 'contacts',
    action: 'create',
    data: { email: `bench-${index}@example.com`, firstname: 'Bench', lastname: 'Mark', notes },
  });
  const bare = Buffer.byteLength(JSON.stringify(event('')));
  return Buffer.from(JSON.stringify(event('x'.repeat(Math.max(0, BODY_BYTES - bare)))));
}

/**
 * `count` contacts creates naming count / 2 contacts, each twice (the second half repeats the
 * first), so the per-record send rule applies: a record's two events go in separate batches, the
 * second sent after the first is queued.
 */
function manyEvents(prefix: string, count: number): Buffer {
  const contacts = Math.ceil(count / 2);
  const events = Array.from({ length: count }, (_, index) => ({
    entity: 'contacts',
    action: 'create',
    data: { email: `bench-${prefix}-${index % contacts}@example.com`, firstname: `F${index}` },
  }));
  return Buffer.from(JSON.stringify(events));
}

/** Sends every request with `concurrency` in flight at once, each timed on its own. */
async function runPhase(
  url: string,
  agent: Agent,
  requests: ReadonlyArray<SignedRequest>,
  concurrency: number,
): Promise<PhaseResult> {
  const result: PhaseResult = {
    seconds: 0,
    latenciesMs: [],
    statuses: new Map(),
    samples: new Map(),
    errors: [],
  };
  let next = 0;
  const worker = async () => {
    while (next < requests.length) {
      const signed = requests[next++] as SignedRequest;
      const started = performance.now();
      try {
        const { status, body } = await post(url, agent, signed);
        result.latenciesMs.push(performance.now() - started);
        result.statuses.set(status, (result.statuses.get(status) ?? 0) + 1);
        if (!result.samples.has(status)) result.samples.set(status, body.slice(0, 300));
      } catch (error) {
        result.errors.push(error instanceof Error ? error.message : String(error));
      }
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: concurrency }, worker));
  result.seconds = (performance.now() - started) / 1000;
  return result;
}

function post(
  url: string,
  agent: Agent,
  signed: SignedRequest,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'POST', agent, headers: signed.headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }),
      );
      res.on('error', reject);
    });
    req.setTimeout(REQUEST_TIMEOUT_MS, () =>
      req.destroy(new Error(`no answer within ${REQUEST_TIMEOUT_MS} ms`)),
    );
    req.on('error', reject);
    req.end(signed.body);
  });
}

function requireAll202(side: Side, phaseName: string, phase: PhaseResult): void {
  const others = [...phase.statuses].filter(([status]) => status !== 202);
  if (others.length === 0 && phase.errors.length === 0) return;
  const lines = others.map(
    ([status, count]) => `  ${count} × ${status}: ${phase.samples.get(status) ?? ''}`,
  );
  if (phase.errors.length > 0) {
    lines.push(`  ${phase.errors.length} × request error, first: ${phase.errors[0]}`);
  }
  throw new Error(`${side} ${phaseName}: not every answer was 202\n${lines.join('\n')}`);
}

type Figures = { rate: number; p50: number; p99: number; rssMiB: number };

function print(
  results: Record<Side, { phase: PhaseResult; report: ChildReport }>,
  options: { requests: number; concurrency: number },
): void {
  const figures = (side: Side): Figures => {
    const { phase, report } = results[side];
    const sorted = [...phase.latenciesMs].sort((a, b) => a - b);
    return {
      rate: sorted.length / phase.seconds,
      p50: percentile(sorted, 0.5),
      p99: percentile(sorted, 0.99),
      rssMiB: report.maxRssKiB / 1024,
    };
  };
  const baseline = figures('baseline');
  const row = (name: string, f: Figures) =>
    `${name.padEnd(38)}${f.rate.toFixed(0).padStart(8)}${f.p50.toFixed(2).padStart(9)}` +
    `${f.p99.toFixed(2).padStart(9)}${f.rssMiB.toFixed(1).padStart(14)}`;

  console.log(
    `ingest: ${options.requests} requests per side after ${WARM_UP_REQUESTS} warm-up, ` +
      `${options.concurrency} keep-alive connections, ${BODY_BYTES}-byte signed bodies, ` +
      `DEDUP_WINDOW_SECONDS=0, node ${process.version}, ${availableParallelism()} CPUs, ` +
      `load ${loadAverage()}`,
  );
  console.log(`${''.padEnd(38)}   req/s   p50 ms   p99 ms  peak RSS MiB`);
  console.log(row('baseline (verify + 202)', baseline));
  const summary: Record<string, unknown> = {
    figure: 'ingest_ratio',
    baseline_rps: round(baseline.rate, 0),
    baseline_p99_ms: round(baseline.p99, 2),
  };
  const floor = figures('floor');
  console.log(row('floor (verify, zod, SendMessageBatch)', floor));
  const labels = {
    relay: 'relay (front + fauxqs on one loop)',
    'relay-worker': 'relay (front, fauxqs: 2 threads)',
    'relay-source': 'relay, Stripe source (2 threads)',
    'relay-dedup': 'relay, dedup on (dynalite, one loop)',
  } as const;
  for (const side of ['relay', 'relay-worker', 'relay-source', 'relay-dedup'] as const) {
    const f = figures(side);
    console.log(row(labels[side], f));
    console.log(
      `  ${side} / baseline: throughput ${(f.rate / baseline.rate).toFixed(2)}x, ` +
        `p99 ${(f.p99 / baseline.p99).toFixed(2)}x`,
    );
    Object.assign(summary, sideSummary(side, f, baseline));
  }
  const plain = figures('relay-worker');
  const source = figures('relay-source');
  const sourceRatio = source.rate / plain.rate;
  console.log(
    `  relay-source / relay-worker (the plain endpoint): throughput ${sourceRatio.toFixed(2)}x ` +
      `(goal >= ${SOURCE_RATIO_GOAL}: ${sourceRatio >= SOURCE_RATIO_GOAL ? 'met' : 'NOT met'}), ` +
      `p99 ${(source.p99 / plain.p99).toFixed(2)}x`,
  );
  Object.assign(summary, floorFigures(floor, plain, ''));
  const floor100 = figures('floor-100');
  const relay100 = figures('relay-100');
  console.log(
    `${MANY_EVENTS}-event requests (${results['relay-100'].phase.latenciesMs.length} per side):`,
  );
  console.log(row(`floor, ${MANY_EVENTS} events a request`, floor100));
  console.log(row(`relay (2 threads), ${MANY_EVENTS} events`, relay100));
  Object.assign(summary, floorFigures(floor100, relay100, `events${MANY_EVENTS}`));
  summary.value = round(plain.rate / baseline.rate, 3);
  summary.source_ratio = round(sourceRatio, 3);
  summary.source_ratio_goal = SOURCE_RATIO_GOAL;
  summary.dedup_store_calls_per_request = 2;
  summary.best_ratio = round(Math.max(figures('relay').rate, plain.rate) / baseline.rate, 3);
  summary.requests = options.requests;
  summary.concurrency = options.concurrency;
  summary.load_average = loadavg().map((value) => round(value, 2));
  console.log(`SUMMARY ${JSON.stringify(summary)}`);
}

/**
 * The relay (two threads, the local stack's shape) against its floor, printed and keyed
 * `floorRatio` and `p99FloorRatio` (after `prefix`, capitalised: `events100FloorRatio`).
 */
function floorFigures(floor: Figures, relay: Figures, prefix: string): Record<string, number> {
  const ratio = relay.rate / floor.rate;
  const p99Ratio = relay.p99 / floor.p99;
  console.log(
    `  relay / floor${prefix ? ` (${prefix})` : ''}: throughput ${ratio.toFixed(2)}x ` +
      `(goal >= 0.8), p99 ${p99Ratio.toFixed(2)}x (goal <= 2)`,
  );
  const key = (name: string) =>
    prefix ? `${prefix}${name[0]?.toUpperCase()}${name.slice(1)}` : name;
  return {
    [key('floorRps')]: round(floor.rate, 0),
    [key('floorP99Ms')]: round(floor.p99, 2),
    [key('floorRssMiB')]: round(floor.rssMiB, 0),
    [key('relayRps')]: round(relay.rate, 0),
    [key('relayP99Ms')]: round(relay.p99, 2),
    [key('floorRatio')]: round(ratio, 3),
    [key('p99FloorRatio')]: round(p99Ratio, 2),
  };
}

/** A side's figures for the SUMMARY line, keyed `<side>_…` (`relay_worker_rps`, …). */
function sideSummary(side: Side, f: Figures, baseline: Figures): Record<string, number> {
  const key = side.replace('-', '_');
  return {
    [`${key}_ratio`]: round(f.rate / baseline.rate, 3),
    [`${key}_rps`]: round(f.rate, 0),
    [`${key}_p99_ratio`]: round(f.p99 / baseline.p99, 2),
    [`${key}_rss_mib`]: round(f.rssMiB, 0),
  };
}

function nextMessage<T extends ChildMessage['type']>(
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
async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const timer = setTimeout(() => child.kill('SIGKILL'), CHILD_DONE_TIMEOUT_MS);
  if (child.connected) child.disconnect();
  await exited;
  clearTimeout(timer);
}

// ---- the server processes ----

async function serve(side: Side): Promise<void> {
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
  const { queueCounts, startLocalSqs } = await import('../test/support/local-sqs.ts');
  const { createQueuePair } = await import('../infra/local/queue-pair.ts');
  const { startDedupStore } = await import('../infra/local/dynamodb-local.ts');
  const local = await startLocalSqs();
  const dedup = await startDedupStore(side === 'relay-dedup' ? DEDUP_ON_WINDOW_SECONDS : 0);
  const sources =
    side === 'relay-source'
      ? (await import('./support/stripe-source.ts')).writeStripeSourcesFile(secret)
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
    import('../infra/local/ingest-thread.ts'),
    import('../functions/shared/config.ts'),
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
  const { queueCounts, startLocalSqs } = await import('../test/support/local-sqs.ts');
  const { createQueuePair } = await import('../infra/local/queue-pair.ts');
  const { startIngestFloorThread } = await import('./support/ingest-floor.ts');
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

function verifySignature(key: Buffer, headers: IncomingHttpHeaders, body: Buffer): boolean {
  const id = headers['webhook-id'];
  const timestamp = headers['webhook-timestamp'];
  const signatures = headers['webhook-signature'];
  if (typeof id !== 'string' || typeof timestamp !== 'string' || typeof signatures !== 'string')
    return false;
  const expected = createHmac('sha256', key).update(`${id}.${timestamp}.`).update(body).digest();
  let valid = false;
  for (const entry of signatures.split(' ')) {
    const [version, encoded] = entry.split(',');
    if (version !== 'v1' || encoded === undefined) continue;
    const candidate = Buffer.from(encoded, 'base64');
    if (candidate.length === expected.length && timingSafeEqual(candidate, expected)) valid = true;
  }
  return valid;
}
