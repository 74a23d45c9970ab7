/**
 * How fast the relay drains a backlog: events already queued on a fauxqs events queue are
 * delivered through the local stand-in for the SQS event source mapping (N invocations at once,
 * a poller reading when a slot is free, 10 messages per invocation from the FIFO queue, as Lambda's
 * mapping takes them) invoking the real batch handler (built by functions/batch/compose.ts),
 * which receives the rest of its batch of 200 itself within a 1 s window, into the Mautic
 * simulator answering every API call in a fixed time (its own work included), as a real Mautic
 * across a network does. Prints the rate, the Mautic calls per event, and the ratio of the rate
 * to the ideal one: every invocation slot keeping one Mautic call busy all the time, with the
 * fewest calls the events need (concurrency × batch size ÷ (calls per batch × latency)), which
 * only Mautic's latency would limit. First, before the clock, times the handler's own overhead
 * per 200 events (its time less the time waiting on Mautic, invocations one at a time), which
 * also warms it up.
 *
 *   npm run bench:drain -- [events=20000] [concurrency=2] [latencyMs=50] [runs=both]
 *
 * `runs` is `creates`, `match-edits` or `both`, one after the other in this process:
 * - creates: contacts creates with distinct emails (each its own message group), one call per
 *   200 (`POST /api/contacts/batch/new`): the baseline.
 * - match-edits: an edit of each of those contacts named by `match: { email }` (contract §5),
 *   each in its create's message group; two calls per 200, a lookup (`GET /api/contacts`) then
 *   the edit (`PATCH /api/contacts/batch/edit`), so its ideal is half the creates'. Alone, the
 *   contacts are stored in the simulator beforehand, off the clock. With both, it also prints
 *   the edits' ratio divided by the creates' (the edits' cost guard: within 10 %).
 *
 * The last line is `SUMMARY {json}` for scripts: the creates' figures under the keys it always
 * had (`figure: drain_ratio`, `value`, …; the same ratio as `drainFloorRatio`, the drain's floor
 * being Mautic's own time), the edits' under `match_edit_*` (`matchEditDrainFloorRatio`).
 *
 * Each run's events are queued as the ingest queues them (`queueMessageFor`) before its clock
 * starts; it runs from starting the pollers until the simulator has answered calls carrying
 * every event (then, off the clock, it must hold every contact, once, with the edit if the run
 * made one, and nothing may be dead-lettered). The queue emulator runs on a worker thread of
 * this process, as the local stack runs it, and makes the mapping's receives and deletes there;
 * the Mautic simulator runs on another (bench/support/drain-simulator.ts). The Secrets Manager
 * stand-in shares the handler's loop (one read per token cache period). The peak RSS and the CPU
 * figure are the whole process's, threads included.
 */
import { randomUUID } from 'node:crypto';
import { availableParallelism, loadavg } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import { CreateSecretCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SendMessageBatchCommand, type SQSClient } from '@aws-sdk/client-sqs';
import type { SQSRecord } from 'aws-lambda';
import { buildBatchHandler } from '../functions/batch/compose.ts';
import type { QueuedEvent } from '../functions/core/events.ts';
import { queueMessageFor } from '../functions/core/ingest/queue-messages.ts';
import type { TokenSecret } from '../functions/core/token-secret.ts';
import { ENV, loadBatchConfig } from '../functions/shared/config.ts';
import { LOCAL_DEDUP_TABLE, startDedupStore } from '../infra/local/dynamodb-local.ts';
import { type FauxqsThread, startFauxqsThread } from '../infra/local/fauxqs-thread.ts';
import { lambdaContext } from '../infra/local/lambda-context.ts';
import { createQueuePair } from '../infra/local/queue-pair.ts';
import { startSecretsManagerFake } from '../infra/local/secrets-manager-fake.ts';
import { FIFO_MAX_BATCH_SIZE, SqsEventSource } from '../infra/local/sqs-event-source.ts';
import { queueCounts, sqsClient } from '../test/support/local-sqs.ts';
import {
  type DeliveringCall,
  drainEmail,
  type SimulatorThread,
  startSimulatorThread,
} from './support/drain-simulator.ts';
import { loadAverage, percentile, positiveInteger, round } from './support/figures.ts';

