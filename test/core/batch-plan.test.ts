import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { planBatches } from '../../functions/core/batch-plan.ts';
import type { QueuedEvent } from '../../functions/core/events.ts';
import { incoming } from '../support/events.ts';

describe('planBatches', () => {
  it('puts 200 creates in one chunk and 201 in two', () => {
    const events = Array.from({ length: 201 }, (_, i) =>
      incoming({ entity: 'contacts', action: 'create', data: { email: `u${i}@example.com` } }),
    );

    expect(planBatches(events.slice(0, 200), 200).map((c) => c.items.length)).toEqual([200]);
    expect(planBatches(events, 200).map((c) => c.items.length)).toEqual([200, 1]);
  });

  it('coalesces contact creates by email, case-insensitively, later fields winning', () => {
    const a = incoming({
      entity: 'contacts',
      action: 'create',
      data: { email: 'Ann@Example.com', city: 'Oslo', firstname: 'A' },
    });
    const b = incoming({
      entity: 'contacts',
      action: 'create',
      data: { email: 'ann@example.com', city: 'Bergen' },
    });

    const [chunk] = planBatches([a, b], 200);

    expect(chunk?.items).toEqual([
      {
        messageIds: [a.messageId, b.messageId],
        payload: { email: 'ann@example.com', city: 'Bergen', firstname: 'A' },
      },
    ]);
  });

  it('coalesces edits and deletes by id, and never company creates', () => {
    const e1 = incoming({
      entity: 'contacts',
      action: 'edit',
      id: 7,
      data: { firstname: 'A', id: 99 },
    });
    const e2 = incoming({ entity: 'contacts', action: 'edit', id: 7, data: { lastname: 'B' } });
    const d1 = incoming({ entity: 'contacts', action: 'delete', id: 8 });
    const d2 = incoming({ entity: 'contacts', action: 'delete', id: 8 });
    const c1 = incoming({ entity: 'companies', action: 'create', data: { companyname: 'Acme' } });
    const c2 = incoming({ entity: 'companies', action: 'create', data: { companyname: 'Acme' } });

    const chunks = planBatches([e1, d1, c1, e2, d2, c2], 200);

    expect(chunks.map((c) => [c.entity, c.action, c.items.length])).toEqual([
      ['contacts', 'edit', 1],
      ['contacts', 'delete', 1],
      ['companies', 'create', 2],
    ]);
    expect(chunks[0]?.items[0]).toEqual({
      messageIds: [e1.messageId, e2.messageId],
      payload: { firstname: 'A', lastname: 'B', id: 7 },
      id: 7,
    });
    expect(chunks[1]?.items[0]).toEqual({
      messageIds: [d1.messageId, d2.messageId],
      payload: {},
      id: 8,
    });
  });

  it('orders an entity as creates, then edits, then deletes, whatever the arrival order', () => {
    const events = [
      incoming({ entity: 'contacts', action: 'delete', id: 1 }),
      incoming({ entity: 'contacts', action: 'edit', id: 2, data: {} }),
      incoming({ entity: 'contacts', action: 'create', data: { email: 'a@example.com' } }),
    ];

    expect(planBatches(events, 200).map((c) => c.action)).toEqual(['create', 'edit', 'delete']);
  });

  it('keeps a __proto__ key in the data as a plain field', () => {
    const data = JSON.parse('{"email":"p@example.com","__proto__":{"polluted":true}}');
    const first = incoming({ entity: 'contacts', action: 'create', data });
    const second = incoming({ entity: 'contacts', action: 'create', data });

    const payload = planBatches([first, second], 200)[0]?.items[0]?.payload ?? {};

    expect(Object.getPrototypeOf(payload)).toBe(Object.prototype);
    expect(JSON.stringify(payload)).toContain('"__proto__":{"polluted":true}');
  });

  it('refuses a batch size that is not a positive integer', () => {
    expect(() => planBatches([], 0)).toThrow(/batchSize/);
  });
});

const eventArbitrary = fc.oneof(
  fc.record({
    entity: fc.constantFrom('contacts', 'companies'),
    action: fc.constant('create' as const),
    data: fc.record({
      email: fc.constantFrom('a@x.io', 'A@x.io', 'b@x.io', 'c@x.io'),
      n: fc.integer(),
    }),
  }),
  fc.record({
    entity: fc.constantFrom('contacts', 'companies'),
    action: fc.constant('edit' as const),
    id: fc.integer({ min: 1, max: 5 }),
    data: fc.record({ n: fc.integer() }),
  }),
  fc.record({
    entity: fc.constantFrom('contacts', 'segments'),
    action: fc.constant('delete' as const),
    id: fc.integer({ min: 1, max: 5 }),
  }),
);

describe('planBatches properties', () => {
  const batches = fc.tuple(
    fc.array(eventArbitrary, { maxLength: 120 }),
    fc.integer({ min: 1, max: 25 }),
  );

  it('accounts for every message id exactly once and keeps every chunk within the limit', () => {
    fc.assert(
      fc.property(batches, ([events, batchSize]) => {
        const incomingEvents = events.map((event, i) => ({
          messageId: `msg-${i}`,
          event: {
            v: 1 as const,
            eventId: `e${i}`,
            receivedAt: '2026-11-21T00:00:00.000Z',
            sender: 't',
            ...event,
          },
        }));
        const chunks = planBatches(incomingEvents, batchSize);
        const ids = chunks.flatMap((c) => c.items.flatMap((item) => item.messageIds));
        expect(ids.slice().sort()).toEqual(incomingEvents.map((e) => e.messageId).sort());
        for (const chunk of chunks) {
          expect(chunk.items.length).toBeGreaterThan(0);
          expect(chunk.items.length).toBeLessThanOrEqual(batchSize);
          for (const item of chunk.items) {
            for (const id of item.messageIds) {
              const source = incomingEvents.find((e) => e.messageId === id)?.event;
              expect([source?.entity, source?.action]).toEqual([chunk.entity, chunk.action]);
            }
          }
        }
      }),
    );
  });

  it('coalesces in arrival order: message ids ascend and the last event of a record wins', () => {
    fc.assert(
      fc.property(batches, ([events, batchSize]) => {
        const incomingEvents = events.map((event, i) => ({
          messageId: String(i).padStart(4, '0'),
          event: {
            v: 1 as const,
            eventId: `e${i}`,
            receivedAt: '2026-11-21T00:00:00.000Z',
            sender: 't',
            ...event,
          },
        }));
        for (const chunk of planBatches(incomingEvents, batchSize)) {
          for (const item of chunk.items) {
            expect(item.messageIds).toEqual(item.messageIds.slice().sort());
            const last: QueuedEvent | undefined =
              incomingEvents[Number(item.messageIds.at(-1))]?.event;
            if (chunk.action !== 'delete') expect(item.payload.n).toBe(last?.data?.n);
            if (chunk.action === 'edit') expect(item.payload.id).toBe(item.id);
          }
        }
      }),
    );
  });
});
