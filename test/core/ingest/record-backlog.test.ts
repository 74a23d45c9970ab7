/**
 * Contract §2, one busy record never stalls the others: the decision and the counting of
 * `functions/core/ingest/record-backlog.ts`, over a counter kept in memory. The same through the HTTP
 * front, the DynamoDB counter and two ingest containers: test/ingest/record-backlog.test.ts.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  IngestRefusal,
  QueueUnavailableError,
  StoreUnavailableError,
} from '../../../functions/core/errors.ts';
import type { QueuedEvent } from '../../../functions/core/events.ts';
import { acceptEvents } from '../../../functions/core/ingest/ingest.ts';
import { queueMessageFor } from '../../../functions/core/ingest/queue-messages.ts';
import {
  admitToRecords,
  checkRecordShare,
  eventsInLastMinute,
  eventsPerRecord,
  secondsUntilRoom,
} from '../../../functions/core/ingest/record-backlog.ts';
import { parseCredentials } from '../../../functions/core/ingest/webhook-auth.ts';
import type { OutgoingMessage } from '../../../functions/core/queue-ports.ts';
import type { MinuteCounts, RecordCounter } from '../../../functions/core/record-counter.ts';
import { API_KEY, INGEST_LIMITS } from '../../support/ingest.ts';
import { recorder } from '../../support/observe.ts';

/** 12:00:00 UTC: the start of a minute. */
const MINUTE_START = Date.parse('2026-11-21T12:00:00Z');
const MINUTE = MINUTE_START / 60_000;

let made = 0;
function message(event: Omit<QueuedEvent, 'v' | 'eventId' | 'receivedAt' | 'sender'>) {
  const queued = { v: 1, eventId: `e${++made}`, receivedAt: '', sender: 'api-key#1', ...event };
  return queueMessageFor(queued as QueuedEvent, made);
}
const ann = () => message({ entity: 'contacts', action: 'create', data: { email: 'ann@x.com' } });
const annEdit = () =>
  message({ entity: 'contacts', action: 'edit', match: { email: 'ANN@x.com' }, data: {} });
const bob = () => message({ entity: 'contacts', action: 'delete', match: { email: 'bob@x.com' } });
const company = () =>
  message({ entity: 'companies', action: 'create', data: { companyname: 'A' } });
const times = (count: number, make: () => OutgoingMessage) => Array.from({ length: count }, make);

/** Counts in memory, by record and minute; `fail` makes a record's calls throw. */
function memoryCounter(fail: (record: string) => Error | undefined = () => undefined) {
  const counts = new Map<string, number>();
  const calls = { add: 0, giveBack: 0, inFlight: 0, mostInFlight: 0 };
  const key = (record: string, minute: number) => `${record}#${minute}`;
  const counter: RecordCounter = {
    async add(record, events, minute): Promise<MinuteCounts> {
      calls.add++;
      calls.inFlight++;
      calls.mostInFlight = Math.max(calls.mostInFlight, calls.inFlight);
      await new Promise((resolve) => setTimeout(resolve, 1));
      calls.inFlight--;
      const failure = fail(record);
      if (failure) throw failure;
      const current = (counts.get(key(record, minute)) ?? 0) + events;
      counts.set(key(record, minute), current);
      return { current, previous: counts.get(key(record, minute - 1)) ?? 0 };
    },
    async giveBack(record, events, minute) {
      calls.giveBack++;
      const failure = fail(record);
      if (failure) throw failure;
      counts.set(key(record, minute), (counts.get(key(record, minute)) ?? 0) - events);
    },
  };
  const of = (sample: OutgoingMessage, minute = MINUTE) =>
    counts.get(key(sample.groupId, minute)) ?? 0;
  return { counter, calls, counts, of };
}

function deps(counter: RecordCounter, now = MINUTE_START + 30_000, limit = 5) {
  const log = recorder();
  return {
    log,
    deps: {
      clock: { now: () => now },
      limits: { maxRecordEventsPerMinute: limit },
      recordCounter: counter,
      logger: log.logger,
    },
  };
}

const request = { body: new Uint8Array(), headers: {}, requestId: 'req-1' };