/** The local stack's defaults (infra/local/local-stack.ts). */
const BATCH_SIZE = 200;
const BATCH_WINDOW_MS = 1_000;
const BATCH_TIMEOUT_MS = 10_000;
const VISIBILITY_TIMEOUT_SECONDS = 30;
const MAX_RECEIVE_COUNT = 5;
const TOKEN_CACHE_MS = 30_000;
/** SendMessageBatch calls in flight while the backlog is queued. */
const FILL_PARALLELISM = 16;
/**
 * How often the simulator is asked, while the queue drains, how many items the run's answered
 * calls carried (a cheap question; the contacts are counted once the clock stops).
 */
const POLL_INTERVAL_MS = 5;
/** A run gives up after this long, or 20 × its ideal time when that is longer. */
const MIN_DRAIN_TIMEOUT_MS = 120_000;
/** What the edits write, and the check that every contact holds afterwards. */
const EDIT = { field: 'city', value: 'Edited' };

type EventFields = Pick<QueuedEvent, 'entity' | 'action' | 'data' | 'match'>;

/** What a run queues and how its events reach Mautic. */
interface RunShape {
  name: 'creates' | 'match-edits';
  title: string;
  /** The fewest Mautic calls a full batch of these events needs: the ideal's divisor. */
  callsPerBatch: number;
  /** The call whose answered items count the run's events as delivered. */
  delivering: DeliveringCall;
  /** The event for the contact with `email`, the `index`th of the run. */
  event(email: string, index: number): EventFields;
}

const RUN_SHAPES: Record<RunShape['name'], RunShape> = {
  creates: {
    name: 'creates',
    title: 'contacts creates',
    callsPerBatch: 1,
    delivering: { method: 'POST', path: '/api/contacts/batch/new' },
    event: (email, index) => ({
      entity: 'contacts',
      action: 'create',
      data: { email, firstname: 'Drain', lastname: `N${index}` },
    }),
  },
  'match-edits': {
    name: 'match-edits',
    title: 'contacts edits by match.email',
    callsPerBatch: 2,
    delivering: { method: 'PATCH', path: '/api/contacts/batch/edit' },
    event: (email) => ({
      entity: 'contacts',
      action: 'edit',
      match: { email },
      data: { [EDIT.field]: EDIT.value },
    }),
  },
};

const RUN_CHOICES: Record<string, RunShape[]> = {
  both: [RUN_SHAPES.creates, RUN_SHAPES['match-edits']],
  creates: [RUN_SHAPES.creates],
  'match-edits': [RUN_SHAPES['match-edits']],
};

const events = positiveInteger(process.argv[2], 20_000, 'events');
const concurrency = positiveInteger(process.argv[3], 2, 'concurrency');
const latencyMs = positiveInteger(process.argv[4], 50, 'latencyMs');
const runs = RUN_CHOICES[process.argv[5] ?? 'both'];

/** Invocations of 200 events, one at a time, timed for the handler's own overhead. */
const OVERHEAD_RUNS = 30;
/** Invocations before those, untimed. */
const WARM_UP_RUNS = 10;

/** Events per second with every slot keeping one Mautic call busy, the fewest calls made. */
function idealRate(shape: RunShape): number {
  return (concurrency * BATCH_SIZE) / ((shape.callsPerBatch * latencyMs) / 1000);
}

interface RunResult {
  shape: RunShape;
  seconds: number;
  apiCalls: number;
  /** `GET /api/contacts` among the calls. */
  lookups: number;
  invocations: number;
  /** Time spent waiting on Mautic during the drain, summed over the invocations. */
  mauticMs: number;
  /** Per invocation of BATCH_SIZE events: handler time less the time waiting on Mautic. */
  overheadMs: number[];
  /** This process's CPU time over the drain's wall time, its threads together. */
  cpuShare: number;
  /** Event loop utilisation over the drain: the handler's thread's and the simulator's. */
  handlerLoop: number;
  simulatorLoop: number;
}

