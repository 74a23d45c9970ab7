/**
 * Partial failures at the delivery's level, against the simulator over real HTTP: a create Mautic may
 * have saved before a 5xx is never sent again; a time Mautic names (a rate limit's reset, a
 * 503's Retry-After) is waited for, never called before; one item that fails every call it is
 * in is narrowed down so the others are delivered.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { planBatches } from '../../../functions/core/delivery/batch-plan.ts';
import { deliverChunks } from '../../../functions/core/delivery/delivery.ts';
import {
  DEFAULT_DELIVERY_OPTIONS,
  type DeliveryDeps,
} from '../../../functions/core/delivery/delivery-calls.ts';
import type { MessageOutcome } from '../../../functions/core/delivery/failure-policy.ts';
import type { QueuedEvent } from '../../../functions/core/events.ts';
import { MauticApiClient } from '../../../functions/core/mautic/mautic-api.ts';
import { type MauticSimulator, startMauticSimulator } from '../../../mautic-simulator/server.ts';
import { InMemoryActionLedger } from '../../support/action-ledger.ts';
import { incoming } from '../../support/events.ts';
import { recorder } from '../../support/observe.ts';

const START = Date.parse('2026-11-21T00:00:00Z');
let now = START;
let sim: MauticSimulator;
let deps: DeliveryDeps;
let sleeps: number[];
const observed = recorder();

type Event = Pick<QueuedEvent, 'entity' | 'action'> & Partial<QueuedEvent>;

async function deliver(events: Event[], deadlineMs = 60_000) {
  const chunks = planBatches(events.map(incoming), 200);
  const ids = chunks.flatMap((c) => c.items.flatMap((item) => item.messageIds));
  const outcomes = await deliverChunks(chunks, now + deadlineMs, deps, DEFAULT_DELIVERY_OPTIONS);
  return ids.map((id) => outcomes.get(id) as MessageOutcome);
}

const apiCalls = (path?: string) =>
  sim.requests.filter((r) => r.path.startsWith('/api/') && (path === undefined || r.path === path));

beforeEach(async () => {
  now = START;
  sleeps = [];
  observed.clear();
  sim = await startMauticSimulator({ now: () => now });
  const token = sim.issueToken().accessToken;
  deps = {
    api: new MauticApiClient({ baseUrl: sim.url, fetch, now: () => now }),
    tokens: { accessToken: async () => token },
    logger: observed.logger,
    metrics: observed.metrics,
    clock: { now: () => now },
    sleep: async (ms) => {
      sleeps.push(ms);
      now += ms;
    },
    random: () => 0.5,
    learnedLimit: { value: undefined },
    ledger: new InMemoryActionLedger(),
  };
});

afterEach(async () => {
  await sim.close();
});

const company = (name: string): Event => ({
  entity: 'companies',
  action: 'create',
  data: { companyname: name },
});

/** A create Mautic neither upserts nor refuses as a duplicate: a segment. */
const segment = (name: string): Event => ({
  entity: 'segments',
  action: 'create',
  data: { name, alias: name.toLowerCase() },
});

