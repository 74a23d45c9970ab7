/**
 * What the ingest path costs: requests per second, p50/p99 latency and peak memory of the real
 * ingest handler behind the local HTTP front (signature check, schema, SendMessageBatch to an
 * in-process fauxqs queue), against its floor (issue 38): a minimal server, measured in the same
 * run, that verifies the signature, validates with the relay's schema and sends one
 * SendMessageBatch per 10 events with the same SDK client to the same FIFO queue emulator, on a
 * thread of its own as the relay's two-thread side (bench/support/ingest-floor.ts). Both are
 * measured with single-event requests and with requests of 100 events naming 50 contacts twice,
 * where the per-record send rule applies (SUMMARY `floorRatio`, `p99FloorRatio`,
 * `events100FloorRatio`, `events100P99FloorRatio`: the two-thread relay over the floor). The old
 * baseline stays beside them for continuity: a bare node:http server that only verifies the
 * Standard Webhooks signature and answers 202. Each server runs in a child process of its own, so its
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
import { randomBytes } from 'node:crypto';
import { Agent } from 'node:http';
import { availableParallelism, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
// Only node:crypto behind this one: the baseline process must not load the relay's modules,
// or its peak RSS would count them. The relay's are imported in startRelay.
import { parseCredentials, signWebhook } from '../functions/core/ingest/webhook-auth.ts';
import { loadAverage, percentile, positiveInteger, round } from './support/figures.ts';
import { type PhaseResult, requireAll202, runPhase } from './support/ingest-load.ts';
import { nextMessage, SECRET_ENV, type Side, serve, stopChild } from './support/ingest-servers.ts';
import type { SignedRequest } from './support/stripe-source.ts';

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

const WARM_UP_REQUESTS = 300;
const BODY_BYTES = 1024;
const CHILD_READY_TIMEOUT_MS = 20_000;
const CHILD_DONE_TIMEOUT_MS = 10_000;
/** The whole run, children included, stops here whatever happens. */
const RUN_TIMEOUT_MS = 300_000;

interface ChildReport {
  maxRssKiB: number;
  queued?: number;
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