type QueuePair = Awaited<ReturnType<typeof createQueuePair>>;
type BatchHandler = ReturnType<typeof buildBatchHandler>;

/** What the runs share: the simulator, the emulators, the queues and the handler. */
interface Bench {
  sim: SimulatorThread;
  sqs: SQSClient;
  fauxqs: FauxqsThread;
  /** A new events queue and its dead-letter queue. */
  queuePair(prefix: string): Promise<QueuePair>;
  /** A handler as the local stack builds it, on `queues`. */
  handlerFor(queues: QueuePair): BatchHandler;
  /** The handler the overhead runs invoke, on an empty queue of its own. */
  warmUp: BatchHandler;
  warmUpQueueArn: string;
  /** Time spent waiting on Mautic, summed over every call (timedFetch). */
  mauticTime: { ms: number };
  /** When it waited on Mautic or on an empty queue (long polls that found nothing), often at once. */
  waits: { spans: Array<[number, number]> };
  refreshRequests: string[];
}

if (runs === undefined) {
  console.error(`bench:drain: runs must be one of ${Object.keys(RUN_CHOICES).join(', ')}`);
  process.exitCode = 1;
} else {
  try {
    print(await drain(runs));
  } catch (error) {
    console.error(`bench:drain failed: ${error instanceof Error ? error.message : error}`);
    process.exitCode = 1;
  }
}

async function drain(shapes: RunShape[]): Promise<RunResult[]> {
  const stops: Array<() => Promise<void>> = [];
  try {
    const bench = await startBench(stops);
    // The creates' overhead runs also make the contacts that the edits' overhead runs name.
    const overheadMs = new Map([
      [RUN_SHAPES.creates, await timeOverhead(bench, RUN_SHAPES.creates)],
    ]);
    for (const shape of shapes) {
      if (!overheadMs.has(shape)) overheadMs.set(shape, await timeOverhead(bench, shape));
    }
    if (!shapes.includes(RUN_SHAPES.creates)) await bench.sim.seed(events);
    const results: RunResult[] = [];
    for (const shape of shapes) {
      results.push({ ...(await drainRun(bench, shape)), overheadMs: overheadMs.get(shape) ?? [] });
    }
    return results;
  } finally {
    for (const stop of stops.splice(0).reverse()) await stop().catch(() => {});
  }
}

