import { describe, expect, it } from 'vitest';
import { type Chunk, planBatches } from '../../../functions/core/delivery/batch-plan.ts';
import { recordKey } from '../../../functions/core/events.ts';
import { incoming } from '../../support/events.ts';

const phases = (chunks: Chunk[]) =>
  chunks.map((chunk) => ({
    action: chunk.action,
    messages: chunk.items.flatMap((i) => i.messageIds),
  }));

describe('planning contacts named by match and the integrator actions (contract §5)', () => {
  it('keys a contact named by match.email like a create of that email, case and spaces aside', () => {
    expect(recordKey({ entity: 'contacts', action: 'edit', match: { email: ' Ann@X.com ' } })).toBe(
      'email ann@x.com',
    );
    expect(recordKey({ entity: 'contacts', action: 'create', data: { email: 'ann@x.com' } })).toBe(
      'email ann@x.com',
    );
    expect(recordKey({ entity: 'contacts', action: 'addPoints', match: { crm_id: 'AB-1' } })).toBe(
      'crm_id ab-1',
    );
    expect(recordKey({ entity: 'contacts', action: 'addToSegment', id: 7 })).toBe('id 7');
  });

  it('puts a create, then actions on the created contact by match, in phases in arrival order', () => {
    const create = incoming({ entity: 'contacts', action: 'create', data: { email: 'a@x.com' } });
    const join = incoming({
      entity: 'contacts',
      action: 'addToSegment',
      match: { email: 'A@x.com' },
      segmentId: 3,
    });
    const points = incoming({
      entity: 'contacts',
      action: 'addPoints',
      match: { email: 'a@x.com' },
      points: 5,
    });
    const remove = incoming({ entity: 'contacts', action: 'delete', match: { email: 'a@x.com' } });

    expect(phases(planBatches([create, join, points, remove], 200))).toEqual([
      { action: 'create', messages: [create.messageId] },
      { action: 'addToSegment', messages: [join.messageId] },
      { action: 'addPoints', messages: [points.messageId] },
      { action: 'delete', messages: [remove.messageId] },
    ]);
  });

  it('shares one phase between different contacts and segments, and never merges two actions of one contact', () => {
    const a = incoming({
      entity: 'contacts',
      action: 'addToSegment',
      match: { email: 'a@x.com' },
      segmentId: 1,
    });
    const b = incoming({
      entity: 'contacts',
      action: 'addToSegment',
      match: { email: 'b@x.com' },
      segmentId: 2,
    });
    const again = incoming({
      entity: 'contacts',
      action: 'addToSegment',
      match: { email: 'a@x.com' },
      segmentId: 2,
    });

    const chunks = planBatches([a, b, again], 200);

    expect(phases(chunks)).toEqual([
      { action: 'addToSegment', messages: [a.messageId, b.messageId] },
      { action: 'addToSegment', messages: [again.messageId] },
    ]);
    expect(chunks[0]?.items.map((item) => item.fields?.segmentId)).toEqual([1, 2]);
  });

  it('orders a contact named by id after one named by match, and the other way round: they may be one contact', () => {
    const byMatch = incoming({
      entity: 'contacts',
      action: 'edit',
      match: { email: 'a@x.com' },
      data: { city: 'A' },
    });
    const byId = incoming({ entity: 'contacts', action: 'edit', id: 5, data: { city: 'B' } });
    const matchAgain = incoming({
      entity: 'contacts',
      action: 'delete',
      match: { email: 'b@x.com' },
    });
    // Without the rule the delete by id would join the first delete phase, before the edit.
    const first = incoming({ entity: 'contacts', action: 'delete', id: 9 });

    expect(phases(planBatches([first, byMatch, byId, matchAgain], 200))).toEqual([
      { action: 'delete', messages: [first.messageId] },
      { action: 'edit', messages: [byMatch.messageId] },
      { action: 'edit', messages: [byId.messageId] },
      { action: 'delete', messages: [matchAgain.messageId] },
    ]);
  });

  it('orders events naming contacts by two different match fields: they may be one contact', () => {
    const first = incoming({ entity: 'contacts', action: 'delete', match: { email: 'z@x.com' } });
    const byEmail = incoming({
      entity: 'contacts',
      action: 'edit',
      match: { email: 'a@x.com' },
      data: { city: 'A' },
    });
    const byCrm = incoming({ entity: 'contacts', action: 'delete', match: { crm_id: 'c1' } });

    expect(phases(planBatches([first, byEmail, byCrm], 200))).toEqual([
      { action: 'delete', messages: [first.messageId] },
      { action: 'edit', messages: [byEmail.messageId] },
      { action: 'delete', messages: [byCrm.messageId] },
    ]);
  });

  it('makes an edit of a field that a match of the batch names a barrier, as an edit of email is', () => {
    const before = incoming({
      entity: 'contacts',
      action: 'addToSegment',
      match: { crm_id: 'c2' },
      segmentId: 1,
    });
    const rename = incoming({ entity: 'contacts', action: 'edit', id: 4, data: { crm_id: 'c2' } });
    const after = incoming({
      entity: 'contacts',
      action: 'addToSegment',
      match: { crm_id: 'c2' },
      segmentId: 1,
    });

    const chunks = planBatches([before, rename, after], 200);

    expect(chunks[1]?.items[0]?.record.barrier).toBe(true);
    expect(phases(chunks).map((phase) => phase.action)).toEqual([
      'addToSegment',
      'edit',
      'addToSegment',
    ]);
  });

  it('merges edits of one contact named by match, and carries the reference, not an id', () => {
    const one = incoming({
      entity: 'contacts',
      action: 'edit',
      match: { email: 'a@x.com' },
      data: { city: 'A' },
    });
    const two = incoming({
      entity: 'contacts',
      action: 'edit',
      match: { email: 'A@X.COM' },
      data: { zipcode: '1' },
    });

    const [chunk] = planBatches([one, two], 200);

    expect(chunk?.items).toHaveLength(1);
    expect(chunk?.items[0]).toMatchObject({
      match: { field: 'email', value: 'a@x.com' },
      payload: { city: 'A', zipcode: '1' },
    });
    expect(chunk?.items[0]?.id).toBeUndefined();
    expect(chunk?.items[0]?.payload).not.toHaveProperty('id');
  });

  it('gives Do Not Contact events the reason code Mautic takes, 0 to lift', () => {
    const add = incoming({
      entity: 'contacts',
      action: 'addDoNotContact',
      id: 1,
      reason: 'unsubscribed',
      comments: 'by mail',
    });
    const manual = incoming({
      entity: 'contacts',
      action: 'addDoNotContact',
      id: 2,
      channel: 'sms',
    });
    const lift = incoming({ entity: 'contacts', action: 'removeDoNotContact', id: 3 });

    const items = planBatches([add, manual, lift], 200).flatMap((chunk) => chunk.items);

    expect(items.map((item) => item.fields?.doNotContact)).toEqual([
      { channel: 'email', reason: 1, comments: 'by mail' },
      { channel: 'sms', reason: 3 },
      { channel: 'email', reason: 0 },
    ]);
  });

  it('keys addPoints in the ledger by sender and event id, hashed', () => {
    const points = (sender: string, eventId: string) =>
      planBatches(
        [
          {
            messageId: `${sender}/${eventId}`,
            event: {
              ...incoming({ entity: 'contacts', action: 'addPoints', id: 1, points: 2 }).event,
              sender,
              eventId,
            },
          },
        ],
        200,
      )[0]?.items[0]?.ledgerKey;

    expect(points('shop', 'order-1')).toBe(points('shop', 'order-1'));
    expect(points('shop', 'order-1')).not.toBe(points('crm', 'order-1'));
    expect(points('a/b', 'c')).not.toBe(points('a', 'b/c'));
    expect(points('shop', 'order-1')).toMatch(/^addPoints [0-9a-f]{64}$/);
  });

  it('folds the same event delivered twice by the queue into one item, whatever its key order', () => {
    const first = incoming({
      entity: 'contacts',
      action: 'addPoints',
      match: { email: 'a@x.com' },
      points: 3,
    });
    const { points, match, ...rest } = first.event;
    const twice = { messageId: 'twice', event: { ...rest, points, match } };

    const chunks = planBatches([first, twice], 200);

    expect(chunks.flatMap((chunk) => chunk.items.map((item) => item.messageIds))).toEqual([
      [first.messageId, 'twice'],
    ]);
  });
});
