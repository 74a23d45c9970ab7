/**
 * How the batch function gathers the rest of its batch (the FIFO event source hands at most 10):
 * with long polls only, so that SQS's false empties (a short poll answered from a sample of its
 * servers comes back empty while messages wait) never close a batch short; not at all after a
 * smaller hand, since waiting would be billed whether or not anything came; and a next batch in
 * the same invocation only when Mautic's observed pace says both end in time. Through fauxqs,
 * the real handler and the simulator.
 */
import { randomUUID } from 'node:crypto';
import {
  type DeleteMessageBatchCommandInput,
  type ReceiveMessageCommandInput,
  type ReceiveMessageCommandOutput,
  SQSClient,
} from '@aws-sdk/client-sqs';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { SqsDeliveryQueues } from '../../functions/adapters/sqs-delivery-queues.ts';
import { createBatchHandler } from '../../functions/batch/handler.ts';
import { DEFAULT_DELIVERY_OPTIONS } from '../../functions/core/delivery/delivery-calls.ts';
import { MauticItemTime } from '../../functions/core/delivery/mautic-item-time.ts';
import { MauticApiClient } from '../../functions/core/mautic/mautic-api.ts';
import type { MetricsSink, OutcomeStore } from '../../functions/core/ports.ts';
import { createQueuePair } from '../../infra/local/queue-pair.ts';
import { type InvokeReport, SqsEventSource } from '../../infra/local/sqs-event-source.ts';
import { type MauticSimulator, startMauticSimulator } from '../../mautic-simulator/server.ts';
import { InMemoryActionLedger } from '../support/action-ledger.ts';
import {
  type LocalSqs,
  queueCounts,
  sendBodies,
  startLocalSqs,
  uniqueQueueName,
} from '../support/local-sqs.ts';
import { recorder } from '../support/observe.ts';
import { until } from '../support/until.ts';

let localSqs: LocalSqs;
const running: Array<{ sim: MauticSimulator; source: SqsEventSource; sqs: SQSClient }> = [];

beforeAll(async () => {
  localSqs = await startLocalSqs();
});

afterAll(async () => {
  await localSqs.stop();
});

afterEach(async () => {
  for (const { sim, source, sqs } of running.splice(0)) {
    await source.stop();
    await sim.close();
    sqs.destroy();
  }
});

/**
 * The batch function's own SQS client, answering every short poll (WaitTimeSeconds 0) empty as
 * real SQS may when it samples servers that hold none of the messages; long polls go through.
 */
function falseEmptiesClient(waits: number[], steps: string[]): SQSClient {
  const sqs = new SQSClient({
    endpoint: localSqs.endpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
  });
  sqs.middlewareStack.add(
    (next, context) => async (args) => {
      if (context.commandName !== 'ReceiveMessageCommand') return next(args);
      const wait = (args.input as ReceiveMessageCommandInput).WaitTimeSeconds ?? 0;
      waits.push(wait);
      if (wait === 0) return { output: { $metadata: {} }, response: {} } as never;
      return next(args);
    },
    { step: 'initialize', name: 'falseEmpties' },
  );
  // Which event each receipt handle carries, to say which events each delete removed.
  const eventOf = new Map<string, string>();
  sqs.middlewareStack.add(
    (next, context) => async (args) => {
      const result = await next(args);
      if (context.commandName === 'ReceiveMessageCommand') {
        const { Messages = [] } = result.output as ReceiveMessageCommandOutput;
        for (const { ReceiptHandle = '', Body = '{}' } of Messages)
          eventOf.set(ReceiptHandle, (JSON.parse(Body) as { eventId: string }).eventId);
      }
      if (context.commandName === 'DeleteMessageBatchCommand') {
        const { Entries = [] } = args.input as DeleteMessageBatchCommandInput;
        for (const { ReceiptHandle = '' } of Entries)
          steps.push(`deleted ${eventOf.get(ReceiptHandle)}`);
      }
      return result;
    },
    { step: 'initialize', name: 'deletedEvents' },
  );
  return sqs;
}

