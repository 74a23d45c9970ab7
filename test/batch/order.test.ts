import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SqsDeliveryQueues } from '../../functions/adapters/sqs-delivery-queues.ts';
import { SqsEventQueue } from '../../functions/adapters/sqs-event-queue.ts';
import { createBatchHandler } from '../../functions/batch/handler.ts';
import { DEFAULT_DELIVERY_OPTIONS } from '../../functions/core/delivery/delivery-calls.ts';
import type { QueuedEvent } from '../../functions/core/events.ts';
import { queueMessageFor } from '../../functions/core/ingest/queue-messages.ts';
import { MauticApiClient } from '../../functions/core/mautic/mautic-api.ts';
import type { ActionLedger, MauticBatchApi } from '../../functions/core/ports.ts';
import { createQueuePair } from '../../infra/local/queue-pair.ts';
import { type SqsBatchHandler, SqsEventSource } from '../../infra/local/sqs-event-source.ts';
import { type MauticSimulator, startMauticSimulator } from '../../mautic-simulator/server.ts';
import { InMemoryActionLedger } from '../support/action-ledger.ts';
import {
  type LocalSqs,
  queueCounts,
  startLocalSqs,
  uniqueQueueName,
} from '../support/local-sqs.ts';
import { recorder } from '../support/observe.ts';
import { until } from '../support/until.ts';

// Contract §2, order per record across batches: events of one record take effect in the order
// the ingest accepted them, whatever the batching, the concurrency of the batch function and the
// retries. Through the real parts: the ingest's queue messages and SqsEventQueue, the FIFO queue
// on fauxqs, the local event source with several invocations at once, the real batch handler
// and the Mautic simulator over HTTP.

type EventInput = Pick<QueuedEvent, 'entity' | 'action'> & Partial<QueuedEvent>;

let localSqs: LocalSqs;

beforeAll(async () => {
  localSqs = await startLocalSqs();
});

afterAll(async () => {
  await localSqs.stop();
});

/** The same few records in every simulator: contacts 1–2, company 1 and segment 1. */
function seed(sim: MauticSimulator): void {
  sim.seed('contacts', { email: 'c@x.io', firstname: 'Seed', city: 'Oslo' });
  sim.seed('contacts', { email: 'd@x.io', firstname: 'Seed', tags: ['news'] });
  sim.seed('companies', { companyname: 'Seed Co' });
  sim.seed('segments', { name: 'Seg', alias: 'seg', isPublished: true });
}

/** A record's fields but its timestamps, which differ between any two runs. */
function fieldsOf(record: Record<string, unknown>) {
  const { dateAdded: _added, dateModified: _modified, ...fields } = record;
  return fields;
}

/**
 * The records with the contacts' segment memberships, those created by the events compared
 * without their ids (creation order varies).
 */
function held(sim: MauticSimulator) {
  return Object.fromEntries(
    (['contacts', 'companies'] as const).map((entity) => {
      const records = sim.records(entity).map((record) => ({
        ...fieldsOf(record),
        ...(entity === 'contacts' ? { segments: sim.memberships(record.id)?.segments } : {}),
      })) as Array<{ id: number }>;
      const seeded = entity === 'contacts' ? 2 : 1;
      return [
        entity,
        {
          seeded: records.filter((record) => record.id <= seeded),
          created: records
            .filter((record) => record.id > seeded)
            // Keys sorted: a create retried after a failure may store its fields in another
            // order, which is the same record (seed 963052134, as 332787761 found it in
            // sequential-equivalence).
            .map(({ id: _id, ...fields }) => JSON.stringify(Object.entries(fields).sort()))
            .sort(),
        },
      ];
    }),
  );
}

/** Sends each event alone, in order, as a sender would see them applied one by one. */
async function applyOneByOne(inputs: ReadonlyArray<EventInput>): Promise<ReturnType<typeof held>> {
  const sim = await startMauticSimulator();
  try {
    seed(sim);
    const api = new MauticApiClient({ baseUrl: sim.url, fetch });
    const call = { accessToken: sim.issueToken().accessToken };
    for (const input of inputs) {
      // A contact named by email is the one that has it at that moment, if one does.
      const id = input.match
        ? sim.records('contacts').find((c) => String(c.email) === input.match?.email)?.id
        : input.id;
      if (input.action === 'create') await api.create(input.entity, [input.data ?? {}], call);
      else if (id === undefined) continue;
      else if (input.action === 'edit') await api.edit(input.entity, [{ ...input.data, id }], call);
      else if (input.action === 'delete') await api.delete(input.entity, [id], call);
      else if (input.action === 'addToSegment')
        await api.addToSegment(input.segmentId ?? 0, [id], call);
      else if (input.action === 'addDoNotContact')
        await api.edit('contacts', [{ id, doNotContact: [{ channel: 'email', reason: 3 }] }], call);
      else await api.contactAction(input.action, id, input, call);
    }
    return held(sim);
  } finally {
    await sim.close();
  }
}

