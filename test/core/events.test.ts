import { describe, expect, it } from 'vitest';
import {
  describeIssues,
  queuedEventSchema,
  relayEventSchema,
} from '../../functions/core/events.ts';

const queued = (event: Record<string, unknown>) => ({
  v: 1,
  eventId: 'wh_1:0',
  receivedAt: '2026-11-21T00:00:00.000Z',
  sender: 'webhook',
  ...event,
});

describe('relayEventSchema', () => {
  it.each([
    [{ entity: 'contacts', action: 'create', data: { email: 'a@example.com' } }],
    [{ entity: 'contacts', action: 'edit', id: 5, data: { firstname: 'A' } }],
    [{ entity: 'contacts', action: 'delete', id: 5 }],
    [{ entity: 'companies', action: 'create', data: { companyname: 'Acme' } }],
    [{ entity: 'segments', action: 'create', data: { name: 'VIP' }, eventId: 'x'.repeat(128) }],
    [{ entity: 'segments', action: 'create', data: { name: 'VIP' }, eventId: '😀'.repeat(64) }],
    [{ entity: 'tags', action: 'create', data: { tag: 'a' }, eventId: 'order #1042 / café ✓' }],
  ])('accepts %j', (event) => {
    expect(relayEventSchema().safeParse(event).success).toBe(true);
  });

  it.each([
    [{ entity: 'Contacts', action: 'create', data: {} }, 'entity'],
    [{ entity: 'c', action: 'create', data: {} }, 'entity'],
    [{ entity: 'contacts/batch', action: 'create', data: {} }, 'entity'],
    [{ entity: 'contacts', action: 'upsert', data: {} }, 'action'],
    [{ entity: 'companies', action: 'create' }, 'data'],
    [{ entity: 'contacts', action: 'edit', data: { firstname: 'A' } }, 'match'],
    [{ entity: 'companies', action: 'edit', data: { companyname: 'A' } }, 'id'],
    [{ entity: 'contacts', action: 'delete' }, 'match'],
    [{ entity: 'companies', action: 'delete' }, 'id'],
    [{ entity: 'contacts', action: 'delete', id: 0 }, 'id'],
    [{ entity: 'contacts', action: 'delete', id: 1.5 }, 'id'],
    [{ entity: 'contacts', action: 'delete', id: '5' }, 'id'],
    [{ entity: 'contacts', action: 'create', data: { firstname: 'no email' } }, 'data.email'],
    [{ entity: 'contacts', action: 'create', data: { email: 'not-an-email' } }, 'data.email'],
    [{ entity: 'contacts', action: 'edit', id: 1, data: { email: 42 } }, 'data.email'],
    [{ entity: 'contacts', action: 'create', data: [] }, 'data'],
    [
      {
        entity: 'contacts',
        action: 'create',
        data: { email: 'a@example.com' },
        eventId: 'x'.repeat(129),
      },
      'eventId',
    ],
  ])('rejects %j at %s', (event, path) => {
    const result = relayEventSchema().safeParse(event);

    expect(result.success).toBe(false);
    expect(result.error?.issues.map((issue) => issue.path.join('.'))).toContain(path);
  });
});

describe('queuedEventSchema', () => {
  it('accepts the version 1 envelope and refuses another version', () => {
    expect(
      queuedEventSchema().safeParse(queued({ entity: 'contacts', action: 'delete', id: 3 }))
        .success,
    ).toBe(true);
    expect(
      queuedEventSchema().safeParse({
        ...queued({ entity: 'contacts', action: 'delete', id: 3 }),
        v: 2,
      }).success,
    ).toBe(false);
  });

  it('reads an event id the ingest would refuse now: one queued before the rule is delivered', () => {
    const old = queued({ entity: 'contacts', action: 'delete', id: 3, eventId: 'a\u0001\ud800' });

    expect(queuedEventSchema().safeParse(old).success).toBe(true);
  });

  it('applies the same field rules as the ingest schema', () => {
    const result = queuedEventSchema().safeParse(
      queued({ entity: 'contacts', action: 'create', data: { email: 'x' } }),
    );

    expect(result.success).toBe(false);
  });

  it('lets an edit carry a blank email, which Mautic skips (or clears under overwriteWithBlank); a create may not', () => {
    const event = (action: 'create' | 'edit', email: unknown) =>
      queuedEventSchema().safeParse(
        queued({
          entity: 'contacts',
          action,
          ...(action === 'edit' ? { id: 7 } : {}),
          data: { email },
        }),
      ).success;

    expect([
      event('edit', ''),
      event('edit', null),
      event('create', ''),
      event('create', null),
    ]).toEqual([true, true, false, false]);
  });

  it('describes issues by path and message without echoing values', () => {
    const result = queuedEventSchema().safeParse(
      queued({ entity: 'contacts', action: 'create', data: { email: 'secret-looking-value' } }),
    );

    expect(result.error && describeIssues(result.error)).toBe(
      'data.email: must be a valid email address',
    );
  });
});