/** Starts what every run uses; `stops` gets what stops each, in order. */
async function startBench(stops: Array<() => Promise<void>>): Promise<Bench> {
  const sim = await startSimulatorThread(latencyMs);
  stops.push(() => sim.close());

  // The token as the local stack's batch handler reads it: the token secret in the Secrets
  // Manager stand-in, through SecretsManagerTokenStore with the stack's cache. The token is
  // minted by the simulator directly, so no refresher runs and /oauth is never called.
  const localAws = {
    region: 'us-east-1',
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
  };
  const secretsFake = await startSecretsManagerFake();
  stops.push(() => secretsFake.close());
  const secrets = new SecretsManagerClient({ ...localAws, endpoint: secretsFake.endpoint });
  stops.push(async () => secrets.destroy());
  const tokenSecretId = 'MauticRelay/bench/token';
  const now = new Date();
  const token: TokenSecret = {
    accessToken: sim.accessToken,
    // The simulator's default access token lifetime.
    accessTokenExpiresAt: new Date(now.getTime() + 3_600_000).toISOString(),
    obtainedWith: 'client_credentials',
    updatedAt: now.toISOString(),
  };
  await secrets.send(
    new CreateSecretCommand({ Name: tokenSecretId, SecretString: JSON.stringify(token) }),
  );

  // The action ledger's table and Mautic's shared health, as the local stack has them: dynalite
  // on a thread of its own (in the handler's process until 2026-11-28, where its work took the
  // handler's loop: each batch's read of the health waited 21 ms on average).
  const dynamodb = await startDedupStore(0);
  stops.push(() => dynamodb.close());

  // The queue emulator on a thread of its own, as the local stack runs it.
  const fauxqs = await startFauxqsThread();
  stops.push(() => fauxqs.stop());
  const sqs = sqsClient(`http://127.0.0.1:${fauxqs.port}`);
  stops.push(async () => sqs.destroy());
  const queuePair = (prefix: string) =>
    createQueuePair(sqs, {
      name: `${prefix}-${randomUUID().slice(0, 8)}`,
      maxReceiveCount: MAX_RECEIVE_COUNT,
      visibilityTimeoutSeconds: VISIBILITY_TIMEOUT_SECONDS,
    });
  // When the handler waited, for the overhead figure: on Mautic (timedFetch below), and on an
  // empty queue: an overhead run's full batch makes it go on to a next one, whose long polls of a
  // second find nothing (since the handler learns Mautic's pace, 2026-11-28: the figure read
  // ~950 ms). Often at once (the next batch is gathered while this one is delivered), so the
  // overhead takes off the union of these spans, not their sum.
  const waits = { spans: [] as Array<[number, number]> };
  sqs.middlewareStack.add(
    (next, context) => async (args) => {
      const started = performance.now();
      const result = await next(args);
      const output = result.output as { Messages?: unknown[] };
      if (context.commandName === 'ReceiveMessageCommand' && !output.Messages?.length) {
        waits.spans.push([started, performance.now()]);
      }
      return result;
    },
    { step: 'initialize', name: 'benchEmptyPollTimer' },
  );
  process.env.POWERTOOLS_METRICS_DISABLED = 'true';
  const refreshRequests: string[] = [];
  // The handler as the local stack and Lambda build it (functions/batch/compose.ts), with a
  // fetch that keeps count of the time spent waiting on Mautic, for the overhead figure.
  const mauticTime = { ms: 0 };
  const timedFetch: typeof fetch = async (input, init) => {
    const started = performance.now();
    try {
      return await fetch(input, init);
    } finally {
      mauticTime.ms += performance.now() - started;
      waits.spans.push([started, performance.now()]);
    }
  };
  const handlerFor = (queues: QueuePair) =>
    buildBatchHandler(
      loadBatchConfig({
        [ENV.MAUTIC_BASE_URL]: sim.url,
        [ENV.TOKEN_SECRET_ID]: tokenSecretId,
        [ENV.EVENTS_QUEUE_URL]: queues.queueUrl,
        [ENV.DEAD_LETTER_QUEUE_URL]: queues.deadLetterQueueUrl,
        [ENV.REFRESH_FUNCTION_NAME]: 'bench-refresher',
        [ENV.BATCH_SIZE]: String(BATCH_SIZE),
        [ENV.BATCH_WINDOW_SECONDS]: String(BATCH_WINDOW_MS / 1000),
        [ENV.TOKEN_CACHE_SECONDS]: String(TOKEN_CACHE_MS / 1000),
        [ENV.DEDUP_TABLE_NAME]: LOCAL_DEDUP_TABLE,
      }),
      {
        secrets,
        sqs,
        dynamodb: dynamodb.client,
        // No refresher runs in the bench: a token refresh would be a bug in it.
        refresher: {
          refreshNow: async ({ reason }) => {
            refreshRequests.push(reason);
            return { kind: 'busy' };
          },
        },
        logger: new Logger({ logLevel: 'SILENT' }),
        metrics: new Metrics({ namespace: 'MauticBatchRelay/bench', serviceName: 'bench' }),
        fetch: timedFetch,
      },
    );
  // The overhead runs' full batches make the handler go on with its next batch from the queue
  // (a backlog): pointed at an empty queue of its own, the warm-up leaves the bench's queue be.
  const idle = await queuePair('bench-idle');
  return {
    sim,
    sqs,
    fauxqs,
    queuePair,
    handlerFor,
    warmUp: handlerFor(idle),
    warmUpQueueArn: idle.queueArn,
    mauticTime,
    waits,
    refreshRequests,
  };
}

