/**
 * Each event's outcome as delivery happens (contract §1.6): the records the batch function makes
 * of a settled batch, the words an outcome may carry (ids and statuses, never a value), the
 * current record of an event, and best-effort writing.
 */
import { describe, expect, it } from 'vitest';
import { planBatches } from '../../../functions/core/delivery/batch-plan.ts';
import { deliverChunks } from '../../../functions/core/delivery/delivery.ts';
import { batchOutcomes } from '../../../functions/core/delivery/event-outcomes.ts';
import type { MessageOutcome } from '../../../functions/core/delivery/failure-policy.ts';
import { readMessages } from '../../../functions/core/delivery/outcomes.ts';
import type { QueuedEvent } from '../../../functions/core/events.ts';
import { currentOutcomes, outcomeAnswer } from '../../../functions/core/ingest/outcome-view.ts';
import { MauticApiClient } from '../../../functions/core/mautic/mautic-api.ts';
import type { OutcomeRecord } from '../../../functions/core/outcome-records.ts';
import { outcomeDetail, recordOutcomes } from '../../../functions/core/outcome-writes.ts';
import type { OutcomeStore } from '../../../functions/core/ports.ts';
import type { QueuedMessage } from '../../../functions/core/queue-ports.ts';
import { InMemoryActionLedger } from '../../support/action-ledger.ts';
import { incoming } from '../../support/events.ts';
import { inMemoryMautic } from '../../support/in-memory-mautic.ts';
import { recorder } from '../../support/observe.ts';

const NOW = Date.parse('2026-11-21T12:00:00.000Z');
const iso = (ms: number) => new Date(ms).toISOString();

function message(id: string, event: Partial<QueuedEvent>, receives = 1): QueuedMessage {
  return {
    messageId: id,
    receiptHandle: `rh-${id}`,
    body: JSON.stringify({
      v: 1,
      eventId: `ev-${id}`,
      receivedAt: iso(NOW - 5_000),
      sender: 'webhook#1',
      entity: 'contacts',
      action: 'edit',
      id: 7,
      data: { firstname: 'Ann' },
      ...event,
    }),
    attributes: { ApproximateReceiveCount: String(receives) },
    messageAttributes: {},
  };
}

describe('batchOutcomes', () => {
  it('makes one record per event: delivered with its call, coalesced into the later event, skipped, retrying, dead-lettered', () => {
    const messages = [
      message('1', {}),
      message('2', {}),
      message('3', { action: 'addPoints', data: undefined, points: 5 }),
      message('4', { id: 8 }, 3),
      message('5', { id: 9 }),
    ];
    const read = readMessages(messages);
    const call = { id: 'c-1', at: NOW - 100 };
    const outcomes = new Map<string, MessageOutcome>([
      ['1', { kind: 'delivered', status: 200, id: 7, call, into: '2' }],
      ['2', { kind: 'delivered', status: 200, id: 7, call }],
      ['3', { kind: 'delivered', status: 200, id: 0, skipped: 'an addPoints already applied' }],
      ['4', { kind: 'retry', reason: 'mautic_server', status: 503, message: 'Mautic said "x"' }],
      ['5', { kind: 'rejected', reason: 'mautic_rejected_item', status: 404, message: 'Gone' }],
    ]);
    const m4 = messages[3] as QueuedMessage;
    const m5 = messages[4] as QueuedMessage;
    const settled = {
      deadLetters: [{ message: m5, reason: 'mautic_rejected_item', detail: 'Gone', status: 404 }],
      delays: [{ seconds: 60, messages: [m4] }],
    };

    const records = batchOutcomes(messages, read, outcomes, settled, NOW);

    const common = {
      sender: 'webhook#1',
      slot: 'state',
      entity: 'contacts',
      acceptedAt: iso(NOW - 5_000),
      updatedAt: iso(NOW),
    };
    expect(records).toEqual([
      {
        ...common,
        eventId: 'ev-1',
        action: 'edit',
        attempts: 1,
        status: 'coalesced',
        into: 'ev-2',
      },
      {
        ...common,
        eventId: 'ev-2',
        action: 'edit',
        attempts: 1,
        status: 'delivered',
        mauticIds: [7],
        httpStatus: 200,
        deliveredAt: iso(NOW - 100),
        callId: 'c-1',
      },
      {
        ...common,
        eventId: 'ev-3',
        action: 'addPoints',
        attempts: 1,
        status: 'skipped',
        detail: 'an addPoints already applied',
      },
      {
        ...common,
        eventId: 'ev-4',
        action: 'edit',
        attempts: 3,
        status: 'retrying',
        lastFailure: { class: 'mautic_server', httpStatus: 503 },
        nextAttemptAt: iso(NOW + 60_000),
      },
      {
        ...common,
        eventId: 'ev-5',
        action: 'edit',
        attempts: 1,
        status: 'dead_lettered',
        reason: 'mautic_rejected_item',
        detail: 'Mautic refused it (HTTP 404)',
        httpStatus: 404,
      },
    ]);
  });

  it('dead-letters an unreadable message that is an event, once per event, and skips one that is not', () => {
    const last = message('1', {}, 9);
    const duplicate = message('2', { eventId: 'ev-2' });
    const again = message('3', { eventId: 'ev-2' });
    const garbage: QueuedMessage = { ...message('4', {}), body: 'not json' };
    const read = readMessages([last, duplicate, again, garbage], 9);
    const outcomes = new Map<string, MessageOutcome>([
      ['2', { kind: 'delivered', status: 200, id: 7 }],
      ['3', { kind: 'delivered', status: 200, id: 7 }],
    ]);

    const records = batchOutcomes(
      [last, duplicate, again, garbage],
      read,
      outcomes,
      { deadLetters: [], delays: [] },
      NOW,
    );

    expect(records.map((r) => [r.eventId, r.status, r.reason, r.detail])).toEqual([
      ['ev-1', 'dead_lettered', 'too_many_receives', 'received 9 times without being settled'],
      ['ev-2', 'delivered', undefined, undefined],
    ]);
    // No call named it (a delete that matched no contact): delivered at the settling.
    expect(records[1]).toMatchObject({ deliveredAt: iso(NOW), mauticIds: [7] });
    expect(records[1]?.callId).toBeUndefined();
  });
});