interface RelayOptions {
  /** Items per Mautic call, and so per batch. */
  batchSize: number;
  /** What the event source hands an invocation (at most 10 from a FIFO queue). */
  handed: number;
  /** Invocations at once. */
  concurrency: number;
  visibilityTimeoutSeconds?: number;
  functionTimeoutMs?: number;
  /** Wraps the Mautic client, e.g. to crash an invocation after a call. */
  api?: (api: MauticBatchApi) => MauticBatchApi;
  /** Compressed: how long after its invocation's time a crashed invocation's own messages wait. */
  holdMarginSeconds?: number;
  /** The action ledger (a fresh one in memory by default). */
  ledger?: ActionLedger;
}

/** The relay's delivery half on fauxqs and a fresh simulator; `send` queues requests as ingest does. */
async function startRelay(options: RelayOptions) {
  const sim = await startMauticSimulator();
  seed(sim);
  const { sqs } = localSqs;
  const pair = await createQueuePair(sqs, {
    name: uniqueQueueName('order'),
    maxReceiveCount: 50,
    visibilityTimeoutSeconds: options.visibilityTimeoutSeconds ?? 1,
  });
  const accessToken = sim.issueToken().accessToken;
  const api = new MauticApiClient({ baseUrl: sim.url, fetch, timeoutMs: 2_000 });
  const handler = createBatchHandler({
    api: options.api ? options.api(api) : api,
    tokens: { accessToken: async () => accessToken },
    queues: new SqsDeliveryQueues(sqs, {
      eventsQueueUrl: pair.queueUrl,
      deadLetterQueueUrl: pair.deadLetterQueueUrl,
    }),
    // Compressed: a retried event comes back after a second.
    retry: { baseSeconds: 1, maxDelaySeconds: 1, horizonSeconds: 3600, maxReceiveCount: 50 },
    logger: recorder().logger,
    metrics: recorder().metrics,
    clock: { now: () => Date.now() },
    sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
    random: Math.random,
    learnedLimit: { value: undefined },
    ledger: options.ledger ?? new InMemoryActionLedger(),
    options: {
      ...DEFAULT_DELIVERY_OPTIONS,
      // A failed call goes back to the queue at once: the retries are the queue's.
      maxAttempts: 1,
      maxInRunWaitMs: 0,
      maxDelaySeconds: 30,
      batchSize: options.batchSize,
      batchWindowMs: 50,
      ...(options.holdMarginSeconds === undefined
        ? {}
        : { holdMarginSeconds: options.holdMarginSeconds }),
    },
  });
  let inFlight = 0;
  let mostAtOnce = 0;
  const counting: SqsBatchHandler = async (event, context) => {
    inFlight++;
    mostAtOnce = Math.max(mostAtOnce, inFlight);
    try {
      return await handler(event, context);
    } finally {
      inFlight--;
    }
  };
  const source = new SqsEventSource({
    sqs,
    queueUrl: pair.queueUrl,
    queueArn: pair.queueArn,
    handler: counting,
    batchSize: options.handed,
    batchWindowMs: 0,
    maxConcurrency: options.concurrency,
    functionTimeoutMs: options.functionTimeoutMs ?? 10_000,
    onError: () => {},
  });
  const queue = new SqsEventQueue(sqs, pair.queueUrl);
  let sequence = 0;
  return {
    sim,
    pair,
    get mostAtOnce() {
      return mostAtOnce;
    },
    /** Queues one request's events as ingest does, resolving when SQS took them all (its 202). */
    async send(inputs: ReadonlyArray<EventInput>): Promise<void> {
      const receivedAt = new Date().toISOString();
      await queue.enqueue(
        inputs.map((input, index) =>
          queueMessageFor(
            { v: 1, eventId: `e${sequence++}`, receivedAt, sender: 'test', ...input },
            index,
          ),
        ),
      );
    },
    start: () => source.start(),
    /** Until the events queue is empty (bounded). */
    async drained(timeoutMs = 30_000): Promise<void> {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const { visible, inFlight: hidden } = await queueCounts(sqs, pair.queueUrl);
        // A message is in flight while an invocation holds it, until it is deleted.
        if (visible + hidden === 0) return;
        if (Date.now() > deadline) throw new Error('the events queue did not drain in time');
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    },
    async stop(): Promise<void> {
      await source.stop();
      await sim.close();
    },
  };
}

const city = fc.constantFrom('A', 'B', 'C', '');
const tags = fc.constantFrom(['news'], ['-news'], ['web'], ['-web', 'news']);
const fields = fc
  .record({ city, firstname: fc.constantFrom('Ann', 'Bob'), tags }, { requiredKeys: ['city'] })
  .map((data) => Object.fromEntries(Object.entries(data).filter(([, v]) => v !== undefined)));