/**
 * The handler's own work per batch of the shape's events (read, plan, deliver's bookkeeping,
 * settle, middleware): one invocation at a time, so the time waiting on Mautic can be taken off
 * its whole time. Before the drains: these also warm the handler, its HTTP client and the
 * simulator up, as a function that has served before is (the first invocations of a cold one
 * took twice as long while V8 compiled their code); the first WARM_UP_RUNS are not timed. The
 * runs name contacts `overhead-<run>-<n>`: the creates' make them, the edits' edit them.
 */
async function timeOverhead(bench: Bench, shape: RunShape): Promise<number[]> {
  const overheadMs: number[] = [];
  for (let run = 0; run < WARM_UP_RUNS + OVERHEAD_RUNS; run++) {
    const records = Array.from({ length: BATCH_SIZE }, (_, index) =>
      record(`overhead-${run}-${index}`, shape, bench.warmUpQueueArn),
    );
    bench.waits.spans.length = 0;
    const began = performance.now();
    const answer = await bench.warmUp(
      { Records: records },
      lambdaContext('batch', BATCH_TIMEOUT_MS),
    );
    const took = performance.now() - began;
    if ((answer?.batchItemFailures ?? []).length > 0) {
      throw new Error(
        `${shape.name} overhead run ${run}: ${answer?.batchItemFailures.length} failures`,
      );
    }
    const waited = covered(bench.waits.spans);
    if (run >= WARM_UP_RUNS) overheadMs.push(took - waited);
  }
  return overheadMs;
}

/** How long at least one of the spans was running (their union's length). */
function covered(spans: ReadonlyArray<[number, number]>): number {
  let total = 0;
  let reached = Number.NEGATIVE_INFINITY;
  for (const [start, end] of [...spans].sort((a, b) => a[0] - b[0])) {
    total += Math.max(0, end - Math.max(start, reached));
    reached = Math.max(reached, end);
  }
  return total;
}

/**
 * Queues the shape's events for the drain contacts, drains them on the clock, then checks. Each
 * run has queues and a handler of its own, as the first run always had: a poll that the previous
 * run's stop cut short still takes messages on fauxqs until its wait is over (and hides them for
 * the visibility timeout), and it would take them from the next run's backlog.
 */
async function drainRun(bench: Bench, shape: RunShape): Promise<Omit<RunResult, 'overheadMs'>> {
  const { sim } = bench;
  const queues = await bench.queuePair(`bench-${shape.name}`);
  await fill(bench.sqs, queues.queueUrl, shape);
  const queued = await queueCounts(bench.sqs, queues.queueUrl);
  if (queued.visible !== events) {
    throw new Error(`the events queue holds ${queued.visible} messages, not ${events}`);
  }
  await sim.mark(shape.delivering);

  let invocations = 0;
  let failedMessages = 0;
  const pollErrors: string[] = [];
  // As the local stack runs it: one mapping whose pollers read when an invocation slot is free,
  // their SQS calls made on the emulator's thread (infra/local/fauxqs-thread.ts).
  const mappingSqs = bench.fauxqs.mappingSqs();
  const source = new SqsEventSource({
    sqs: mappingSqs,
    queueUrl: queues.queueUrl,
    queueArn: queues.queueArn,
    handler: bench.handlerFor(queues),
    batchSize: FIFO_MAX_BATCH_SIZE,
    batchWindowMs: 0,
    functionTimeoutMs: BATCH_TIMEOUT_MS,
    maxConcurrency: concurrency,
    onInvoke: (report) => {
      invocations++;
      failedMessages += report.failed.length;
    },
    onError: (error) => void pollErrors.push(String(error)),
  });
  const stopSource = () => source.stop().finally(() => mappingSqs.destroy());

  let clock: Pick<RunResult, 'seconds' | 'cpuShare' | 'handlerLoop' | 'simulatorLoop'>;
  try {
    const started = performance.now();
    bench.mauticTime.ms = 0;
    const cpuBefore = process.cpuUsage();
    const handlerLoop = performance.eventLoopUtilization();
    const simulatorLoop = sim.eventLoop();
    source.start();
    await untilDelivered(sim, started, shape);
    const seconds = (performance.now() - started) / 1000;
    const cpu = process.cpuUsage(cpuBefore);
    clock = {
      seconds,
      cpuShare: (cpu.user + cpu.system) / 1e6 / seconds,
      handlerLoop: performance.eventLoopUtilization(handlerLoop).utilization,
      simulatorLoop: sim.eventLoop(simulatorLoop).utilization,
    };
  } catch (error) {
    await stopSource().catch(() => {});
    throw error;
  }
  await stopSource();
  const mauticMs = bench.mauticTime.ms;

  const problems: string[] = [];
  const held = await sim.counts(EDIT);
  if (held.contacts !== events || held.emails !== events) {
    problems.push(`the simulator holds ${held.contacts} drained contacts, ${held.emails} emails`);
  }
  if (shape.name === 'match-edits' && held.holding !== events) {
    problems.push(`${held.holding} of ${events} contacts hold the edit`);
  }
  const left = await queueCounts(bench.sqs, queues.queueUrl);
  if (left.visible + left.inFlight > 0) {
    problems.push(`the events queue still holds ${left.visible} + ${left.inFlight} in flight`);
  }
  const dead = await queueCounts(bench.sqs, queues.deadLetterQueueUrl);
  if (dead.visible + dead.inFlight > 0) {
    problems.push(`${dead.visible + dead.inFlight} events were dead-lettered`);
  }
  if (failedMessages > 0) problems.push(`${failedMessages} messages were reported failed`);
  if (pollErrors.length > 0) {
    problems.push(`${pollErrors.length} polling errors, first: ${pollErrors[0]}`);
  }
  if (bench.refreshRequests.length > 0) {
    problems.push(`the handler asked for a token refresh: ${bench.refreshRequests[0]}`);
  }
  if (problems.length > 0) throw new Error(`${shape.name}: ${problems.join('; ')}`);

  const { apiCalls, lookups } = held;
  return { shape, ...clock, apiCalls, lookups, invocations, mauticMs };
}

