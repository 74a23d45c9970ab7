/**
 * How fast the relay drains a backlog: events already queued on a fauxqs events queue are
 * delivered through the local stand-in for the SQS event source mapping (N invocations at once,
 * its pollers gathering ahead, 10 messages per invocation from the FIFO queue, as Lambda's
 * mapping takes them) invoking the real batch handler (built by functions/batch/compose.ts),
 * which receives the rest of its batch of 200 itself within a 1 s window, into the Mautic
 * simulator answering every API call in a fixed time (its own work included), as a real Mautic
 * across a network does. Prints the rate, the Mautic calls per event, and the ratio of the rate
 * to the ideal one: every invocation slot keeping one full batch in Mautic all the time
 * (concurrency × batch size ÷ latency), which only Mautic's latency would limit. First, before
 * the clock, times the handler's own overhead per 200 events (its time less the time waiting on
 * Mautic, invocations one at a time), which also warms it up.
 *
 *   npm run bench:drain -- [events=20000] [concurrency=2] [latencyMs=50]
 *
 * The last line is `SUMMARY {json}` for scripts.
 *
 * The events (contacts creates with distinct emails, so each its own message group) are queued
 * as the ingest queues them (`queueMessageFor`) before the clock starts; it runs
 * from starting the pollers until the simulator has answered calls carrying every event (then,
 * off the clock, it must hold every contact, once). The queue emulator runs on a worker thread
 * of this process, as the local stack runs it, and makes the mapping's receives and deletes
 * there; the Mautic simulator runs on another:
 * Mautic is another host in production, so its parsing and writing of 200 items a call must not
 * take the handler's event loop (on the same loop it did, and the calls took longer than the
 * latency). The Secrets Manager stand-in shares the handler's loop (one read per token cache
 * period). The peak RSS and the CPU figure are the whole process's, threads included.
 */
import { randomUUID } from 'node:crypto';
import { availableParallelism, loadavg } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import { CreateSecretCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SendMessageBatchCommand, type SQSClient } from '@aws-sdk/client-sqs';
import type { SQSRecord } from 'aws-lambda';
import { buildBatchHandler } from '../functions/batch/compose.ts';
import type { QueuedEvent } from '../functions/core/events.ts';
import { queueMessageFor } from '../functions/core/ingest-steps.ts';
import type { TokenSecret } from '../functions/core/token-secret.ts';
import { ENV, loadBatchConfig } from '../functions/shared/config.ts';
import { LOCAL_DEDUP_TABLE, startLocalDynamoDb } from '../infra/local/dynamodb-local.ts';
import { startFauxqsThread } from '../infra/local/fauxqs-thread.ts';
import { lambdaContext } from '../infra/local/lambda-context.ts';
import { startSecretsManagerFake } from '../infra/local/secrets-manager-fake.ts';
import {
  createQueuePair,
  FIFO_MAX_BATCH_SIZE,
  SqsEventSource,
} from '../infra/local/sqs-event-source.ts';
import { startMauticSimulator } from '../mautic-simulator/server.ts';
import { queueCounts, sqsClient } from '../test/support/local-sqs.ts';
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
 * How often the simulator is asked, while the queue drains, how many items its answered
 * batch/new calls carried (a cheap question; the contacts are counted once the clock stops).
 */
const POLL_INTERVAL_MS = 5;
/** The drain gives up after this long, or 20 × the ideal time when that is longer. */
const MIN_DRAIN_TIMEOUT_MS = 120_000;

const events = positiveInteger(process.argv[2], 20_000, 'events');
const concurrency = positiveInteger(process.argv[3], 2, 'concurrency');
const latencyMs = positiveInteger(process.argv[4], 50, 'latencyMs');
const idealRate = (concurrency * BATCH_SIZE) / (latencyMs / 1000);
const drainTimeoutMs = Math.max(MIN_DRAIN_TIMEOUT_MS, (20 * events * 1000) / idealRate);