describe('a create Mautic may have saved before a 5xx (no doubling)', () => {
  it.each([500, 502, 503, 504])(
    'dead-letters every create of an entity Mautic does not upsert after a whole-call %i, and never sends it again',
    async (status) => {
      sim.inject({ path: '/api/segments/batch/new' }, { status, body: '' }, 5);

      const outcomes = await deliver([segment('Buyers'), segment('Leads')]);

      expect(outcomes).toEqual([
        expect.objectContaining({ kind: 'rejected', reason: 'ambiguous_result' }),
        expect.objectContaining({ kind: 'rejected', reason: 'ambiguous_result' }),
      ]);
      expect(apiCalls('/api/segments/batch/new')).toHaveLength(1);
    },
  );

  it('sends a company create again after a 5xx on Mautic 5 (the version its answers named): a repeat cannot double it', async () => {
    deps.mauticVersion = { value: '5.1.1' };
    sim.inject({ path: '/api/companies/batch/new' }, { status: 502, body: '' }, 1);

    const outcomes = await deliver([company('Acme')]);

    expect(outcomes.map((o) => o.kind)).toEqual(['delivered']);
    expect(apiCalls('/api/companies/batch/new')).toHaveLength(2);
  });

  it('dead-letters the repeat of a company create Mautic applied but answered unreadably as duplicate: one company', async () => {
    deps.mauticVersion = { value: '5.1.1' };
    sim.failAfterApply({ path: '/api/companies/batch/new' }, 'garble');

    const [outcome] = await deliver([company('Acme')]);

    expect(outcome).toMatchObject({ kind: 'rejected', reason: 'duplicate', status: 422 });
    expect(sim.records('companies').filter((c) => c.companyname === 'Acme')).toHaveLength(1);
  });

  it('does not repeat a company create when Mautic named no version, or one the relay does not know', async () => {
    for (const mauticVersion of [{}, { value: '8.0.0' }]) {
      deps.mauticVersion = mauticVersion;
      sim.inject({ path: '/api/companies/batch/new' }, { status: 502, body: '' }, 1);

      const [outcome] = await deliver([company(`Acme ${mauticVersion.value ?? 'unknown'}`)]);

      expect(outcome).toMatchObject({ kind: 'rejected', reason: 'ambiguous_result' });
    }
  });

  it('still retries a 503 that says when to come back (the server took no request)', async () => {
    sim.inject(
      { path: '/api/companies/batch/new' },
      { status: 503, headers: { 'retry-after': '3' }, body: '' },
    );

    const outcomes = await deliver([company('Acme')]);

    expect(outcomes.map((o) => o.kind)).toEqual(['delivered']);
    // It waited the 3 s Mautic named inside the invocation, then called again.
    expect(sleeps).toEqual([3_000]);
    expect(apiCalls('/api/companies/batch/new')).toHaveLength(2);
  });

  it('dead-letters a create whose own item answered 5xx, and delivers the rest of the call', async () => {
    sim.inject(
      { path: '/api/segments/batch/new' },
      {
        status: 201,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          lists: { 1: { id: 7, name: 'Leads', alias: 'leads' } },
          statusCodes: [500, 201],
          errors: { 0: { code: 500, message: 'Looks like I encountered an error', type: null } },
        }),
      },
    );

    const outcomes = await deliver([segment('Buyers'), segment('Leads')]);

    expect(outcomes).toEqual([
      {
        kind: 'rejected',
        reason: 'ambiguous_result',
        message:
          'Mautic may have created this record; it answered 500 for this item (Looks like I encountered an error)',
      },
      expect.objectContaining({ kind: 'delivered' }),
    ]);
  });

  it('sends a contact create with an email again after a 5xx: Mautic upserts it by email', async () => {
    sim.inject({ path: '/api/contacts/batch/new' }, { status: 500, body: '' }, 1);

    const outcomes = await deliver([
      { entity: 'contacts', action: 'create', data: { email: 'ann@example.com' } },
    ]);

    expect(outcomes.map((o) => o.kind)).toEqual(['delivered']);
    expect(sim.records('contacts').filter((c) => c.email === 'ann@example.com')).toHaveLength(1);
  });
});

describe('a time Mautic names (rate limit, Retry-After)', () => {
  it('waits for a near reset inside the invocation, and no call of the run starts before it', async () => {
    sim.setRateLimit({ limit: 1, windowSeconds: 4 });
    const events: Event[] = [
      ...Array.from({ length: 3 }, (_, i) => company(`Co ${i}`)),
      { entity: 'contacts', action: 'create', data: { email: 'ann@example.com' } },
    ];

    const outcomes = await deliver(events.slice(0, 3), 60_000);
    const second = await deliver(events.slice(3), 60_000);

    expect([...outcomes, ...second].map((o) => o.kind)).toEqual([
      'delivered',
      'delivered',
      'delivered',
      'delivered',
    ]);
    // Each call after the first waited for the window's reset, none went earlier.
    const calls = apiCalls();
    const limited = calls.filter((call) => call.status === 429);
    expect(limited.length).toBeLessThan(calls.length - limited.length);
    // Every call after a 429 starts at or after the reset it named (windows of 4 s from START).
    calls.forEach((call, i) => {
      const before = calls.slice(0, i).filter((earlier) => earlier.status === 429);
      const last = before.at(-1);
      if (last !== undefined) {
        const reset = START + (Math.floor((last.at - START) / 4_000) + 1) * 4_000;
        expect(call.at).toBeGreaterThanOrEqual(reset);
      }
    });
  });

  it('never loops on a time already past: a call waits at most three times, then goes back to the queue', async () => {
    sim.inject(
      { path: '/api/companies/batch/new' },
      { status: 503, headers: { 'retry-after': 'Thu, 01 Jan 2026 00:00:00 GMT' }, body: '' },
      1_000,
    );

    const outcomes = await deliver([company('Acme')]);

    expect(outcomes).toEqual([expect.objectContaining({ kind: 'retry', reason: 'rate_limited' })]);
    expect(apiCalls('/api/companies/batch/new').length).toBeLessThanOrEqual(4);
  });

  it('makes no call before a time Mautic named in an earlier run of the same container', async () => {
    deps.namedPause = {};
    sim.setRateLimit({ limit: 1, windowSeconds: 3600 });
    await deliver([company('First')]);
    await deliver([company('Second')]);
    const calls = apiCalls().length;

    const third = await deliver([company('Third')]);

    expect(third).toEqual([
      expect.objectContaining({
        kind: 'retry',
        reason: 'rate_limited',
        notBefore: START + 3_600_000,
      }),
    ]);
    expect(apiCalls().length).toBe(calls);
  });

  it('sends the events back to the queue until a reset further off than the run may wait, and makes no call before it', async () => {
    sim.setRateLimit({ limit: 1, windowSeconds: 3600 });
    await deliver([company('First')]);
    const before = apiCalls().length;

    const outcomes = await deliver([company('A'), company('B')]);

    expect(outcomes).toEqual([
      expect.objectContaining({
        kind: 'retry',
        reason: 'rate_limited',
        notBefore: START + 3_600_000,
      }),
      expect.objectContaining({
        kind: 'retry',
        reason: 'rate_limited',
        notBefore: START + 3_600_000,
      }),
    ]);
    // One call learned the reset; none followed it.
    expect(apiCalls().length - before).toBe(1);
  });
});