describe('events per record', () => {
  it('counts a request’s events per record, one record however it is named, and leaves out creates of new records', () => {
    const counts = eventsPerRecord([ann(), annEdit(), bob(), company(), company()]);

    expect([...counts.values()]).toEqual([2, 1]);
    expect(counts.has(ann().groupId)).toBe(true);
  });

  it('refuses (422) a request holding more events of one record than a minute takes; 0 is no bound', () => {
    const refuse = () => checkRecordShare(times(6, ann), { maxRecordEventsPerMinute: 5 });

    expect(refuse).toThrow(IngestRefusal);
    expect(refuse).toThrow(
      expect.objectContaining({
        status: 422,
        code: 'invalid_event',
        details: [expect.objectContaining({ path: '', message: expect.stringMatching(/6 .*5/) })],
      }),
    );
    expect(() => checkRecordShare(times(5, ann), { maxRecordEventsPerMinute: 5 })).not.toThrow();
    expect(() =>
      checkRecordShare(times(9, company), { maxRecordEventsPerMinute: 5 }),
    ).not.toThrow();
    expect(() => checkRecordShare(times(9, ann), { maxRecordEventsPerMinute: 0 })).not.toThrow();
    expect(() => checkRecordShare(times(9, ann), {})).not.toThrow();
  });
});

describe('the sliding minute', () => {
  it('counts this minute’s events and the share of the last minute’s still within 60 s', () => {
    const counts = { current: 2, previous: 10 };

    expect(eventsInLastMinute(counts, MINUTE_START)).toBe(12);
    expect(eventsInLastMinute(counts, MINUTE_START + 15_000)).toBe(9.5);
    expect(eventsInLastMinute(counts, MINUTE_START + 45_000)).toBe(4.5);
  });

  it('waits until the events fit: this minute as the last one’s leave, else in the next, at least 1 s', () => {
    // 2 now and 10 last minute, 30 s in: room for 3 more once the last minute's weigh ≤ 0.
    expect(secondsUntilRoom({ current: 2, previous: 10 }, 3, 5, MINUTE_START + 30_000)).toBe(30);
    // ≤ 2 of the last minute's: 48 s into the minute, 18 s from now.
    expect(secondsUntilRoom({ current: 2, previous: 10 }, 1, 5, MINUTE_START + 30_000)).toBe(18);
    // 5 this minute: none fits before the next; there, 1 more once 5 × (1 − t) ≤ 4: t = 12 s.
    expect(secondsUntilRoom({ current: 5, previous: 0 }, 1, 5, MINUTE_START + 30_000)).toBe(42);
    expect(secondsUntilRoom({ current: 5, previous: 5 }, 5, 5, MINUTE_START)).toBe(120);
    expect(secondsUntilRoom({ current: 0, previous: 0 }, 5, 5, MINUTE_START + 59_999)).toBe(1);
  });
});