/** An SQS record as the event source hands it over: the shape's event, received once. */
function record(id: string, shape: RunShape, queueArn: string): SQSRecord {
  const now = String(Date.now());
  const messageId = `${shape.name}-${id}`;
  return {
    messageId,
    receiptHandle: `rh-${messageId}`,
    body: JSON.stringify({
      v: 1,
      eventId: messageId,
      receivedAt: new Date().toISOString(),
      sender: 'bench',
      ...shape.event(`${id}@example.com`, 0),
    }),
    attributes: {
      ApproximateReceiveCount: '1',
      SentTimestamp: now,
      SenderId: 'bench',
      ApproximateFirstReceiveTimestamp: now,
    },
    messageAttributes: {},
    md5OfBody: '',
    eventSource: 'aws:sqs',
    eventSourceARN: queueArn,
    awsRegion: 'us-east-1',
  };
}

/**
 * Queues the run's backlog as the ingest queues it (body, message group, deduplication id): an
 * edit by match.email lands in its contact's create's group. SendMessageBatch in groups of 10,
 * FILL_PARALLELISM calls at a time.
 */
async function fill(sqs: SQSClient, queueUrl: string, shape: RunShape): Promise<void> {
  const receivedAt = new Date().toISOString();
  const message = (index: number) => {
    const event: QueuedEvent = {
      v: 1,
      eventId: `drain-${shape.name}-${index}`,
      receivedAt,
      sender: 'bench',
      ...shape.event(drainEmail(index), index),
    };
    return queueMessageFor(event, index);
  };
  let next = 0;
  const worker = async () => {
    while (next < events) {
      const first = next;
      next = Math.min(events, first + 10);
      const { Failed = [] } = await sqs.send(
        new SendMessageBatchCommand({
          QueueUrl: queueUrl,
          Entries: Array.from({ length: next - first }, (_, offset) => {
            const { body, groupId, deduplicationId } = message(first + offset);
            return {
              Id: String(offset),
              MessageBody: body,
              MessageGroupId: groupId,
              MessageDeduplicationId: deduplicationId,
            };
          }),
        }),
      );
      if (Failed.length > 0) throw new Error(`SendMessageBatch failed: ${JSON.stringify(Failed)}`);
    }
  };
  await Promise.all(Array.from({ length: FILL_PARALLELISM }, worker));
}