/** fauxqs, the real handler (as its builder sets it up) and the event source feeding it. */
async function startRelay(options: {
  itemTime?: MauticItemTime;
  functionTimeoutMs?: number;
  outcomes?: OutcomeStore;
  metrics?: MetricsSink;
}) {
  const sim = await startMauticSimulator();
  const pair = await createQueuePair(localSqs.sqs, {
    name: uniqueQueueName('gather'),
    maxReceiveCount: 5,
    visibilityTimeoutSeconds: 60,
  });
  const waits: number[] = [];
  /** The events each delete of the function's own removed, in order (`deleted <eventId>`). */
  const steps: string[] = [];
  const own = falseEmptiesClient(waits, steps);
  const accessToken = sim.issueToken().accessToken;
  const observed = recorder();
  const handler = createBatchHandler({
    api: new MauticApiClient({ baseUrl: sim.url, fetch }),
    tokens: { accessToken: async () => accessToken },
    queues: new SqsDeliveryQueues(own, {
      eventsQueueUrl: pair.queueUrl,
      deadLetterQueueUrl: pair.deadLetterQueueUrl,
    }),
    retry: { baseSeconds: 1, maxDelaySeconds: 1, horizonSeconds: 3600, maxReceiveCount: 5 },
    logger: observed.logger,
    metrics: options.metrics ?? observed.metrics,
    clock: Date,
    sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
    random: Math.random,
    learnedLimit: { value: undefined },
    backlog: { seen: false },
    ledger: new InMemoryActionLedger(),
    ...(options.itemTime === undefined ? {} : { itemTime: options.itemTime }),
    outcomes: options.outcomes,
    options: {
      ...DEFAULT_DELIVERY_OPTIONS,
      batchSize: 200,
      maxDelaySeconds: 30,
      batchWindowMs: 5_000,
      handOver: 10,
    },
  });
  const reports: InvokeReport[] = [];
  // As Lambda's mapping on a FIFO queue: at most 10, no window.
  const source = new SqsEventSource({
    sqs: localSqs.sqs,
    queueUrl: pair.queueUrl,
    queueArn: pair.queueArn,
    handler,
    batchSize: 10,
    batchWindowMs: 0,
    functionTimeoutMs: options.functionTimeoutMs ?? 30_000,
    onInvoke: (report) => reports.push(report),
  });
  running.push({ sim, source, sqs: own });
  const creates = (count: number) =>
    Array.from({ length: count }, () =>
      JSON.stringify({
        v: 1,
        eventId: randomUUID(),
        receivedAt: new Date().toISOString(),
        sender: 'test',
        entity: 'contacts',
        action: 'create',
        data: { email: `${randomUUID()}@example.com` },
      }),
    );
  return {
    sim,
    source,
    reports,
    waits,
    steps,
    send: (count: number) => sendBodies(localSqs.sqs, pair.queueUrl, creates(count)),
    /** The items of each contact create call, in order. */
    calls: () =>
      sim.requests.filter((r) => r.path === '/api/contacts/batch/new').map((r) => r.items),
    async drained(count: number) {
      await until(
        async () => {
          const { visible, inFlight } = await queueCounts(localSqs.sqs, pair.queueUrl);
          return sim.records('contacts').length === count && visible + inFlight === 0;
        },
        60_000,
        () => `${sim.records('contacts').length} of ${count} delivered`,
      );
    },
  };
}

