import { randomUUID } from 'node:crypto';
import type { Message } from '@aws-sdk/client-sqs';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { SqsDeliveryQueues } from '../../functions/adapters/sqs-delivery-queues.ts';
import { createBatchHandler } from '../../functions/batch/handler.ts';
import { DEFAULT_DELIVERY_OPTIONS } from '../../functions/core/delivery/delivery-calls.ts';
import { MauticItemTime } from '../../functions/core/delivery/mautic-item-time.ts';
import { MauticApiClient } from '../../functions/core/mautic/mautic-api.ts';
import type { QueuedMessage } from '../../functions/core/queue-ports.ts';
import { lambdaContext } from '../../infra/local/lambda-context.ts';
import { createQueuePair } from '../../infra/local/queue-pair.ts';
import { type InvokeReport, SqsEventSource } from '../../infra/local/sqs-event-source.ts';
import {
  type MauticSimulator,
  type MauticSimulatorOptions,
  startMauticSimulator,
} from '../../mautic-simulator/server.ts';
import { InMemoryActionLedger } from '../support/action-ledger.ts';
import {
  type LocalSqs,
  queueCounts,
  receiveUntil,
  sendBodies,
  startLocalSqs,
  uniqueQueueName,
} from '../support/local-sqs.ts';
import { recorder } from '../support/observe.ts';

let localSqs: LocalSqs;
let observed: ReturnType<typeof recorder>;
const running: Array<{ sim: MauticSimulator; source: SqsEventSource }> = [];

beforeAll(async () => {
  localSqs = await startLocalSqs();
});

afterAll(async () => {
  await localSqs.stop();
});

afterEach(async () => {
  for (const { sim, source } of running.splice(0)) {
    await source.stop();
    await sim.close();
  }
  vi.restoreAllMocks();
});

type EventInput = {
  entity: string;
  action: 'create' | 'edit' | 'delete';
  data?: Record<string, unknown>;
  id?: number;
};

/** Starts a simulator, a queue pair on fauxqs, the real batch handler and a poller feeding it. */
async function startRelay(options: {
  sim?: MauticSimulatorOptions;
  batchSize?: number;
  maxReceiveCount?: number;
  deadLetterQueueUrl?: string;
  concurrency?: number;
  batchWindowMs?: number;
}) {
  observed = recorder();
  const sim = await startMauticSimulator(options.sim);
  const { sqs } = localSqs;
  const pair = await createQueuePair(sqs, {
    name: uniqueQueueName('events'),
    maxReceiveCount: options.maxReceiveCount ?? 5,
    visibilityTimeoutSeconds: 1,
  });
  // Like the Secrets Manager store: reads are cached until a read asks for a fresh one.
  const first = sim.issueToken().accessToken;
  const tokenStore = { current: first, cached: first, tokensSeen: [] as string[], freshReads: 0 };
  const refreshes: string[] = [];
  const handler = createBatchHandler({
    api: new MauticApiClient({ baseUrl: sim.url, fetch, timeoutMs: 2_000 }),
    tokens: {
      accessToken: async (read) => {
        // Stands in for the wait on the refresher: it writes a new token that this read sees.
        if (read?.refused !== undefined) {
          refreshes.push('token_refused');
          tokenStore.current = sim.issueToken().accessToken;
        }
        if (read?.fresh || read?.refused !== undefined) {
          tokenStore.freshReads++;
          tokenStore.cached = tokenStore.current;
        }
        tokenStore.tokensSeen.push(tokenStore.cached);
        return tokenStore.cached;
      },
    },
    queues: new SqsDeliveryQueues(sqs, {
      eventsQueueUrl: pair.queueUrl,
      deadLetterQueueUrl: options.deadLetterQueueUrl ?? pair.deadLetterQueueUrl,
    }),
    // Compressed: failed events come back after a second, as the queue's own timeout would.
    retry: {
      baseSeconds: 1,
      maxDelaySeconds: 1,
      horizonSeconds: 3600,
      maxReceiveCount: options.maxReceiveCount ?? 5,
    },
    logger: observed.logger,
    metrics: observed.metrics,
    clock: { now: () => Date.now() },
    sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
    random: Math.random,
    learnedLimit: { value: undefined },
    ledger: new InMemoryActionLedger(),
    options: {
      ...DEFAULT_DELIVERY_OPTIONS,
      baseBackoffMs: 10,
      maxBackoffMs: 50,
      maxDelaySeconds: 30,
      batchSize: options.batchSize ?? 200,
      concurrency: options.concurrency ?? DEFAULT_DELIVERY_OPTIONS.concurrency,
      batchWindowMs: options.batchWindowMs ?? 300,
      // As the batch function's builder sets it: the most the event source hands at once.
      handOver: Math.min(10, options.batchSize ?? 200),
    },
  });
  const reports: InvokeReport[] = [];
  const source = new SqsEventSource({
    sqs,
    queueUrl: pair.queueUrl,
    queueArn: pair.queueArn,
    handler,
    // As Lambda's mapping on a FIFO queue: at most 10, no window; the handler gathers the rest.
    batchSize: Math.min(10, options.batchSize ?? 200),
    batchWindowMs: 0,
    functionTimeoutMs: 10_000,
    onInvoke: (report) => reports.push(report),
  });
  running.push({ sim, source });

  const sent = new Map<string, EventInput>();
  return {
    sim,
    pair,
    reports,
    refreshes,
    tokenStore,
    sent,
    /** Queues events as ingest does: one message per event, a version 1 envelope. */
    async send(events: EventInput[]): Promise<string[]> {
      const bodies = events.map((event) => {
        const eventId = randomUUID();
        sent.set(eventId, event);
        return JSON.stringify({
          v: 1,
          eventId,
          receivedAt: new Date().toISOString(),
          sender: 'test',
          ...event,
        });
      });
      return sendBodies(sqs, pair.queueUrl, bodies);
    },
    /** Polls until the events queue is empty, within a bounded time. */
    async drain(timeoutMs = 20_000): Promise<void> {
      const deadline = Date.now() + timeoutMs;
      while (Date.now() < deadline) {
        await source.pollOnce();
        const { visible, inFlight } = await queueCounts(sqs, pair.queueUrl);
        if (visible + inFlight === 0) return;
      }
      throw new Error('the events queue did not drain in time');
    },
    async deadLetters(count: number): Promise<Message[]> {
      return receiveUntil(sqs, pair.deadLetterQueueUrl, count, { timeoutMs: 3_000 });
    },
  };
}

