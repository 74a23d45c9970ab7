/**
 * One canonical form per contact reference: the record key (the FIFO group), the lookup sent to
 * Mautic and the check of what comes back all use the address Mautic stores (its cleaning, then
 * an ASCII-only case fold), so an address that JavaScript's `toLowerCase()` or SQL's collation
 * folds into another contact's never acts on that contact. Through the real client against the
 * simulator, whose `in` lookup compares as MySQL's utf8mb4_unicode_ci does (U+212A KELVIN SIGN
 * equals K there).
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { planBatches } from '../../../functions/core/delivery/batch-plan.ts';
import { deliverChunks } from '../../../functions/core/delivery/delivery.ts';
import type { DeliveryDeps } from '../../../functions/core/delivery/delivery-calls.ts';
import type { MessageOutcome } from '../../../functions/core/delivery/failure-policy.ts';
import { canonicalEmail } from '../../../functions/core/email-address.ts';
import { type QueuedEvent, recordKey } from '../../../functions/core/events.ts';
import { MauticApiClient } from '../../../functions/core/mautic/mautic-api.ts';
import { type MauticSimulator, startMauticSimulator } from '../../../mautic-simulator/server.ts';
import { InMemoryActionLedger } from '../../support/action-ledger.ts';
import { incoming } from '../../support/events.ts';
import { recorder } from '../../support/observe.ts';

const KELVIN = '\u212Aate@example.com';

let sim: MauticSimulator;
let token: string;
let now = Date.parse('2026-11-25T00:00:00Z');

beforeEach(async () => {
  sim = await startMauticSimulator({ now: () => now });
  token = sim.issueToken().accessToken;
});

afterEach(async () => {
  await sim.close();
});

function deps(): DeliveryDeps {
  const observed = recorder();
  return {
    api: new MauticApiClient({ baseUrl: sim.url, fetch }),
    ledger: new InMemoryActionLedger(),
    tokens: { accessToken: async () => token },
    logger: observed.logger,
    metrics: observed.metrics,
    clock: { now: () => now },
    sleep: async (ms) => {
      now += ms;
    },
    random: () => 0.5,
    learnedLimit: { value: undefined },
  };
}

type EventInput = Pick<QueuedEvent, 'entity' | 'action'> & Partial<QueuedEvent>;

/** Delivers events as the batch function reads them from the queue (queued before any rule). */
async function deliver(events: EventInput[]): Promise<MessageOutcome[]> {
  const messages = events.map((event) => incoming(event));
  const outcomes = await deliverChunks(planBatches(messages, 200), now + 60_000, deps());
  return messages.map((m) => outcomes.get(m.messageId) as MessageOutcome);
}

describe('canonicalEmail', () => {
  it.each([
    ['the address Mautic stores, folded in ASCII only', 'Ann@Example.COM', 'ann@example.com'],
    ['surrounding white space dropped, as cleaning does', '  ann@example.com\t', 'ann@example.com'],
    ['a KELVIN SIGN dropped by cleaning, never folded into k', KELVIN, 'ate@example.com'],
    ['angle brackets dropped', '<ann@example.com>', 'ann@example.com'],
    ['a zero-width space dropped', 'ann@example.com\u200B', 'ann@example.com'],
    ['a trailing semicolon dropped', 'ann@example.com;', 'ann@example.com'],
    [
      'a dotless capital I left alone, not folded into i',
      'ann@\u0130nfo.example',
      'ann@nfo.example',
    ],
  ])('gives %s: %s', (_, address, canonical) => {
    expect(canonicalEmail(address)).toBe(canonical);
  });
});

describe('the record key (the message group) of a contact', () => {
  it('keys a look-alike address as the address Mautic makes of it, never as the contact it folds into', () => {
    const lookAlike = recordKey({ entity: 'contacts', action: 'delete', match: { email: KELVIN } });
    const created = recordKey({ entity: 'contacts', action: 'create', data: { email: KELVIN } });

    expect(lookAlike).toBe('email ate@example.com');
    expect(created).toBe(lookAlike);
    expect(lookAlike).not.toBe(
      recordKey({ entity: 'contacts', action: 'delete', match: { email: 'kate@example.com' } }),
    );
  });

  it('keys a create with an address Mautic cleans in the group of the address it updates', () => {
    const plain = recordKey({
      entity: 'contacts',
      action: 'create',
      data: { email: 'ann@example.com' },
    });
    for (const address of ['<ann@example.com>', 'ann@example.com\u200B', 'ann@example.com;']) {
      expect(recordKey({ entity: 'contacts', action: 'create', data: { email: address } })).toBe(
        plain,
      );
    }
  });
});