/** An event on contact a@ or b@ named by `match.email` (contract §5): an edit, a delete or an action. */
const byEmail: fc.Arbitrary<EventInput> = fc
  .tuple(
    fc.constantFrom('a@x.io', 'b@x.io'),
    fc.oneof(
      fields.map((data) => ({ action: 'edit' as const, data })),
      fc.constant({ action: 'delete' as const }),
      fc.constant({ action: 'addToSegment' as const, segmentId: 1 }),
      fc.constant({ action: 'removeFromSegment' as const, segmentId: 1 }),
      fc.constantFrom(3, -1).map((points) => ({ action: 'addPoints' as const, points })),
      fc.constant({ action: 'addDoNotContact' as const }),
    ),
  )
  .map(([email, rest]) => ({ entity: 'contacts', match: { email }, ...rest }));

/**
 * Events on a few records, each named one way throughout (order holds per reference): contacts
 * a@ and b@ by email (creates, which Mautic upserts, and edits, deletes and actions by
 * `match.email`: a delete then a create leaves the contact existing), contacts 1 and 2 and
 * company 1 by id (edits; deletes of contact 2), and new companies.
 */
const event: fc.Arbitrary<EventInput> = fc.oneof(
  { weight: 4, arbitrary: byEmail },
  {
    weight: 4,
    arbitrary: fc.tuple(fc.constantFrom('a@x.io', 'b@x.io'), fields).map(([email, data]) => ({
      entity: 'contacts',
      action: 'create' as const,
      data: { ...data, email },
    })),
  },
  {
    weight: 3,
    arbitrary: fc
      .tuple(fc.constantFrom(1, 2), fields)
      .map(([id, data]) => ({ entity: 'contacts', action: 'edit' as const, id, data })),
  },
  { weight: 1, arbitrary: fc.constant({ entity: 'contacts', action: 'delete' as const, id: 2 }) },
  {
    weight: 2,
    arbitrary: city.map((companycity) => ({
      entity: 'companies',
      action: 'edit' as const,
      id: 1,
      data: { companycity },
    })),
  },
  {
    weight: 1,
    arbitrary: city.map((companycity) => ({
      entity: 'companies',
      action: 'create' as const,
      data: { companyname: `New ${companycity}`, companycity },
    })),
  },
);

/**
 * The calls a run may fail, once each. Never the points endpoint: a 5xx there may have applied
 * the points, so the event is dead-lettered `ambiguous_result` rather than retried (contract §2).
 */
const FAILING: Record<string, RegExp> = {
  'contact writes': /^\/api\/contacts\/batch\//,
  'contact lookups': /^\/api\/contacts$/,
  segments: /^\/api\/segments\//,
  companies: /^\/api\/companies\//,
};