/** Resolves when the simulator has answered, with a 2xx, the run's calls carrying every event. */
async function untilDelivered(sim: SimulatorThread, started: number, shape: RunShape) {
  const timeoutMs = Math.max(MIN_DRAIN_TIMEOUT_MS, (20 * events * 1000) / idealRate(shape));
  while (performance.now() - started < timeoutMs) {
    if ((await sim.carried()) >= events) return;
    await sleep(POLL_INTERVAL_MS);
  }
  const carried = await sim.carried();
  throw new Error(
    `${shape.name}: the simulator's answered calls carried ${carried} of ${events} events after ${timeoutMs} ms`,
  );
}

/** A run's figures, as printed and as the SUMMARY line has them. */
function figures(result: RunResult) {
  const { shape, seconds, apiCalls, mauticMs, overheadMs } = result;
  const rate = events / seconds;
  const overhead = [...overheadMs].sort((a, b) => a - b);
  return {
    rate,
    ideal: idealRate(shape),
    ratio: rate / idealRate(shape),
    callsPerEvent: apiCalls / events,
    busy: mauticMs / (seconds * 1000 * concurrency),
    /** Mautic's answer time as the handler saw it: the latency, unless its work or the CPU stretch it. */
    callMs: mauticMs / result.apiCalls,
    p50: percentile(overhead, 0.5),
    p90: percentile(overhead, 0.9),
    /**
     * The handler's thread's busy time per batch during the drain: both invocations share that
     * thread here (each has a CPU of its own in Lambda), and it also makes the queue calls the
     * overhead runs leave out (their 200 messages are all handed over: no receive, no delete).
     */
    loopMsPer200: (result.handlerLoop * seconds * 1000 * BATCH_SIZE) / events,
  };
}

function printRun(result: RunResult): void {
  const { shape, seconds, apiCalls, lookups, invocations, cpuShare, handlerLoop, simulatorLoop } =
    result;
  const { rate, ideal, ratio, callsPerEvent, busy, callMs, p50, p90, loopMsPer200 } =
    figures(result);
  const fewest = (events / BATCH_SIZE) * shape.callsPerBatch;
  console.log(`\n${shape.name}: ${events} ${shape.title} in ${seconds.toFixed(2)} s`);
  console.log(`  events/s:         ${rate.toFixed(0)}`);
  console.log(
    `  Mautic calls:     ${apiCalls} (${lookups} lookups), ${callsPerEvent.toFixed(4)} per event, ` +
      `${(apiCalls / fewest).toFixed(2)} × the fewest (${shape.callsPerBatch} per ${BATCH_SIZE}); ` +
      `${invocations} invocations (${(events / invocations).toFixed(1)} events each)`,
  );
  console.log(
    `  process CPU:      ${(cpuShare * 100).toFixed(0)} % of one core (emulators, simulator and ` +
      'handler share this process); event loops busy: ' +
      `the handler's thread ${(handlerLoop * 100).toFixed(0)} % (${loopMsPer200.toFixed(1)} ms per ${BATCH_SIZE} events, ` +
      `both invocations' and their queue calls), the simulator's ${(simulatorLoop * 100).toFixed(0)} %`,
  );
  console.log(
    `  slot busy on Mautic: ${(busy * 100).toFixed(0)} % of ${concurrency} × the drain, ` +
      `${callMs.toFixed(1)} ms a call on average`,
  );
  console.log(
    `  ideal events/s:   ${ideal.toFixed(0)} (${concurrency} × ${BATCH_SIZE} ÷ ` +
      `(${shape.callsPerBatch} × ${latencyMs} ms))`,
  );
  console.log(`  measured / ideal: ${ratio.toFixed(2)}`);
  console.log(
    `  handler overhead per ${BATCH_SIZE} events (its time less the waits on Mautic and on an empty queue, ` +
      `${OVERHEAD_RUNS} runs one at a time, after ${WARM_UP_RUNS}, all ${BATCH_SIZE} handed over: no queue calls): ` +
      `p50 ${p50.toFixed(1)} ms, p90 ${p90.toFixed(1)} ms`,
  );
}