describe('resolving a queued reference (an envelope written before the ingest refused these)', () => {
  it('never deletes or adds points to kate@example.com for \\u212Aate@example.com', async () => {
    const kate = sim.seed('contacts', { email: 'kate@example.com', points: 0 });

    const outcomes = await deliver([
      { entity: 'contacts', action: 'addPoints', match: { email: KELVIN }, points: 10 },
      { entity: 'contacts', action: 'delete', match: { email: KELVIN } },
    ]);

    expect(outcomes[0]).toMatchObject({ kind: 'rejected', reason: 'no_match' });
    // Nobody has the address Mautic would store: a delete of nobody is done.
    expect(outcomes[1]).toMatchObject({ kind: 'delivered' });
    expect(sim.records('contacts')).toEqual([
      expect.objectContaining({ id: kate.id, email: 'kate@example.com', points: 0 }),
    ]);
    const lookup = sim.requests.find((r) => r.method === 'GET' && r.path === '/api/contacts');
    expect(new URLSearchParams(lookup?.query ?? '').get('where[0][val]')).toBe('ate@example.com');
  });

  it('acts on the contact a create with a cleaned address updated, as Mautic stores it', async () => {
    const ann = sim.seed('contacts', { email: 'ann@example.com' });
    const segment = sim.seed('segments', { name: 'S', alias: 's', isPublished: true });

    const outcomes = await deliver(
      ['<ann@example.com>', 'ann@example.com\u200B', 'ann@example.com;'].map((email) => ({
        entity: 'contacts',
        action: 'addToSegment',
        match: { email },
        segmentId: segment.id,
      })),
    );

    expect(outcomes.map((o) => o.kind)).toEqual(['delivered', 'delivered', 'delivered']);
    expect(outcomes[0]).toMatchObject({ id: ann.id });
  });

  it('refuses a contact whose stored value differs in anything but ASCII case, whatever SQL folds', async () => {
    // Mautic's collation folds these into the value looked up; the answer is scripted here.
    const listed = (id: number, crm: string) => ({ id, fields: { all: { id, crm_id: crm } } });
    sim.inject(
      { method: 'GET', path: '/api/contacts' },
      {
        status: 200,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          total: '3',
          contacts: {
            4: listed(4, '\u212A-1'),
            5: listed(5, 'K-1'),
            6: listed(6, '\u0130D-2'),
          },
        }),
      },
    );

    const found = await deps().api.findContacts('crm_id', ['k-1', 'id-2', 'ıd-2'], {
      accessToken: token,
    });

    expect(found).toEqual(
      new Map([
        ['k-1', [5]],
        ['id-2', []],
        ['ıd-2', []],
      ]),
    );
  });
});

describe('values Mautic’s `where … in` lookup splits (str_getcsv with its backslash escape)', () => {
  it('finds a contact whose value holds a backslash before a quote, and only that one', async () => {
    const odd = sim.seed('contacts', { email: 'odd@example.com', crm_id: 'x\\",K-2' });
    sim.seed('contacts', { email: 'other@example.com', crm_id: 'K-2' });
    const plain = sim.seed('contacts', { email: 'plain@example.com', crm_id: 'C-3' });

    const found = await deps().api.findContacts('crm_id', ['x\\",K-2', 'c-3'], {
      accessToken: token,
    });

    expect(found).toEqual(
      new Map([
        ['x\\",k-2', [odd.id]],
        ['c-3', [plain.id]],
      ]),
    );
  });

  it('finds a value Mautic HTML-encodes and decodes again on the way (quotes, ampersands, an entity)', async () => {
    const odd = sim.seed('contacts', { email: 'oh@example.com', crm_id: `O'Hara &amp; <Co>` });

    const found = await deps().api.findContacts('crm_id', [`O'Hara &amp; <Co>`], {
      accessToken: token,
    });

    expect(found).toEqual(new Map([[`o'hara &amp; <co>`, [odd.id]]]));
  });

  it('never quotes a canonical email: cleaning leaves no comma, quote or backslash', () => {
    for (const address of ['"a,b"@example.com', 'a\\"b@example.com', 'a,b@example.com']) {
      expect(canonicalEmail(address)).not.toMatch(/[",\\]/);
    }
  });
});