const creates = (count: number, prefix = 'c'): EventInput[] =>
  Array.from({ length: count }, (_, i) => ({
    entity: 'contacts',
    action: 'create',
    data: { email: `${prefix}${i}@example.com` },
  }));
const contactEmails = (sim: MauticSimulator) =>
  new Set(sim.records('contacts').map((r) => String(r.email).toLowerCase()));
const apiCalls = (sim: MauticSimulator) => sim.requests.filter((r) => r.path.startsWith('/api/'));
const attribute = (message: Message, name: string) =>
  message.MessageAttributes?.[name]?.StringValue;
const eventIdOf = (message: Message) => {
  try {
    return (JSON.parse(message.Body ?? '') as { eventId?: string }).eventId;
  } catch {
    return `unreadable ${message.MessageId}`;
  }
};

/**
 * Every sent event is delivered, dead-lettered with a reason, or still queued; never lost and
 * never two of these.
 */
async function expectAccountedFor(
  relay: Awaited<ReturnType<typeof startRelay>>,
  deadLetters: Message[],
  delivered: (event: EventInput) => boolean,
): Promise<void> {
  const dead = new Set(deadLetters.map(eventIdOf));
  const { visible, inFlight } = await queueCounts(localSqs.sqs, relay.pair.queueUrl);
  let deliveredCount = 0;
  let deadCount = 0;
  for (const [eventId, event] of relay.sent) {
    if (dead.has(eventId)) deadCount++;
    const isDelivered = delivered(event);
    expect(
      isDelivered && dead.has(eventId),
      `event ${eventId} both delivered and dead-lettered`,
    ).toBe(false);
    if (isDelivered) deliveredCount++;
  }
  expect(deliveredCount + deadCount + visible + inFlight).toBe(relay.sent.size);
}

function expectNoTokenInOutput(tokens: string[]): void {
  const text = observed.text();
  expect(observed.events('mautic_call').length).toBeGreaterThan(0);
  for (const token of tokens) expect(text).not.toContain(token);
}