/** Invocations of 200 events, one at a time, timed for the handler's own overhead. */
const OVERHEAD_RUNS = 30;
/** Invocations before those, untimed. */
const WARM_UP_RUNS = 10;

interface DrainResult {
  seconds: number;
  apiCalls: number;
  invocations: number;
  /** Time spent waiting on Mautic during the drain, summed over the invocations. */
  mauticMs: number;
  /** Per invocation of BATCH_SIZE events: handler time less the time waiting on Mautic. */
  overheadMs: number[];
  /** This process's CPU time over the drain's wall time: near 1, its one event loop is the bound. */
  cpuShare: number;
}

if (!isMainThread) {
  await serveSimulator(workerData as SimulatorData);
} else {
  try {
    const result = await drain();
    print(result);
  } catch (error) {
    console.error(`bench:drain failed: ${error instanceof Error ? error.message : error}`);
    process.exitCode = 1;
  }
}

async function drain(): Promise<DrainResult> {
  const stops: Array<() => Promise<void>> = [];
  try {
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

    // The action ledger's table, as the local stack has it (dynalite).
    const dynamodb = await startLocalDynamoDb();
    stops.push(() => dynamodb.close());
    await dynamodb.createDedupTable(LOCAL_DEDUP_TABLE);

    // The queue emulator on a thread of its own, as the local stack runs it.
    const fauxqs = await startFauxqsThread();
    stops.push(() => fauxqs.stop());
    const local = { sqs: sqsClient(`http://127.0.0.1:${fauxqs.port}`) };
    stops.push(async () => local.sqs.destroy());
    const queues = await createQueuePair(local.sqs, {
      name: `bench-drain-${randomUUID().slice(0, 8)}`,
      maxReceiveCount: MAX_RECEIVE_COUNT,
      visibilityTimeoutSeconds: VISIBILITY_TIMEOUT_SECONDS,
    });
    await fill(local.sqs, queues.queueUrl);
    const queued = await queueCounts(local.sqs, queues.queueUrl);
    if (queued.visible !== events) {
      throw new Error(`the events queue holds ${queued.visible} messages, not ${events}`);
    }

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
      }
    };
    const handlerFor = (eventsQueueUrl: string) =>
      buildBatchHandler(
        loadBatchConfig({
          [ENV.MAUTIC_BASE_URL]: sim.url,
          [ENV.TOKEN_SECRET_ID]: tokenSecretId,
          [ENV.EVENTS_QUEUE_URL]: eventsQueueUrl,
          [ENV.DEAD_LETTER_QUEUE_URL]: queues.deadLetterQueueUrl,
          [ENV.REFRESH_FUNCTION_NAME]: 'bench-refresher',
          [ENV.BATCH_SIZE]: String(BATCH_SIZE),
          [ENV.BATCH_WINDOW_SECONDS]: String(BATCH_WINDOW_MS / 1000),
          [ENV.TOKEN_CACHE_SECONDS]: String(TOKEN_CACHE_MS / 1000),
          [ENV.DEDUP_TABLE_NAME]: LOCAL_DEDUP_TABLE,
        }),
        {
          secrets,
          sqs: local.sqs,
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
    const batch = handlerFor(queues.queueUrl);
    // The overhead runs' full batches make the handler go on with its next batch from the queue
    // (a backlog): pointed at an empty queue of its own, the warm-up leaves the bench's queue be.
    const idle = await createQueuePair(local.sqs, {
      name: `bench-idle-${randomUUID().slice(0, 8)}`,
      maxReceiveCount: MAX_RECEIVE_COUNT,
      visibilityTimeoutSeconds: VISIBILITY_TIMEOUT_SECONDS,
    });
    const warmUp = handlerFor(idle.queueUrl);
    // The handler's own work per batch (read, plan, deliver's bookkeeping, settle, middleware):
    // one invocation at a time, so the time waiting on Mautic can be taken off its whole time.
    // Before the drain: these also warm the handler, its HTTP client and the simulator up, as a
    // function that has served before is (the first invocations of a cold one took twice as
    // long while V8 compiled their code); the first WARM_UP_RUNS are not timed.
    const overheadMs: number[] = [];
    for (let run = 0; run < WARM_UP_RUNS + OVERHEAD_RUNS; run++) {
      const records = Array.from({ length: BATCH_SIZE }, (_, index) =>
        record(`overhead-${run}-${index}`, queues.queueArn),
      );
      const waitedBefore = mauticTime.ms;
      const began = performance.now();
      const answer = await warmUp({ Records: records }, lambdaContext('batch', BATCH_TIMEOUT_MS));
      const took = performance.now() - began;
      if ((answer?.batchItemFailures ?? []).length > 0) {
        throw new Error(`overhead run ${run}: ${answer?.batchItemFailures.length} failures`);
      }
      if (run >= WARM_UP_RUNS) overheadMs.push(took - (mauticTime.ms - waitedBefore));
    }
    await sim.mark();

    let invocations = 0;
    let failedMessages = 0;
    const pollErrors: string[] = [];
    // As the local stack runs it: one mapping whose pollers gather ahead of the invocations,
    // their SQS calls made on the emulator's thread (infra/local/fauxqs-thread.ts).
    const mappingSqs = fauxqs.mappingSqs();
    const source = new SqsEventSource({
      sqs: mappingSqs,
      queueUrl: queues.queueUrl,
      queueArn: queues.queueArn,
      handler: batch,
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
    let sourceStopped: Promise<void> | undefined;
    const stopSource = () => {
      sourceStopped ??= source.stop().finally(() => mappingSqs.destroy());
      return sourceStopped;
    };
    stops.push(() => stopSource());

    const started = performance.now();
    mauticTime.ms = 0;
    const cpuBefore = process.cpuUsage();
    source.start();
    await untilDelivered(sim, started);
    const seconds = (performance.now() - started) / 1000;
    const cpu = process.cpuUsage(cpuBefore);
    const cpuShare = (cpu.user + cpu.system) / 1e6 / seconds;
    await stopSource();
    const mauticMs = mauticTime.ms;

    const problems: string[] = [];
    const held = await sim.counts();
    if (held.contacts !== events || held.emails !== events) {
      problems.push(`the simulator holds ${held.contacts} drained contacts, ${held.emails} emails`);
    }
    const left = await queueCounts(local.sqs, queues.queueUrl);
    if (left.visible + left.inFlight > 0) {
      problems.push(`the events queue still holds ${left.visible} + ${left.inFlight} in flight`);
    }
    const dead = await queueCounts(local.sqs, queues.deadLetterQueueUrl);
    if (dead.visible + dead.inFlight > 0) {
      problems.push(`${dead.visible + dead.inFlight} events were dead-lettered`);
    }
    if (failedMessages > 0) problems.push(`${failedMessages} messages were reported failed`);
    if (pollErrors.length > 0) {
      problems.push(`${pollErrors.length} polling errors, first: ${pollErrors[0]}`);
    }
    if (refreshRequests.length > 0) {
      problems.push(`the handler asked for a token refresh: ${refreshRequests[0]}`);
    }
    if (problems.length > 0) throw new Error(problems.join('; '));

    const { apiCalls } = held;

    return { seconds, apiCalls, invocations, mauticMs, overheadMs, cpuShare };
  } finally {
    for (const stop of stops.splice(0).reverse()) await stop().catch(() => {});
  }
}

/** An SQS record as the event source hands it over: a contacts create, received once. */
function record(id: string, queueArn: string): SQSRecord {
  const now = String(Date.now());
  return {
    messageId: id,
    receiptHandle: `rh-${id}`,
    body: JSON.stringify({
      v: 1,
      eventId: id,
      receivedAt: new Date().toISOString(),
      sender: 'bench',
      entity: 'contacts',
      action: 'create',
      data: { email: `${id}@example.com`, firstname: 'Over', lastname: 'Head' },
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
 * Queues the backlog as the ingest queues it (body, message group, deduplication id):
 * SendMessageBatch in groups of 10, FILL_PARALLELISM calls at a time.
 */
async function fill(sqs: SQSClient, queueUrl: string): Promise<void> {
  const receivedAt = new Date().toISOString();
  const message = (index: number) => {
    const event: QueuedEvent = {
      v: 1,
      eventId: `drain-${index}`,
      receivedAt,
      sender: 'bench',
      entity: 'contacts',
      action: 'create',
      data: { email: `drain-${index}@example.com`, firstname: 'Drain', lastname: `N${index}` },
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

/** Resolves when the simulator has answered, with a 2xx, calls carrying every event. */
async function untilDelivered(sim: SimulatorThread, started: number): Promise<void> {
  while (performance.now() - started < drainTimeoutMs) {
    if ((await sim.carried()) >= events) return;
    await sleep(POLL_INTERVAL_MS);
  }
  const carried = await sim.carried();
  throw new Error(
    `the simulator's answered calls carried ${carried} of ${events} events after ${drainTimeoutMs} ms`,
  );
}

interface SimulatorData {
  latencyMs: number;
  /** Contacts are only listed once the calls carried this many. */
  events: number;
}

/** Since the mark: the drained contacts (drain-N emails) and the API calls. */
interface SimulatorCounts {
  contacts: number;
  /** Distinct emails among the contacts. */
  emails: number;
  apiCalls: number;
}

interface SimulatorThread {
  url: string;
  accessToken: string;
  counts(): Promise<SimulatorCounts>;
  /** Since the mark: the items the answered contacts batch/new calls carried. */
  carried(): Promise<number>;
  /** From now on, counts() leaves out what came before. */
  mark(): Promise<unknown>;
  close(): Promise<void>;
}

/** The Mautic simulator on a worker thread, answering every API call after `latencyMs`. */
async function startSimulatorThread(latencyMs: number): Promise<SimulatorThread> {
  const data: SimulatorData = { latencyMs, events };
  const worker = new Worker(new URL(import.meta.url), { workerData: data });
  const next = <T>() =>
    new Promise<T>((resolve, reject) => {
      const onError = (error: Error) => reject(error);
      worker.once('error', onError);
      worker.once('message', (message: T) => {
        worker.off('error', onError);
        resolve(message);
      });
    });
  const started = await next<{ url: string; accessToken: string }>();
  // One question at a time: each answer is the next message.
  let queue: Promise<unknown> = Promise.resolve();
  const ask = <T>(question: string) => {
    const answer = queue.then(() => {
      const reply = next<T>();
      worker.postMessage(question);
      return reply;
    });
    queue = answer.catch(() => undefined);
    return answer;
  };
  return {
    ...started,
    counts: () => ask<SimulatorCounts>('counts'),
    carried: () => ask<number>('carried'),
    mark: () => ask<null>('mark'),
    async close() {
      await ask<null>('close');
      await worker.terminate();
    },
  };
}

async function serveSimulator({ latencyMs, events }: SimulatorData): Promise<void> {
  const sim = await startMauticSimulator({
    faults: { seed: 1, latencyMs: { min: latencyMs, max: latencyMs }, scope: 'api' },
  });
  // Requests before this index were the warm-up's.
  let mark = 0;
  parentPort?.on('message', (question: string) => {
    if (question === 'close') {
      void sim.close().then(() => parentPort?.postMessage(null));
      return;
    }
    if (question === 'mark') {
      mark = sim.requests.length;
      parentPort?.postMessage(null);
      return;
    }
    // Counting contacts lists them, at a cost in proportion to their number: only once the
    // answered batch/new calls since the mark carried enough items (an item carried is at most
    // one contact). That sum alone is the cheap question the drain's clock waits on.
    const since = sim.requests.slice(mark);
    const carried = since
      .filter(
        (entry) =>
          entry.path === '/api/contacts/batch/new' && entry.status >= 200 && entry.status < 300,
      )
      .reduce((sum, entry) => sum + (entry.items ?? 0), 0);
    if (question === 'carried') {
      parentPort?.postMessage(carried);
      return;
    }
    const contacts =
      carried >= events
        ? sim.records('contacts').filter((contact) => String(contact.email).startsWith('drain-'))
        : [];
    const counts: SimulatorCounts = {
      contacts: contacts.length,
      emails: new Set(contacts.map((contact) => contact.email)).size,
      apiCalls: since.filter((entry) => entry.path.startsWith('/api/')).length,
    };
    parentPort?.postMessage(counts);
  });
  parentPort?.postMessage({ url: sim.url, accessToken: sim.issueToken().accessToken });
}

function print({
  seconds,
  apiCalls,
  invocations,
  mauticMs,
  overheadMs,
  cpuShare,
}: DrainResult): void {
  const rate = events / seconds;
  const rssMiB = process.resourceUsage().maxRSS / 1024;
  const busy = mauticMs / (seconds * 1000 * concurrency);
  const overhead = [...overheadMs].sort((a, b) => a - b);
  const p50 = percentile(overhead, 0.5);
  const p90 = percentile(overhead, 0.9);
  console.log(
    `drain: ${events} queued contacts creates, ${concurrency} invocations at once, ` +
      `${FIFO_MAX_BATCH_SIZE} handed over and topped up to ${BATCH_SIZE} within ${BATCH_WINDOW_MS} ms, Mautic latency ${latencyMs} ms per call, ` +
      `node ${process.version}, ${availableParallelism()} CPUs, load ${loadAverage()}`,
  );
  console.log(`events:          ${events} in ${seconds.toFixed(2)} s`);
  console.log(`events/s:        ${rate.toFixed(0)}`);
  console.log(
    `Mautic calls:    ${apiCalls} (${(apiCalls / events).toFixed(4)} per event), ` +
      `${invocations} invocations (${(events / invocations).toFixed(1)} events each)`,
  );
  console.log(
    `process CPU:     ${(cpuShare * 100).toFixed(0)} % of one core (emulators, simulator and ` +
      'handler share this process)',
  );
  console.log(`slot busy on Mautic: ${(busy * 100).toFixed(0)} % of ${concurrency} × the drain`);
  console.log(
    `ideal events/s:  ${idealRate.toFixed(0)} (${concurrency} × ${BATCH_SIZE} ÷ ${latencyMs} ms)`,
  );
  console.log(`measured / ideal: ${(rate / idealRate).toFixed(2)}`);
  console.log(
    `handler overhead per ${BATCH_SIZE} events (its time less the wait on Mautic, ` +
      `${OVERHEAD_RUNS} runs one at a time, after ${WARM_UP_RUNS}): p50 ${p50.toFixed(1)} ms, p90 ${p90.toFixed(1)} ms`,
  );
  console.log(`peak RSS:        ${rssMiB.toFixed(1)} MiB`);
  console.log(
    `SUMMARY ${JSON.stringify({
      figure: 'drain_ratio',
      value: round(rate / idealRate, 3),
      events_per_s: round(rate, 0),
      baseline_ideal_events_per_s: round(idealRate, 0),
      slot_busy: round(busy, 3),
      process_cpu_share: round(cpuShare, 2),
      handler_overhead_ms_per_200_p50: round(p50, 2),
      handler_overhead_ms_per_200_p90: round(p90, 2),
      events,
      concurrency,
      latency_ms: latencyMs,
      load_average: loadavg().map((value) => round(value, 2)),
    })}`,
  );
}
