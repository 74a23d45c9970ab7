import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { planBatches } from '../../../functions/core/delivery/batch-plan.ts';
import type { QueuedEvent } from '../../../functions/core/events.ts';
import { incoming } from '../../support/events.ts';

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
      data: { email: 'ann@example.com', city: 'Bergen', firstname: 'B' },
    });

    const [chunk] = planBatches([a, b], 200);

    expect(chunk?.items).toMatchObject([
      {
        messageIds: [a.messageId, b.messageId],
        payload: { email: 'ann@example.com', city: 'Bergen', firstname: 'B' },
        parts: [{ messageIds: [a.messageId] }, { messageIds: [b.messageId] }],
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
    expect(chunks[0]?.items[0]).toMatchObject({
      messageIds: [e1.messageId, e2.messageId],
      payload: { firstname: 'A', lastname: 'B', id: 7 },
      id: 7,
    });
    expect(chunks[1]?.items[0]).toMatchObject({
      messageIds: [d1.messageId, d2.messageId],
      payload: {},
      id: 8,
    });
  });

  // Contract §2 "Order per record" replaced the fixed create → edit → delete order of wave 1.
  it('keeps arrival order across actions: delete then re-create, edit then delete', () => {
    const del = incoming({ entity: 'contacts', action: 'delete', id: 1 });
    const create = incoming({
      entity: 'contacts',
      action: 'create',
      data: { email: 'a@example.com' },
    });
    const edit = incoming({ entity: 'contacts', action: 'edit', id: 2, data: { city: 'Oslo' } });
    const del2 = incoming({ entity: 'contacts', action: 'delete', id: 2 });

    const chunks = planBatches([del, create, edit, del2], 200);

    expect(chunks.map((c) => [c.action, c.phase, c.items.map((i) => i.messageIds[0])])).toEqual([
      ['delete', 0, [del.messageId]],
      ['create', 1, [create.messageId]],
      ['edit', 2, [edit.messageId]],
      ['delete', 3, [del2.messageId]],
    ]);
  });

  it('lets independent records share a phase: edits and deletes of other ids, creates of other emails', () => {
    const events = [
      incoming({ entity: 'contacts', action: 'edit', id: 1, data: { city: 'A' } }),
      incoming({ entity: 'contacts', action: 'delete', id: 2 }),
      incoming({ entity: 'contacts', action: 'edit', id: 3, data: { city: 'B' } }),
      incoming({ entity: 'contacts', action: 'delete', id: 4 }),
      incoming({ entity: 'companies', action: 'create', data: { companyname: 'X' } }),
      incoming({ entity: 'contacts', action: 'create', data: { email: 'x@example.com' } }),
      incoming({ entity: 'contacts', action: 'create', data: { email: 'y@example.com' } }),
    ];

    expect(
      planBatches(events, 200).map((c) => [c.entity, c.action, c.phase, c.items.length]),
    ).toEqual([
      ['contacts', 'edit', 0, 2],
      ['contacts', 'delete', 1, 2],
      ['contacts', 'create', 2, 2],
      ['companies', 'create', 0, 1],
    ]);
  });

  it('sends a blank or zero after a value in a later call, not merged over it', () => {
    const first = incoming({
      entity: 'contacts',
      action: 'create',
      data: { email: 'a@example.com', firstname: 'Ann', points: 5 },
    });
    const second = incoming({
      entity: 'contacts',
      action: 'create',
      data: { email: 'a@example.com', firstname: '', points: 0 },
    });

    const chunks = planBatches([first, second], 200);

    expect(chunks.map((c) => [c.phase, c.items[0]?.payload])).toEqual([
      [0, first.event.data],
      [1, second.event.data],
    ]);
  });

  it('joins tags, and keeps apart what Mautic would not apply in order within one item', () => {
    const create = (data: Record<string, unknown>) =>
      incoming({ entity: 'contacts', action: 'create', data: { email: 'a@example.com', ...data } });
    const phases = (...events: ReturnType<typeof create>[]) =>
      planBatches(events, 200).map((c) => c.items[0]?.payload.tags);

    expect(
      phases(create({ tags: ['newsletter'] }), create({ tags: ['webinar', 'newsletter'] })),
    ).toEqual([['newsletter', 'webinar']]);
    expect(phases(create({ tags: ['a'] }), create({ tags: ['-a'] }))).toEqual([['a'], ['-a']]);
    expect(phases(create({ tags: ['-a'] }), create({ tags: ['a'] }))).toEqual([['-a'], ['a']]);
    expect(phases(create({ tags: ['a'] }), create({ tags: [' -a '] }))).toEqual([['a'], [' -a ']]);
    expect(phases(create({ tags: ['News'] }), create({ tags: ['news'] }))).toEqual([
      ['News'],
      ['news'],
    ]);
    expect(phases(create({ tags: 'a,b' }), create({ tags: ['c'] }))).toEqual(['a,b', ['c']]);
  });

  it('merges only what gives the sequential result', () => {
    const edit = (data: Record<string, unknown>) =>
      incoming({ entity: 'contacts', action: 'edit', id: 5, data });
    const itemsPerPhase = (...events: ReturnType<typeof edit>[]) =>
      planBatches(events, 200).map((c) => c.items[0]?.messageIds.length);

    // Different fields, blanks included: their union.
    expect(itemsPerPhase(edit({ firstname: 'A' }), edit({ city: '' }))).toEqual([2]);
    // A later event that sets every field of the item, with values, decides them all.
    expect(
      itemsPerPhase(edit({ firstname: 'A', city: '' }), edit({ firstname: 'B', city: 'C' })),
    ).toEqual([2]);
    // Part of an earlier event replaced, part not: the earlier one might have been refused.
    expect(itemsPerPhase(edit({ firstname: 'A', city: 'X' }), edit({ firstname: 'B' }))).toEqual([
      1, 1,
    ]);
    // overwriteWithBlank differs and a blank is involved.
    expect(
      itemsPerPhase(edit({ firstname: '' }), edit({ city: '', overwriteWithBlank: true })),
    ).toEqual([1, 1]);
    expect(
      itemsPerPhase(edit({ firstname: 'A' }), edit({ city: 'B', overwriteWithBlank: true })),
    ).toEqual([2]);
    // Operation keys and lists are never merged.
    expect(
      itemsPerPhase(edit({ firstname: 'A' }), edit({ doNotContact: [{ reason: 1 }] })),
    ).toEqual([1, 1]);
    expect(itemsPerPhase(edit({ companies: [3] }), edit({ firstname: 'A' }))).toEqual([1, 1]);
    // owner and stage as positive ids only.
    expect(itemsPerPhase(edit({ owner: 3 }), edit({ stage: '4' }))).toEqual([2]);
    expect(itemsPerPhase(edit({ owner: '' }), edit({ stage: 4 }))).toEqual([1, 1]);
  });

  it('orders a contact edit that sets the email with everything of the entity, alone in its phase', () => {
    const before = incoming({ entity: 'contacts', action: 'edit', id: 1, data: { city: 'A' } });
    const barrier = incoming({
      entity: 'contacts',
      action: 'edit',
      id: 2,
      data: { email: 'other@example.com' },
    });
    const after = incoming({ entity: 'contacts', action: 'edit', id: 3, data: { city: 'B' } });
    const same = incoming({ entity: 'contacts', action: 'edit', id: 2, data: { city: 'C' } });

    const chunks = planBatches([before, barrier, after, same], 200);

    expect(chunks.map((c) => c.items.map((i) => i.messageIds))).toEqual([
      [[before.messageId]],
      [[barrier.messageId]],
      [[after.messageId], [same.messageId]],
    ]);
  });

  it('delivers an event repeated in the batch (same eventId and content) once', () => {
    const first = incoming({ entity: 'companies', action: 'create', data: { companyname: 'X' } });
    const repeat = { messageId: 'repeat', event: { ...first.event } };
    const reused = {
      messageId: 'reused',
      event: { ...first.event, data: { companyname: 'Other' } },
    };

    const chunks = planBatches([first, repeat, reused], 200);

    expect(chunks.flatMap((c) => c.items.map((i) => i.messageIds))).toEqual([
      [first.messageId, 'repeat'],
      ['reused'],
    ]);
  });

  it('keeps a __proto__ key in the data as a plain field, merged or not', () => {
    const data = JSON.parse('{"email":"p@example.com","__proto__":{"polluted":true}}');
    const first = incoming({ entity: 'contacts', action: 'create', data });
    const scalar = JSON.parse('{"email":"q@example.com","firstname":"Q"}');
    const second = incoming({ entity: 'contacts', action: 'create', data: scalar });
    const third = incoming({
      entity: 'contacts',
      action: 'create',
      data: JSON.parse('{"email":"q@example.com","__proto__":"x"}'),
    });

    const [payload, merged] = (planBatches([first, second, third], 200)[0]?.items ?? []).map(
      (item) => item.payload,
    );

    expect(Object.getPrototypeOf(payload)).toBe(Object.prototype);
    expect(JSON.stringify(payload)).toContain('"__proto__":{"polluted":true}');
    expect(Object.getPrototypeOf(merged)).toBe(Object.prototype);
    expect(JSON.stringify(merged)).toContain('"__proto__":"x"');
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