describe('the batch function gathering its batch', () => {
  it('fills its batches although SQS answers short polls empty: it only long-polls', async () => {
    const relay = await startRelay({});
    await relay.send(400);

    relay.source.start();
    await relay.drained(400);

    expect(relay.calls()).toEqual([200, 200]);
    expect(relay.waits.length).toBeGreaterThan(0);
    expect(relay.waits.every((wait) => wait === 1)).toBe(true);
  }, 90_000);

  it('keeps gathering while a burst is still arriving, and fills the batch', async () => {
    const relay = await startRelay({});
    relay.source.start();

    // 200 events in 20 sends, 150 ms apart: longer than the quiet time that used to end a
    // gathering, shorter than the second a long poll waits.
    for (let sent = 0; sent < 200; sent += 10) {
      await relay.send(10);
      await new Promise((resolve) => setTimeout(resolve, 150));
    }
    await relay.drained(200);

    expect(relay.calls().length).toBeLessThanOrEqual(2);
  }, 90_000);

  it('delivers a smaller hand at once, receiving nothing itself: a trickle waits for nothing', async () => {
    const relay = await startRelay({});
    relay.source.start();

    for (let i = 0; i < 3; i++) {
      await relay.send(1);
      await until(
        () => relay.sim.records('contacts').length === i + 1,
        10_000,
        () => `event ${i + 1} not delivered`,
      );
    }

    expect(relay.calls()).toEqual([1, 1, 1]);
    expect(relay.waits).toEqual([]);
  }, 60_000);

  it('after a gathering that found more, gathers to a smaller hand too: a burst still arriving', async () => {
    const relay = await startRelay({});
    await relay.send(200);
    relay.source.start();
    await until(() => relay.calls().length === 1, 30_000, 'the first batch');

    // A burst's next events land in a few sends: the first hand is small, the rest arrives
    // while the function gathers.
    await relay.send(3);
    await new Promise((resolve) => setTimeout(resolve, 200));
    await relay.send(7);
    await relay.drained(210);
    // That gathering ended on a quiet second: a trickle's event after it goes out at once.
    const receivesBefore = relay.waits.length;
    await relay.send(1);
    await relay.drained(211);

    expect(relay.calls()).toEqual([200, 10, 1]);
    expect(relay.waits.length).toBe(receivesBefore);
  }, 90_000);

  it('goes on to a next batch in the same invocation only when Mautic’s pace says it ends in time', async () => {
    // 1 ms an item: two batches of 200 fit in 30 s many times over.
    const quick = new MauticItemTime();
    quick.observe(200, 200);
    const relay = await startRelay({ itemTime: quick });
    await relay.send(600);

    relay.source.start();
    await relay.drained(600);

    expect(relay.calls()).toEqual([200, 200, 200]);
    expect(relay.reports).toHaveLength(1);
  }, 90_000);

  it('settles a batch while the next is delivered: its outcomes first, then its deletes', async () => {
    const quick = new MauticItemTime();
    quick.observe(200, 200);
    // The first batch's outcomes are written only once the next batch's call has reached Mautic:
    // a function that settled each batch before delivering the next would wait here for its
    // outcome budget (2 s) and write them after all, with the second call after it.
    let relay: Awaited<ReturnType<typeof startRelay>> | undefined;
    const writes: Array<{ events: string[]; nextCallWhileWriting?: boolean }> = [];
    const outcomes: OutcomeStore = {
      async write(records) {
        const write: (typeof writes)[number] = { events: records.map((r) => r.eventId) };
        writes.push(write);
        if (writes.length === 1) {
          write.nextCallWhileWriting = await until(
            async () => (relay?.calls().length ?? 0) >= 2,
            1_500,
          ).then(
            () => true,
            () => false,
          );
        }
        relay?.steps.push(...write.events.map((eventId) => `written ${eventId}`));
        return 0;
      },
      read: async () => [],
    };
    relay = await startRelay({ itemTime: quick, outcomes });
    await relay.send(400);

    relay.source.start();
    await relay.drained(400);

    expect(relay.calls()).toEqual([200, 200]);
    expect(relay.reports).toHaveLength(1);
    expect(writes.map((w) => w.events.length)).toEqual([200, 200]);
    expect(writes[0]?.nextCallWhileWriting).toBe(true);
    // Each event the function deleted itself was deleted after its outcome was written.
    const deleted = relay.steps.filter((step) => step.startsWith('deleted '));
    expect(deleted).toHaveLength(390);
    for (const step of deleted) {
      const eventId = step.slice('deleted '.length);
      expect(relay.steps.indexOf(`written ${eventId}`), eventId).toBeGreaterThan(-1);
      expect(relay.steps.indexOf(`written ${eventId}`), eventId).toBeLessThan(
        relay.steps.indexOf(step),
      );
    }
  }, 90_000);

  it('is never more than one batch behind: the third call waits for the first batch to be settled', async () => {
    const quick = new MauticItemTime();
    quick.observe(200, 200);
    // The first batch's outcomes are held for up to 1.5 s, or until a third Mautic call comes.
    // The second batch may be delivered meanwhile; the third may not, until the first is
    // settled: else a slow store would let settlements, and the messages they hold, pile up.
    // Judged by when the third call reached Mautic against when the hold ended, so a slow
    // machine cannot fail the rule it keeps.
    let relay: Awaited<ReturnType<typeof startRelay>> | undefined;
    let heldUntil: number | undefined;
    let holding = false;
    const outcomes: OutcomeStore = {
      async write() {
        if (!holding) {
          holding = true;
          await until(async () => (relay?.calls().length ?? 0) >= 3, 1_500).catch(() => {});
          heldUntil = Date.now();
        }
        return 0;
      },
      read: async () => [],
    };
    relay = await startRelay({ itemTime: quick, outcomes });
    await relay.send(600);

    relay.source.start();
    await relay.drained(600);

    expect(relay.calls()).toEqual([200, 200, 200]);
    expect(relay.reports).toHaveLength(1);
    const third = relay.sim.requests.filter((r) => r.path === '/api/contacts/batch/new')[2];
    expect(third?.at).toBeGreaterThanOrEqual(heldUntil ?? Number.POSITIVE_INFINITY);
  }, 90_000);

  it('settles the batch it delivered meanwhile when settling the one before fails, then fails', async () => {
    const quick = new MauticItemTime();
    quick.observe(200, 200);
    const written: string[][] = [];
    const outcomes: OutcomeStore = {
      write: async (records) => {
        written.push(records.map((r) => r.eventId));
        return 0;
      },
      read: async () => [],
    };
    // Settling the first batch throws once, after its outcomes are written.
    let thrown = false;
    const metrics: MetricsSink = {
      addMetric: (name) => {
        if (name !== 'EventsDelivered' || thrown) return;
        thrown = true;
        throw new Error('metrics broke');
      },
    };
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const relay = await startRelay({ itemTime: quick, outcomes, metrics });
      await relay.send(400);

      relay.source.start();
      await until(async () => relay.reports.length >= 1, 30_000, 'no invocation ended');
      await relay.source.stop();

      expect(relay.calls()).toEqual([200, 200]);
      expect(relay.reports[0]?.deleted).toEqual([]);
      expect(written.map((ids) => ids.length)).toEqual([200, 200]);
      const deleted = new Set(relay.steps.map((step) => step.replace(/^deleted /, '')));
      // The second batch, which Mautic took, is deleted; the first comes back, failed.
      expect(written[1]?.every((id) => deleted.has(id))).toBe(true);
      expect(written[0]?.some((id) => deleted.has(id))).toBe(false);
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  }, 90_000);

  it('does not go on when the next batch would not end in time, nor before any call was observed', async () => {
    // 50 ms an item: a batch of 200 fits in the 30 s invocation, two do not (at 1.5 times).
    const slow = new MauticItemTime();
    slow.observe(200, 10_000);
    const relay = await startRelay({ itemTime: slow });
    await relay.send(400);
    relay.source.start();
    await relay.drained(400);
    const unknown = await startRelay({ itemTime: new MauticItemTime() });
    await unknown.send(400);
    unknown.source.start();
    await unknown.drained(400);

    expect(relay.calls()).toEqual([200, 200]);
    expect(relay.reports).toHaveLength(2);
    expect(unknown.calls()).toEqual([200, 200]);
    expect(unknown.reports).toHaveLength(2);
  }, 120_000);

  it('gathers only as many as it expects to deliver in the time left', async () => {
    // 100 ms an item, 30 s: after a gathering of up to 6 s, 140 items end in time at 1.5 times.
    const slower = new MauticItemTime();
    slower.observe(200, 20_000);
    const relay = await startRelay({ itemTime: slower });
    await relay.send(200);
    relay.source.start();
    await relay.drained(200);

    // A few ms pass between the hand and the reckoning: 140 at most, and not many fewer.
    expect(relay.calls()[0]).toBeLessThanOrEqual(140);
    expect(relay.calls()[0]).toBeGreaterThanOrEqual(130);
  }, 90_000);
});