describe('batch handler over fauxqs and the Mautic simulator', () => {
  it('delivers 400 events in 2 Mautic calls of 200 and acknowledges them all', async () => {
    // A window long enough to gather 200 however busy the machine is (a full batch ends it).
    const relay = await startRelay({ batchWindowMs: 5_000 });
    await relay.send(creates(400));

    await relay.drain();

    expect(apiCalls(relay.sim).map((r) => [r.path, r.status, r.items])).toEqual([
      ['/api/contacts/batch/new', 201, 200],
      ['/api/contacts/batch/new', 201, 200],
    ]);
    expect(contactEmails(relay.sim).size).toBe(400);
    expect(relay.reports.flatMap((r) => r.failed)).toEqual([]);
    await expectAccountedFor(relay, [], (e) =>
      contactEmails(relay.sim).has(String(e.data?.email).toLowerCase()),
    );
    expectNoTokenInOutput(relay.tokenStore.tokensSeen);
    expect(observed.metric('EventsDelivered')).toBeGreaterThan(0);
  });

  it('dead-letters per-item rejects and unreadable messages with a reason, and delivers the rest', async () => {
    const relay = await startRelay({});
    await relay.send([
      ...creates(5),
      { entity: 'segments', action: 'create', data: { name: '' } },
      { entity: 'contacts', action: 'edit', id: 987654, data: { firstname: 'Nobody' } },
      { entity: 'segments', action: 'create', data: { name: 'VIP' } },
    ]);
    await sendBodies(localSqs.sqs, relay.pair.queueUrl, [
      'not json',
      JSON.stringify({ v: 1, entity: 'contacts' }),
    ]);

    await relay.drain();
    const dead = await relay.deadLetters(4);

    const reasons = dead
      .map((m) => [attribute(m, 'relay.reason'), attribute(m, 'relay.status') ?? null])
      .sort();
    expect(reasons).toEqual([
      ['invalid_event', null],
      ['invalid_event', null],
      ['mautic_rejected_item', '400'],
      ['mautic_rejected_item', '404'],
    ]);
    const segment = dead.find((m) => attribute(m, 'relay.status') === '400');
    expect(attribute(segment ?? {}, 'relay.detail')).toBe('name: A value is required.');
    expect(attribute(segment ?? {}, 'relay.entity')).toBe('segments');
    expect(attribute(segment ?? {}, 'relay.firstReceivedAt')).toMatch(/^\d{4}-\d\d-\d\dT/);
    expect(dead.map((m) => m.Body)).toContain('not json');
    expect(relay.sim.records('segments').map((r) => r.name)).toEqual(['VIP']);
    expect(contactEmails(relay.sim).size).toBe(5);
    // Dead-lettered by the function: acknowledged at once, no retries burnt.
    expect(relay.reports.flatMap((r) => r.failed)).toEqual([]);
    await expectAccountedFor(relay, dead, (e) =>
      e.entity === 'contacts'
        ? contactEmails(relay.sim).has(String(e.data?.email).toLowerCase())
        : e.data?.name === 'VIP' && relay.sim.records('segments').some((r) => r.name === 'VIP'),
    );
  });

  it('coalesces duplicates into one item each and delivers them in one call', async () => {
    const relay = await startRelay({});
    const events = Array.from({ length: 50 }, (_, i) => ({
      entity: 'contacts',
      action: 'create' as const,
      data: { email: `Dup${i % 10}@Example.com`, seq: i },
    }));
    await relay.send(events);

    await relay.drain();

    expect(apiCalls(relay.sim).map((r) => r.items)).toEqual([10]);
    expect(relay.sim.records('contacts')).toHaveLength(10);
    await expectAccountedFor(relay, [], (e) =>
      contactEmails(relay.sim).has(String(e.data?.email).toLowerCase()),
    );
    expect(
      relay.sim
        .records('contacts')
        .map((r) => r.seq)
        .sort((a, b) => Number(a) - Number(b)),
    ).toEqual([40, 41, 42, 43, 44, 45, 46, 47, 48, 49]);
  });

  it('rides out a 5xx storm: retried inside the invocation, then through the queue, then delivered', async () => {
    const relay = await startRelay({});
    relay.sim.inject(
      { path: '/api/contacts/batch/new' },
      { status: 503, body: '<html>busy</html>' },
      8,
    );
    await relay.send(creates(30));

    await relay.drain();

    // Two tries of the call, then narrowed: its halves and their quarters fail too, so it is
    // Mautic, not an item: back to the queue, delivered at the next receive.
    expect(apiCalls(relay.sim).map((r) => r.status)).toEqual([...Array(8).fill(503), 201]);
    // The event source hands over 10 (FIFO); the other 20 were the function's own, delayed the same.
    expect(relay.reports[0]?.failed).toHaveLength(10);
    expect(contactEmails(relay.sim).size).toBe(30);
    await expectAccountedFor(relay, [], (e) =>
      contactEmails(relay.sim).has(String(e.data?.email).toLowerCase()),
    );
  });

  it('stops at a 429 and holds the rest back until the rate-limit window resets', async () => {
    const relay = await startRelay({ sim: { rateLimit: { limit: 1, windowSeconds: 3 } } });
    await relay.send(creates(250));

    await relay.drain();

    const calls = apiCalls(relay.sim);
    expect(calls.map((r) => r.status)).toEqual([201, 429, 201]);
    const resetAt = (Math.floor((calls[0]?.at ?? 0) / 1000) + 3) * 1000;
    expect(calls[2]?.at).toBeGreaterThanOrEqual(resetAt - 1000);
    expect(new Set(calls.map((r) => r.tokenId)).size).toBe(1);
    await expectAccountedFor(relay, [], (e) =>
      contactEmails(relay.sim).has(String(e.data?.email).toLowerCase()),
    );
    expect(contactEmails(relay.sim).size).toBe(250);
  });

  it('gets a new token when the one in hand expires mid-batch', async () => {
    // The simulator's clock jumps two hours from the second API call on (a request is logged
    // before it is answered), so the token expires between the contacts call and the
    // companies call of the same batch.
    let simulator: MauticSimulator | undefined;
    const jumped = () =>
      (simulator?.requests.filter((r) => r.path.startsWith('/api/')).length ?? 0) > 1;
    const relay = await startRelay({
      concurrency: 1,
      sim: { now: () => Date.now() + (jumped() ? 7_200_000 : 0) },
    });
    simulator = relay.sim;
    await relay.send([
      ...creates(20),
      ...Array.from({ length: 5 }, (_, i) => ({
        entity: 'companies',
        action: 'create' as const,
        data: { companyname: `C${i}` },
      })),
    ]);

    await relay.drain();

    expect(apiCalls(relay.sim).map((r) => [r.path, r.status])).toEqual([
      ['/api/contacts/batch/new', 201],
      ['/api/companies/batch/new', 401],
      ['/api/companies/batch/new', 401],
      ['/api/companies/batch/new', 201],
    ]);
    expect(relay.refreshes).toEqual(['token_refused']);
    expect(relay.tokenStore.freshReads).toBe(2);
    expect(relay.sim.records('companies')).toHaveLength(5);
    await expectAccountedFor(relay, [], (e) =>
      e.entity === 'companies'
        ? relay.sim.records('companies').some((r) => r.companyname === e.data?.companyname)
        : contactEmails(relay.sim).has(String(e.data?.email).toLowerCase()),
    );
    expectNoTokenInOutput(relay.tokenStore.tokensSeen);
  });

  it('learns a batch limit of 50 from Mautic and delivers everything', async () => {
    const relay = await startRelay({ sim: { batchMaxLimit: 50 } });
    await relay.send(creates(120));

    await relay.drain();

    expect(apiCalls(relay.sim).map((r) => [r.status, r.items])).toEqual([
      [500, 120],
      [201, 50],
      [201, 50],
      [201, 20],
    ]);
    expect(contactEmails(relay.sim).size).toBe(120);
    await expectAccountedFor(relay, [], (e) =>
      contactEmails(relay.sim).has(String(e.data?.email).toLowerCase()),
    );
  });

  it('never acknowledges a rejected event whose dead-letter send failed: the queue redrives it', async () => {
    const relay = await startRelay({
      maxReceiveCount: 2,
      deadLetterQueueUrl: `${localSqs.endpoint}/000000000000/missing-dlq`,
    });
    await relay.send([
      ...creates(3),
      { entity: 'contacts', action: 'edit', id: 424242, data: { firstname: 'X' } },
    ]);

    await relay.drain();
    const dead = await relay.deadLetters(1);

    expect(dead).toHaveLength(1);
    expect(JSON.parse(dead[0]?.Body ?? '{}')).toMatchObject({ action: 'edit', id: 424242 });
    expect(relay.reports.flatMap((r) => r.failed)).toHaveLength(2);
    expect(observed.events('dead_letter_failed').length).toBeGreaterThan(0);
    await expectAccountedFor(relay, dead, (e) =>
      contactEmails(relay.sim).has(String(e.data?.email).toLowerCase()),
    );
  });

  it('dead-letters a segment create Mautic applied but answered unreadably (ambiguous_result); sends a contact again, once', async () => {
    const relay = await startRelay({});
    relay.sim.failAfterApply({ path: '/api/segments/batch/new' }, 'garble');
    relay.sim.failAfterApply({ path: '/api/contacts/batch/new' }, 'drop');
    await relay.send([
      { entity: 'segments', action: 'create', data: { name: 'Buyers', alias: 'buyers' } },
      { entity: 'contacts', action: 'create', data: { email: 'once@example.com' } },
    ]);

    await relay.drain();
    const dead = await relay.deadLetters(1);

    expect(dead.map((m) => [attribute(m, 'relay.reason'), attribute(m, 'relay.entity')])).toEqual([
      ['ambiguous_result', 'segments'],
    ]);
    expect(attribute(dead[0] ?? {}, 'relay.detail')).toMatch(
      /^Mautic may have created this record; its answer cannot tell \(MauticResponseError: POST \/api\/segments\/batch\/new answered 200 with a body that is not JSON\)$/,
    );
    expect(relay.sim.records('segments').filter((r) => r.name === 'Buyers')).toHaveLength(1);
    expect(apiCalls(relay.sim).filter((r) => r.path === '/api/segments/batch/new')).toHaveLength(1);
    expect(contactEmails(relay.sim)).toEqual(new Set(['once@example.com']));
    await expectAccountedFor(relay, dead, (e) =>
      e.entity === 'contacts' ? contactEmails(relay.sim).has('once@example.com') : false,
    );
    expectNoTokenInOutput(relay.tokenStore.tokensSeen);
  });
});