describe('order per record across batches', () => {
  it('ends in the state of one-by-one application, whatever the batches, the concurrency and the retries', async () => {
    let concurrent = 0;
    let retried = 0;
    await fc.assert(
      fc.asyncProperty(
        // Requests of 1 to 3 events, each sent after the one before was accepted.
        fc.array(fc.array(event, { minLength: 1, maxLength: 3 }), { minLength: 2, maxLength: 6 }),
        // Batches larger than the hand, so the function's own receives take part too.
        fc.integer({ min: 1, max: 4 }),
        fc.integer({ min: 1, max: 2 }),
        fc.array(fc.constantFrom(...Object.keys(FAILING)), { minLength: 1, maxLength: 4 }),
        async (requests, batchSize, handed, failures) => {
          const expected = await applyOneByOne(requests.flat());
          const relay = await startRelay({ batchSize, handed, concurrency: 3 });
          try {
            // Calls that fail (a proxy's 503 saying to come back in a second, nothing applied):
            // their events are retried through the queue.
            const unavailable = { status: 503, headers: { 'retry-after': '1' }, body: '' };
            for (const failing of failures) {
              relay.sim.inject({ path: FAILING[failing] as RegExp }, unavailable, 1);
            }
            relay.start();
            for (const request of requests) await relay.send(request);
            await relay.drained();
            if (relay.mostAtOnce > 1) concurrent++;
            if (failures.length > 0) retried++;
            expect(held(relay.sim)).toEqual(expected);
          } finally {
            await relay.stop();
          }
        },
      ),
      { numRuns: 16 },
    );
    // Not vacuous: invocations overlapped, and events were retried.
    expect(concurrent).toBeGreaterThan(0);
    expect(retried).toBeGreaterThan(0);
  }, 180_000);

  it('keeps a record in order when the batch function dies between its Mautic call and settling', async () => {
    const { hung, api } = dyingAfterEdit(() => true);
    const relay = await startRelay({
      batchSize: 1,
      handed: 1,
      concurrency: 2,
      visibilityTimeoutSeconds: 2,
      functionTimeoutMs: 1_000,
      api,
    });
    try {
      relay.start();
      await relay.send([{ entity: 'contacts', action: 'edit', id: 1, data: { city: 'A' } }]);
      await relay.send([{ entity: 'contacts', action: 'edit', id: 1, data: { city: 'B' } }]);
      await relay.send([
        { entity: 'contacts', action: 'create', data: { email: 'a@x.io', city: 'A' } },
      ]);
      await relay.send([
        { entity: 'contacts', action: 'create', data: { email: 'a@x.io', city: 'B' } },
      ]);
      await relay.drained();

      expect(hung).toHaveLength(1);
      expect(cityOf(relay.sim, 1)).toBe('B');
      expect(cityOf(relay.sim, 'a@x.io')).toBe('B');
    } finally {
      for (const resolve of hung) resolve();
      await relay.stop();
    }
  }, 30_000);

  it('applies addPoints once when the queue delivers its event again after it was applied', async () => {
    // The invocation dies once the ledger marked the points done, before the message is deleted:
    // the queue hands the event out again when its visibility timeout ends.
    const hung: Array<() => void> = [];
    const ledger = new InMemoryActionLedger();
    const complete = ledger.complete.bind(ledger);
    ledger.complete = async (key) => {
      await complete(key);
      if (hung.length === 0) await new Promise<void>((resolve) => hung.push(resolve));
    };
    const relay = await startRelay({
      batchSize: 1,
      handed: 1,
      concurrency: 1,
      visibilityTimeoutSeconds: 2,
      functionTimeoutMs: 1_000,
      ledger,
    });
    try {
      relay.start();
      await relay.send([{ entity: 'contacts', action: 'addPoints', id: 1, points: 5 }]);
      await relay.drained();

      expect(hung).toHaveLength(1);
      expect(relay.sim.records('contacts').find((c) => c.id === 1)?.points).toBe(5);
      expect(relay.sim.requests.filter((r) => r.path.includes('/points/'))).toHaveLength(1);
      expect(ledger.calls.map((call) => call.method)).toEqual(['claim', 'complete', 'claim']);
    } finally {
      for (const resolve of hung) resolve();
      await relay.stop();
    }
  }, 30_000);

  it('keeps a record in order when the invocation dies holding a message it received itself', async () => {
    // The call carrying both edits, the handed one and the one the function received itself.
    const { hung, api } = dyingAfterEdit((items) => items === 2);
    const relay = await startRelay({
      // The event source hands one; the function receives the second itself (one invocation at
      // a time, so that no other takes it first).
      batchSize: 2,
      handed: 1,
      concurrency: 1,
      visibilityTimeoutSeconds: 2,
      functionTimeoutMs: 1_000,
      holdMarginSeconds: 1,
      api,
    });
    try {
      await relay.send([{ entity: 'contacts', action: 'edit', id: 2, data: { city: 'X' } }]);
      await relay.send([{ entity: 'contacts', action: 'edit', id: 1, data: { city: 'A' } }]);
      relay.start();
      // Contact 1's first edit is in the dying invocation's own hands when this one arrives.
      await until(
        () => hung.length === 1,
        10_000,
        () => 'the invocation never made its call',
      );
      await relay.send([{ entity: 'contacts', action: 'edit', id: 1, data: { city: 'B' } }]);
      await relay.drained();

      expect(cityOf(relay.sim, 1)).toBe('B');
      expect(cityOf(relay.sim, 2)).toBe('X');
    } finally {
      for (const resolve of hung) resolve();
      await relay.stop();
    }
  }, 30_000);
});

/**
 * A Mautic client whose first edit call that `dies` picks reaches Mautic, then never answers:
 * the invocation's process died there. `hung` releases it when the test ends.
 */
function dyingAfterEdit(dies: (items: number) => boolean) {
  let crashes = 1;
  const hung: Array<() => void> = [];
  const api = (real: MauticBatchApi): MauticBatchApi => ({
    create: real.create.bind(real),
    delete: real.delete.bind(real),
    findContacts: real.findContacts.bind(real),
    addToSegment: real.addToSegment.bind(real),
    contactAction: real.contactAction.bind(real),
    linkCompanies: real.linkCompanies.bind(real),
    edit: async (entity, items, call) => {
      const results = await real.edit(entity, items, call);
      if (dies(items.length) && crashes-- > 0) {
        await new Promise<void>((resolve) => hung.push(resolve));
      }
      return results;
    },
  });
  return { hung, api };
}

/** A contact's city, by id or by email. */
function cityOf(sim: MauticSimulator, which: number | string): unknown {
  const contact = sim
    .records('contacts')
    .find((record) => (typeof which === 'number' ? record.id === which : record.email === which));
  return contact?.city;
}