describe('one bad item never holds a batch hostage', () => {
  it('narrows a whole-call 5xx down to the item that causes it; the others are delivered in the same run', async () => {
    const contacts = Array.from({ length: 16 }, (_, i) =>
      sim.seed('contacts', { email: `c${i}@example.com` }),
    );
    const poisoned = contacts[11]?.id as number;
    sim.poison({ path: '/api/contacts/batch/edit' }, 'id', poisoned);

    const outcomes = await deliver(
      contacts.map((contact) => ({
        entity: 'contacts',
        action: 'edit',
        id: contact.id,
        data: { firstname: 'Renamed' },
      })),
    );

    expect(outcomes.map((o) => o.kind)).toEqual(
      contacts.map((contact) => (contact.id === poisoned ? 'retry' : 'delivered')),
    );
    expect(outcomes[11]).toMatchObject({ reason: 'mautic_server', status: 500 });
    // Two tries of the whole call, then a try of each half of each narrowed part: 2 + 2 × 4.
    const edits = apiCalls('/api/contacts/batch/edit');
    expect(edits.length).toBeLessThanOrEqual(10);
    expect(sim.records('contacts').filter((c) => c.firstname === 'Renamed')).toHaveLength(15);
  });

  it('narrows down two bad items in different halves too: the other 14 are delivered', async () => {
    const contacts = Array.from({ length: 16 }, (_, i) =>
      sim.seed('contacts', { email: `c${i}@example.com` }),
    );
    const bad = [contacts[2]?.id, contacts[13]?.id] as number[];
    for (const id of bad) sim.poison({ path: '/api/contacts/batch/edit' }, 'id', id);

    const outcomes = await deliver(
      contacts.map((contact) => ({
        entity: 'contacts',
        action: 'edit',
        id: contact.id,
        data: { firstname: 'Renamed' },
      })),
    );

    expect(outcomes.map((o) => o.kind)).toEqual(
      contacts.map((contact) => (bad.includes(contact.id) ? 'retry' : 'delivered')),
    );
  });

  it('stops narrowing when every part of a level fails: Mautic fails every call, not one item', async () => {
    sim.inject({ path: '/api/contacts/batch/edit' }, { status: 500, body: '' }, 100);
    const contacts = Array.from({ length: 16 }, (_, i) =>
      sim.seed('contacts', { email: `c${i}@example.com` }),
    );

    const outcomes = await deliver(
      contacts.map((contact) => ({
        entity: 'contacts',
        action: 'edit',
        id: contact.id,
        data: { firstname: 'X' },
      })),
    );

    expect(new Set(outcomes.map((o) => o.kind))).toEqual(new Set(['retry']));
    // Two tries of the call, its two halves, their four quarters: then it stops.
    expect(apiCalls('/api/contacts/batch/edit')).toHaveLength(8);
  });
});