describe('delivery for outcomes', () => {
  it("settles a merged item's earlier events as coalesced into its last one, and names the call its log line names", async () => {
    const mautic = inMemoryMautic(() => NOW);
    const observed = recorder();
    const first = incoming({ entity: 'contacts', action: 'create', data: { email: 'a@x.io' } });
    const second = incoming({
      entity: 'contacts',
      action: 'create',
      data: { email: 'a@x.io', firstname: 'A' },
    });
    const other = incoming({ entity: 'contacts', action: 'create', data: { email: 'b@x.io' } });

    const outcomes = await deliverChunks(planBatches([first, second, other], 200), NOW + 60_000, {
      api: new MauticApiClient({ baseUrl: 'http://mautic.test', fetch: mautic.fetch }),
      ledger: new InMemoryActionLedger(),
      tokens: { accessToken: async () => 'token' },
      logger: observed.logger,
      metrics: observed.metrics,
      clock: { now: () => NOW },
      sleep: async () => {},
      random: () => 0.5,
      learnedLimit: { value: undefined },
    });

    const [line] = observed.events('mautic_call');
    const callId = line?.fields.callId;
    expect(typeof callId).toBe('string');
    const carried = outcomes.get(second.messageId);
    expect(carried).toMatchObject({ kind: 'delivered', status: 201, call: { id: callId } });
    expect(outcomes.get(first.messageId)).toEqual({ ...carried, into: second.messageId });
    expect(outcomes.get(other.messageId)).not.toHaveProperty('into');
    // The line names each item's events with the Mautic id it got.
    const ids = mautic.state.stores.contacts.records;
    expect(line?.fields.events).toEqual([
      {
        eventIds: [first.event.eventId, second.event.eventId],
        status: 201,
        id: [...ids.keys()][0],
      },
      { eventIds: [other.event.eventId], status: 201, id: [...ids.keys()][1] },
    ]);
  });
});

describe('outcomeDetail', () => {
  it('keeps the relay’s own words, and leaves out every value a dead letter’s detail may quote', () => {
    const cases: Array<[{ reason: string; detail: string; status?: number }, string]> = [
      [
        {
          reason: 'duplicate',
          status: 422,
          detail:
            'companyname: This field must be unique. Another record has companyname "Acme Ltd" (ignoring case and trailing spaces), perhaps this event\'s own earlier try.',
        },
        'Another record has the same companyname, a unique field (HTTP 422)',
      ],
      [
        {
          reason: 'mautic_refused_item',
          status: 422,
          detail: 'POST /api/contacts/batch/new answered 422: email: ann@example.com is invalid',
        },
        'Mautic refused it (HTTP 422)',
      ],
      [
        {
          reason: 'mautic_rejected_item',
          status: 404,
          detail: 'Mautic found no segment 5 (Item was not found.)',
        },
        'Mautic found no segment 5',
      ],
      [
        {
          reason: 'mautic_rejected_item',
          status: 404,
          detail:
            'Mautic found no campaign 7 or no contact 12 (its answer does not say which) (Item was not found.)',
        },
        'Mautic found no campaign 7 or no contact 12 (its answer does not say which)',
      ],
      [
        {
          reason: 'ambiguous_result',
          detail: 'Mautic may have created this record; its answer cannot tell (timeout "x")',
        },
        'Mautic may have created this record; its answer could not tell, so it is not sent again',
      ],
      [
        {
          reason: 'retry_horizon_exceeded',
          status: 503,
          detail: 'retried for 86400 s; last failure: Mautic said "ann@example.com"',
        },
        'retried for 86400 s; the last failure (HTTP 503)',
      ],
      [
        { reason: 'mapping_failed', detail: 'Unable to cast value to a number: "ann" (T2001)' },
        'Unable to cast value to a number: "…" (T2001)',
      ],
      [
        { reason: 'no_match', detail: 'No contact matches match.email' },
        'No contact matches match.email',
      ],
      [
        { reason: 'mautic_unknown_entity', status: 404, detail: 'GET /api/x' },
        'Mautic has no API for this entity (HTTP 404)',
      ],
    ];
    for (const [letter, detail] of cases) expect(outcomeDetail(letter)).toBe(detail);
  });
});