/** The SUMMARY keys of one run: the creates' as they always were, the edits' prefixed. */
function summaryOf(result: RunResult): Record<string, unknown> {
  const { rate, ideal, ratio, callsPerEvent, busy, callMs, p50, p90, loopMsPer200 } =
    figures(result);
  if (result.shape.name === 'creates') {
    return {
      figure: 'drain_ratio',
      value: round(ratio, 3),
      // The drain's floor is Mautic's own time: the ideal (issue 38).
      drainFloorRatio: round(ratio, 3),
      events_per_s: round(rate, 0),
      baseline_ideal_events_per_s: round(ideal, 0),
      calls_per_event: round(callsPerEvent, 5),
      slot_busy: round(busy, 3),
      mautic_call_ms: round(callMs, 1),
      process_cpu_share: round(result.cpuShare, 2),
      handler_loop_busy: round(result.handlerLoop, 2),
      handler_loop_ms_per_200: round(loopMsPer200, 1),
      simulator_loop_busy: round(result.simulatorLoop, 2),
      handler_overhead_ms_per_200_p50: round(p50, 2),
      handler_overhead_ms_per_200_p90: round(p90, 2),
    };
  }
  return {
    match_edit_ratio: round(ratio, 3),
    matchEditDrainFloorRatio: round(ratio, 3),
    match_edit_events_per_s: round(rate, 0),
    match_edit_ideal_events_per_s: round(ideal, 0),
    match_edit_calls_per_event: round(callsPerEvent, 5),
    match_edit_lookups: result.lookups,
    match_edit_slot_busy: round(busy, 3),
    match_edit_mautic_call_ms: round(callMs, 1),
    match_edit_process_cpu_share: round(result.cpuShare, 2),
    match_edit_handler_loop_busy: round(result.handlerLoop, 2),
    match_edit_handler_loop_ms_per_200: round(loopMsPer200, 1),
    match_edit_simulator_loop_busy: round(result.simulatorLoop, 2),
    match_edit_handler_overhead_ms_per_200_p50: round(p50, 2),
    match_edit_handler_overhead_ms_per_200_p90: round(p90, 2),
  };
}

function print(results: RunResult[]): void {
  console.log(
    `drain: ${events} queued events per run, ${concurrency} invocations at once, ` +
      `${FIFO_MAX_BATCH_SIZE} handed over and topped up to ${BATCH_SIZE} within ${BATCH_WINDOW_MS} ms, Mautic latency ${latencyMs} ms per call, ` +
      `node ${process.version}, ${availableParallelism()} CPUs, load ${loadAverage()}`,
  );
  for (const result of results) printRun(result);
  const creates = results.find((result) => result.shape.name === 'creates');
  const edits = results.find((result) => result.shape.name === 'match-edits');
  const editsToCreates =
    creates && edits ? figures(edits).ratio / figures(creates).ratio : undefined;
  if (editsToCreates !== undefined) {
    console.log(
      `\nmatch-edits' ratio ÷ creates': ${editsToCreates.toFixed(3)} ` +
        `(${editsToCreates >= 1 ? '+' : ''}${((editsToCreates - 1) * 100).toFixed(1)} %)`,
    );
  }
  console.log(`peak RSS:           ${(process.resourceUsage().maxRSS / 1024).toFixed(1)} MiB`);
  const summary = {
    ...(creates
      ? {}
      : { figure: 'match_edit_drain_ratio', value: round(figures(edits as RunResult).ratio, 3) }),
    ...Object.assign({}, ...results.map(summaryOf)),
    ...(editsToCreates === undefined ? {} : { match_edit_vs_creates: round(editsToCreates, 3) }),
    runs: results.map((result) => result.shape.name),
    events,
    concurrency,
    latency_ms: latencyMs,
    load_average: loadavg().map((value) => round(value, 2)),
  };
  console.log(`SUMMARY ${JSON.stringify(summary)}`);
}