/** The real handler with fake queue ports, for calling directly with a Lambda event. */
function directHandler(
  sim: MauticSimulator,
  accessToken: string,
  delays: Array<[string[], number]>,
  overrides: Partial<Parameters<typeof createBatchHandler>[0]> = {},
) {
  return createBatchHandler({
    api: new MauticApiClient({ baseUrl: sim.url, fetch }),
    tokens: { accessToken: async () => accessToken },
    retry: { baseSeconds: 1, maxDelaySeconds: 1, horizonSeconds: 3600, maxReceiveCount: 1000 },
    queues: {
      deadLetter: async () => [],
      delay: async (entries) => {
        for (const [seconds, group] of Map.groupBy(entries, (entry) => entry.seconds))
          delays.push([group.map((entry) => entry.message.messageId), seconds]);
        return [];
      },
      receive: async () => [],
      remove: async () => [],
    },
    logger: recorder().logger,
    metrics: recorder().metrics,
    clock: { now: () => Date.now() },
    sleep: async () => {},
    random: () => 0,
    learnedLimit: { value: undefined },
    ledger: new InMemoryActionLedger(),
    options: { ...DEFAULT_DELIVERY_OPTIONS, batchSize: 1, maxDelaySeconds: 900, batchWindowMs: 0 },
    ...overrides,
  });
}