describe('currentOutcomes and outcomeAnswer', () => {
  const record = (slot: 'queued' | 'state', acceptedAt: number, status: OutcomeRecord['status']) =>
    ({
      eventId: 'ev-1',
      sender: 'webhook#1',
      slot,
      status,
      entity: 'contacts',
      action: 'create',
      acceptedAt: iso(acceptedAt),
      updatedAt: iso(acceptedAt + 10),
      attempts: slot === 'queued' ? 0 : 1,
    }) satisfies OutcomeRecord;

  it('answers the state record over the queued one, whichever was written last, unless the queued one is a later acceptance', () => {
    const queued = record('queued', NOW, 'queued');
    const delivered = { ...record('state', NOW, 'delivered'), mauticIds: [3], httpStatus: 201 };
    expect(currentOutcomes([delivered, queued])).toEqual([delivered]);
    expect(currentOutcomes([queued, delivered])).toEqual([delivered]);
    const later = record('queued', NOW + 1, 'queued');
    expect(currentOutcomes([delivered, later])).toEqual([later]);
    // Another sender's record of the same id is another event.
    expect(currentOutcomes([queued, { ...delivered, sender: 'api-key#1' }])).toHaveLength(2);
  });

  it("answers the common fields in the contract's order, then the status's own, never the store's keys", () => {
    const answer = outcomeAnswer({
      ...record('state', NOW, 'dead_lettered'),
      reason: 'no_match',
      detail: 'No contact matches match.email',
      httpStatus: null,
      // A field of another status is never answered.
      into: 'ev-9',
    });
    expect(Object.keys(answer)).toEqual([
      'eventId',
      'entity',
      'action',
      'status',
      'acceptedAt',
      'updatedAt',
      'attempts',
      'reason',
      'detail',
      'httpStatus',
    ]);
    expect(answer).not.toHaveProperty('sender');
    expect(answer.httpStatus).toBeNull();
  });
});

describe('recordOutcomes', () => {
  const records = [
    {
      eventId: 'ev-1',
      sender: 'webhook#1',
      slot: 'queued',
      status: 'queued',
      entity: 'contacts',
      action: 'create',
      acceptedAt: iso(NOW),
      updatedAt: iso(NOW),
      attempts: 0,
    },
  ] satisfies OutcomeRecord[];

  it('logs and counts what a failing store did not write, and never rejects', async () => {
    const observed = recorder();
    const failing: OutcomeStore = {
      write: async () => {
        throw new Error('ProvisionedThroughputExceededException');
      },
      read: async () => [],
    };
    const clock = { now: () => Date.now() };

    await recordOutcomes(failing, records, { ...observed, clock }, Date.now() + 1_000);

    expect(observed.events('outcome_write_failed')).toEqual([
      expect.objectContaining({
        level: 'warn',
        fields: expect.objectContaining({ count: 1, of: 1 }),
      }),
    ]);
    expect(observed.metric('OutcomeWritesFailed')).toBe(1);
  });

  it('stops waiting for a store that does not answer at its deadline', async () => {
    const observed = recorder();
    const hanging: OutcomeStore = { write: () => new Promise(() => {}), read: async () => [] };
    const started = Date.now();

    await recordOutcomes(hanging, records, { ...observed, clock: Date }, started + 50);

    expect(Date.now() - started).toBeLessThan(1_000);
    expect(observed.metric('OutcomeWritesFailed')).toBe(1);
  });

  it('writes nothing, and says nothing, without a store or records', async () => {
    const observed = recorder();
    await recordOutcomes(undefined, records, { ...observed, clock: Date }, Date.now());
    await recordOutcomes(
      { write: async () => 1, read: async () => [] },
      [],
      { ...observed, clock: Date },
      Date.now(),
    );
    expect(observed.lines).toEqual([]);
  });
});