describe('admitting a request to its records', () => {
  it('admits up to the bound, and refuses the next event 429 record_backlog with Retry-After, leaving nothing counted of it', async () => {
    const memory = memoryCounter();
    const { deps: d, log } = deps(memory.counter);

    for (let n = 0; n < 5; n++)
      expect((await admitToRecords([ann()], request, d)).kind).toBe('admitted');
    const refused = await admitToRecords([annEdit()], request, d);

    expect(refused).toEqual({
      kind: 'refused',
      response: {
        status: 429,
        body: { error: { code: 'record_backlog', message: expect.stringMatching(/5 events/) } },
        // 5 this minute: a 6th fits once 5 × (1 − t) ≤ 4 in the next, 12 s into it.
        headers: { 'retry-after': '42' },
      },
    });
    expect(memory.of(ann())).toBe(5);
    const [line] = log.events('record_backlog');
    expect(line?.fields).toEqual({
      event: 'record_backlog',
      requestId: 'req-1',
      records: [ann().groupId],
      limit: 5,
      retryAfterSeconds: 42,
    });
    expect(log.text()).not.toContain('ann@');
  });

  it('queues nothing of a request with one record past its bound: the others’ counts are given back', async () => {
    const memory = memoryCounter();
    const { deps: d } = deps(memory.counter);
    await admitToRecords(times(5, ann), request, d);

    const refused = await admitToRecords([bob(), bob(), ann()], request, d);

    expect(refused.kind === 'refused' && refused.response.status).toBe(429);
    expect(memory.of(bob())).toBe(0);
    expect(memory.of(ann())).toBe(5);
    expect((await admitToRecords(times(5, bob), request, d)).kind).toBe('admitted');
  });

  it('weighs the last minute’s events as they leave the window', async () => {
    const memory = memoryCounter();
    await admitToRecords(times(5, ann), request, deps(memory.counter, MINUTE_START - 1).deps);

    // 15 s into the next minute, 3.75 of them still count: one more fits, not two.
    const later = deps(memory.counter, MINUTE_START + 15_000).deps;
    expect((await admitToRecords([ann()], request, later)).kind).toBe('admitted');
    const refused = await admitToRecords([ann()], request, later);

    // 1 this minute, 5 last: a second fits once 5 × (1 − t) ≤ 3, at 24 s: 9 s from now.
    expect(refused.kind === 'refused' && refused.response.headers).toEqual({ 'retry-after': '9' });
  });

  it('answers 503 queue_unavailable when a counter cannot be used, giving back what the others counted', async () => {
    const memory = memoryCounter((record) =>
      record === bob().groupId ? new StoreUnavailableError('down') : undefined,
    );
    const { deps: d } = deps(memory.counter);

    const refused = await admitToRecords([ann(), bob()], request, d);

    expect(refused.kind === 'refused' && refused.response).toEqual({
      status: 503,
      body: { error: { code: 'queue_unavailable', message: expect.any(String) } },
    });
    expect(memory.of(ann())).toBe(0);
  });

  it('throws what is not the store failing, after giving back', async () => {
    const memory = memoryCounter((record) =>
      record === bob().groupId ? new TypeError('a bug') : undefined,
    );

    await expect(
      admitToRecords([ann(), bob()], request, deps(memory.counter).deps),
    ).rejects.toThrow('a bug');
    expect(memory.of(ann())).toBe(0);
  });

  it('gives back what the queue then did not take, and logs what it could not give back', async () => {
    let down = false;
    const memory = memoryCounter(() => (down ? new StoreUnavailableError('down') : undefined));
    const { deps: d, log } = deps(memory.counter);
    const admitted = await admitToRecords([ann(), ann(), bob()], request, d);
    if (admitted.kind !== 'admitted') throw new Error('refused');

    await admitted.giveBack([ann()]);
    expect(memory.of(ann())).toBe(1);
    down = true;
    await admitted.giveBack([bob()]);

    expect(memory.of(bob())).toBe(1);
    expect(log.events('record_count_kept').map((line) => line.fields)).toEqual([
      { event: 'record_count_kept', requestId: 'req-1', events: 1 },
    ]);
  });

  it('counts the records of a large request at most 25 at once, and nothing without a record or a bound', async () => {
    const memory = memoryCounter();
    const many = Array.from({ length: 100 }, (_, n) =>
      message({ entity: 'contacts', action: 'create', data: { email: `u${n}@x.com` } }),
    );

    expect((await admitToRecords(many, request, deps(memory.counter).deps)).kind).toBe('admitted');
    expect(memory.calls.add).toBe(100);
    expect(memory.calls.mostInFlight).toBe(25);

    await admitToRecords(times(9, company), request, deps(memory.counter).deps);
    await admitToRecords(times(9, ann), request, deps(memory.counter, MINUTE_START, 0).deps);
    const { deps: none } = deps(memory.counter);
    await admitToRecords(times(9, ann), request, { ...none, recordCounter: undefined });
    expect(memory.calls.add).toBe(100);
  });
});

describe('the ingest with the bound', () => {
  it('leaves counted only what the queue took when it fails part way (503)', async () => {
    const memory = memoryCounter();
    const credentials = parseCredentials({ webhookSecrets: [], apiKeys: [API_KEY] });
    const events = [
      { entity: 'contacts', action: 'create', data: { email: 'ann@x.com' } },
      { entity: 'contacts', action: 'delete', match: { email: 'bob@x.com' } },
    ];
    const answer = await acceptEvents(
      {
        body: new TextEncoder().encode(JSON.stringify(events)),
        headers: { 'content-type': 'application/json', authorization: `Bearer ${API_KEY}` },
      },
      {
        credentials: async () => credentials,
        // SQS took Ann's event, then failed.
        queue: {
          async enqueue(messages, queued) {
            if (messages[0]) queued?.(messages[0]);
            throw new QueueUnavailableError('SQS failed');
          },
        },
        clock: { now: () => MINUTE_START },
        newId: () => randomUUID(),
        limits: { ...INGEST_LIMITS, maxRecordEventsPerMinute: 5 },
        recordCounter: memory.counter,
      },
    );

    expect(answer.status).toBe(503);
    expect(memory.of(ann())).toBe(1);
    expect(memory.of(bob())).toBe(0);
  });
});