function sqsRecords(count: number) {
  return Array.from({ length: count }, (_, n) => ({
    messageId: `m${n}`,
    receiptHandle: `rh${n}`,
    body: JSON.stringify({
      v: 1,
      eventId: `e${n}`,
      receivedAt: new Date().toISOString(),
      sender: 't',
      entity: 'contacts',
      action: 'create',
      data: { email: `direct${n}@example.com` },
    }),
    attributes: {
      ApproximateReceiveCount: '1',
      SentTimestamp: '0',
      SenderId: 'x',
      ApproximateFirstReceiveTimestamp: '0',
    },
    messageAttributes: {},
    md5OfBody: '',
    eventSource: 'aws:sqs',
    eventSourceARN: 'arn:aws:sqs:us-east-1:000000000000:events',
    awsRegion: 'us-east-1',
  }));
}

describe('batch handler, called directly', () => {
  it('dead-letters a message on its last allowed receive before any Mautic call, so a crash cannot lose its reason', async () => {
    const sim = await startMauticSimulator();
    try {
      const steps: string[] = [];
      const records = sqsRecords(2);
      records[0] = {
        ...records[0],
        attributes: { ...records[0]?.attributes, ApproximateReceiveCount: '5' },
      } as (typeof records)[number];
      const handler = directHandler(sim, sim.issueToken().accessToken, [], {
        retry: { baseSeconds: 1, maxDelaySeconds: 1, horizonSeconds: 3600, maxReceiveCount: 5 },
        api: {
          create: async () => {
            steps.push('mautic');
            // The invocation dies here (a crash, a timeout): nothing after this runs.
            throw new Error('the process died');
          },
          edit: async () => [],
          delete: async () => [],
          findContacts: async () => new Map(),
          addToSegment: async () => [],
          linkCompanies: async () => [],
          contactAction: async () => {
            throw new Error('not called: the batch has creates only');
          },
        },
        queues: {
          deadLetter: async (letters) => {
            steps.push(...letters.map((l) => `dead-letter ${l.message.messageId} ${l.reason}`));
            return [];
          },
          delay: async () => [],
          receive: async () => [],
          remove: async () => [],
        },
      });

      await handler({ Records: records }, lambdaContext('batch', 30_000)).catch(() => undefined);

      expect(steps[0]).toBe('dead-letter m0 too_many_receives');
      expect(steps).toContain('mautic');
    } finally {
      await sim.close();
    }
  });

  it('caps the rate-limit delay at maxDelaySeconds', async () => {
    const sim = await startMauticSimulator({ rateLimit: { limit: 1, windowSeconds: 7200 } });
    try {
      const delays: Array<[string[], number]> = [];
      const handler = directHandler(sim, sim.issueToken().accessToken, delays);

      const response = await handler({ Records: sqsRecords(2) }, lambdaContext('batch', 30_000));

      expect(response).toEqual({ batchItemFailures: [{ itemIdentifier: 'm1' }] });
      expect(delays).toEqual([[['m1'], 900]]);
    } finally {
      await sim.close();
    }
  });

  it('aborts a Mautic call still running near the Lambda deadline and leaves its events to the queue', async () => {
    const sim = await startMauticSimulator({
      faults: { seed: 1, latencyMs: { min: 5_000, max: 5_000 } },
    });
    try {
      const handler = directHandler(sim, sim.issueToken().accessToken, []);

      const response = await handler({ Records: sqsRecords(1) }, lambdaContext('batch', 4_000));

      // Had the call not been aborted, Mautic's answer (5 s later) would have delivered it.
      expect(response).toEqual({ batchItemFailures: [{ itemIdentifier: 'm0' }] });
      expect(sim.requests).toHaveLength(1);
    } finally {
      await sim.close();
    }
  });

  it('gathers the rest of its batch itself and settles those messages itself: deleted once done, delayed when retried, never reported to the event source', async () => {
    const sim = await startMauticSimulator();
    try {
      // Unavailable for a while (a bare 503 might have saved the creates: ambiguous_result).
      const unavailable = { status: 503, headers: { 'retry-after': '120' }, body: 'busy' };
      sim.inject({ path: '/api/companies/batch/new' }, unavailable, 10);
      const company = (n: number) => ({
        ...(sqsRecords(n + 1)[n] as ReturnType<typeof sqsRecords>[number]),
        body: JSON.stringify({
          v: 1,
          eventId: `e${n}`,
          receivedAt: new Date().toISOString(),
          sender: 't',
          entity: 'companies',
          action: 'create',
          data: { companyname: `Company ${n}` },
        }),
      });
      const records = sqsRecords(3);
      const [handed, own1] = [company(0), records[1]];
      const own2 = { ...records[2], body: 'not json' } as (typeof records)[number];
      const own3 = company(3);
      const asked: number[] = [];
      const removed: string[][] = [];
      const delays: Array<[string[], number]> = [];
      const handler = directHandler(sim, sim.issueToken().accessToken, delays, {
        queues: {
          deadLetter: async () => [],
          delay: async (entries) => {
            for (const [seconds, group] of Map.groupBy(entries, (entry) => entry.seconds))
              delays.push([group.map((entry) => entry.message.messageId), seconds]);
            return [];
          },
          receive: async (max) => {
            asked.push(max);
            return [own1, own2, own3] as QueuedMessage[];
          },
          remove: async (messages) => {
            removed.push(messages.map((m) => m.messageId));
            return [];
          },
        },
        options: {
          ...DEFAULT_DELIVERY_OPTIONS,
          batchSize: 200,
          maxDelaySeconds: 900,
          batchWindowMs: 1_000,
        },
      });

      // A full hand (the rest are plain creates, delivered): the function gathers the rest.
      const hand = [handed, ...sqsRecords(19).slice(10)];
      const response = await handler({ Records: hand }, lambdaContext('batch', 30_000));

      expect(asked).toEqual([190]);
      // Only the event source's own message goes back through it.
      expect(response).toEqual({ batchItemFailures: [{ itemIdentifier: 'm0' }] });
      // The delivered and the dead-lettered own messages are deleted; the retried one is not.
      expect(removed).toEqual([['m1', 'm2']]);
      expect(delays.flatMap(([ids]) => ids).sort()).toEqual(['m0', 'm3']);
    } finally {
      await sim.close();
    }
  });

  it('after a full hand gathers within the window; a smaller hand is delivered at once, without waiting', async () => {
    const sim = await startMauticSimulator();
    try {
      const asked: Array<[number, number]> = [];
      const handler = directHandler(sim, sim.issueToken().accessToken, [], {
        queues: {
          deadLetter: async () => [],
          delay: async () => [],
          receive: async (max, until) => {
            asked.push([max, until - Date.now()]);
            return [];
          },
          remove: async () => [],
        },
        options: {
          ...DEFAULT_DELIVERY_OPTIONS,
          batchSize: 200,
          maxDelaySeconds: 900,
          batchWindowMs: 2_000,
          handOver: 10,
        },
      });
      const records = sqsRecords(10);

      await handler({ Records: records }, lambdaContext('batch', 30_000));
      await handler({ Records: records.slice(0, 3) }, lambdaContext('batch', 30_000));

      expect(asked.map(([max]) => max)).toEqual([190]);
      for (const [, windowMs] of asked) expect(windowMs).toBeGreaterThan(1_900);
      expect(sim.requests.filter((r) => r.path === '/api/contacts/batch/new')).toHaveLength(2);
    } finally {
      await sim.close();
    }
  });

  it('deletes a handed message that came back to its own receive, under its new receipt handle', async () => {
    const sim = await startMauticSimulator();
    try {
      const unavailable = { status: 503, headers: { 'retry-after': '120' }, body: '' };
      sim.inject({ path: '/api/companies/batch/new' }, unavailable, 1);
      const company = {
        ...(sqsRecords(1)[0] as ReturnType<typeof sqsRecords>[number]),
        body: JSON.stringify({
          v: 1,
          eventId: 'e0',
          receivedAt: new Date().toISOString(),
          sender: 't',
          entity: 'companies',
          action: 'create',
          data: { companyname: 'Acme' },
        }),
      };
      const [, second, third] = sqsRecords(3);
      // A full hand, then a next batch gathered while it is delivered, then nothing more.
      const gathers = [[{ ...company, receiptHandle: 'rh0-again' }, third], []];
      // Mautic's pace is known (1 ms an item), so the handler may go on to a next batch.
      const itemTime = new MauticItemTime();
      itemTime.observe(200, 200);
      const removed: string[] = [];
      const handler = directHandler(sim, sim.issueToken().accessToken, [], {
        queues: {
          deadLetter: async () => [],
          delay: async () => [],
          receive: async () => (gathers.shift() ?? []) as QueuedMessage[],
          remove: async (messages) => {
            removed.push(...messages.map((m) => m.receiptHandle));
            return [];
          },
        },
        options: {
          ...DEFAULT_DELIVERY_OPTIONS,
          maxAttempts: 1,
          batchSize: 2,
          maxDelaySeconds: 900,
          batchWindowMs: 1_000,
        },
        itemTime,
      });

      const response = await handler(
        { Records: [company, second] } as never,
        lambdaContext('batch', 30_000),
      );

      // Retried in the first batch: back through the event source, once.
      expect(response).toEqual({ batchItemFailures: [{ itemIdentifier: 'm0' }] });
      // Delivered in the second: deleted by the function, with the handle it came back under.
      expect(removed.sort()).toEqual(['rh0-again', 'rh2']);
      expect(sim.records('companies')).toHaveLength(1);
    } finally {
      await sim.close();
    }
  });

  it('keeps an own message whose dead letter could not be sent: it comes back, nothing is lost', async () => {
    const sim = await startMauticSimulator();
    try {
      const records = sqsRecords(2);
      const own = { ...records[1], body: 'not json' } as (typeof records)[number];
      const removed: string[] = [];
      const handler = directHandler(sim, sim.issueToken().accessToken, [], {
        queues: {
          deadLetter: async (letters) => letters.map((letter) => letter.message.messageId),
          delay: async () => [],
          receive: async () => [own] as QueuedMessage[],
          remove: async (messages) => {
            removed.push(...messages.map((m) => m.messageId));
            return [];
          },
        },
        options: {
          ...DEFAULT_DELIVERY_OPTIONS,
          batchSize: 2,
          maxDelaySeconds: 900,
          batchWindowMs: 0,
        },
      });

      const response = await handler(
        { Records: [records[0]] } as never,
        lambdaContext('batch', 30_000),
      );

      expect(response).toEqual({ batchItemFailures: [] });
      expect(removed).toEqual([]);
    } finally {
      await sim.close();
    }
  });

  it('publishes how many events were delivered, dead-lettered and left to the queue', async () => {
    const sim = await startMauticSimulator({ rateLimit: { limit: 1, windowSeconds: 600 } });
    try {
      const seen = recorder();
      const handler = directHandler(sim, sim.issueToken().accessToken, [], {
        logger: seen.logger,
        metrics: seen.metrics,
      });
      const records = sqsRecords(3);
      records[2] = { ...records[2], body: 'not json' } as (typeof records)[number];

      const response = await handler({ Records: records }, lambdaContext('batch', 30_000));

      expect(response).toEqual({ batchItemFailures: [{ itemIdentifier: 'm1' }] });
      expect({
        EventsDelivered: seen.metric('EventsDelivered'),
        EventsRejected: seen.metric('EventsRejected'),
        EventsRetried: seen.metric('EventsRetried'),
        MauticCalls: seen.metric('MauticCalls'),
      }).toEqual({ EventsDelivered: 1, EventsRejected: 1, EventsRetried: 1, MauticCalls: 2 });
    } finally {
      await sim.close();
    }
  });

  it('fails the invocation when settling a batch throws, leaving no rejection unawaited', async () => {
    const sim = await startMauticSimulator();
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const seen = recorder();
      const handler = directHandler(sim, sim.issueToken().accessToken, [], {
        metrics: {
          addMetric: (name, unit, value) => {
            if (name === 'EventsDelivered') throw new Error('metrics broke');
            seen.metrics.addMetric(name, unit, value);
          },
        },
      });

      await expect(
        handler({ Records: sqsRecords(2) }, lambdaContext('batch', 30_000)),
      ).rejects.toThrow('metrics broke');
      // Delivered all the same: the event source gives the batch back (at least once).
      expect(sim.records('contacts')).toHaveLength(2);
      await new Promise((resolve) => setImmediate(resolve));
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
      await sim.close();
    }
  });

  it('publishes the age of the oldest event it sent back, in seconds since its first receive', async () => {
    const sim = await startMauticSimulator({ rateLimit: { limit: 1, windowSeconds: 600 } });
    try {
      const seen = recorder();
      const handler = directHandler(sim, sim.issueToken().accessToken, [], {
        logger: seen.logger,
        metrics: seen.metrics,
      });
      const now = Date.now();
      // m0 is delivered (its age is not a retried event's); m1 and m2 meet the rate limit.
      const ages = [9_999, 1_234, 300];
      const records = sqsRecords(3).map((record, n) => ({
        ...record,
        attributes: {
          ...record.attributes,
          ApproximateFirstReceiveTimestamp: String(now - (ages[n] ?? 0) * 1000),
        },
      }));

      const response = await handler({ Records: records }, lambdaContext('batch', 30_000));

      expect(response.batchItemFailures.map((f) => f.itemIdentifier).sort()).toEqual(['m1', 'm2']);
      expect(seen.emitted.filter(([name]) => name === 'OldestRetriedEventAge')).toEqual([
        ['OldestRetriedEventAge', 'Seconds', 1_234],
      ]);
      expect(seen.events('events_retried')).toEqual([
        expect.objectContaining({
          fields: expect.objectContaining({ count: 2, oldestSeconds: 1_234 }),
        }),
      ]);
    } finally {
      await sim.close();
    }
  });

  it('still reports rate-limited events as failures when the delay cannot be set, and logs it', async () => {
    const sim = await startMauticSimulator({ rateLimit: { limit: 1, windowSeconds: 600 } });
    try {
      const seen = recorder();
      const handler = directHandler(sim, sim.issueToken().accessToken, [], {
        logger: seen.logger,
        queues: {
          deadLetter: async () => [],
          delay: async () => Promise.reject(new Error('AccessDenied')),
          receive: async () => [],
          remove: async () => [],
        },
      });

      const response = await handler({ Records: sqsRecords(2) }, lambdaContext('batch', 30_000));

      expect(response).toEqual({ batchItemFailures: [{ itemIdentifier: 'm1' }] });
      expect(seen.events('delay_failed')).toEqual([
        expect.objectContaining({ message: expect.stringContaining('Could not delay') }),
      ]);
    } finally {
      await sim.close();
    }
  });

  it('calls again at once when the rate-limit window has already reset', async () => {
    const sim = await startMauticSimulator();
    try {
      sim.inject(
        { path: '/api/contacts/batch/new' },
        {
          status: 429,
          headers: { 'x-ratelimit-reset': String(Math.floor(Date.now() / 1000) - 10) },
        },
      );
      const delays: Array<[string[], number]> = [];

      const response = await directHandler(
        sim,
        sim.issueToken().accessToken,
        delays,
      )({ Records: sqsRecords(1) }, lambdaContext('batch', 30_000));

      // Neither a backoff nor a wait for a reset that is past: delivered by the next call.
      expect(response).toEqual({ batchItemFailures: [] });
      expect(delays).toEqual([]);
      expect(sim.requests.filter((r) => r.path === '/api/contacts/batch/new')).toHaveLength(2);
    } finally {
      await sim.close();
    }
  });
});
