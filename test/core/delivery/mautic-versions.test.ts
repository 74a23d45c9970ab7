/**
 * The delivery against each Mautic line the simulator plays (docs/mautic.md §8), through the
 * real client over HTTP, Mautic's version learned as the batch function learns it: from the
 * `Mautic-Version` of its API answers, never guessed. A company create whose answer was lost is
 * sent again where no line can double it; an email a user has open is retried; company links go
 * in bulk on 7, split to Mautic's limit on its 400, one call per pair elsewhere.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { planBatches } from '../../../functions/core/delivery/batch-plan.ts';
import { deliverChunks } from '../../../functions/core/delivery/delivery.ts';
import type { DeliveryDeps } from '../../../functions/core/delivery/delivery-calls.ts';
import type { MessageOutcome } from '../../../functions/core/delivery/failure-policy.ts';
import type { QueuedEvent } from '../../../functions/core/events.ts';
import { MauticApiClient } from '../../../functions/core/mautic/mautic-api.ts';
import { type MauticSimulator, startMauticSimulator } from '../../../mautic-simulator/server.ts';
import { InMemoryActionLedger } from '../../support/action-ledger.ts';
import { incoming } from '../../support/events.ts';
import { recorder } from '../../support/observe.ts';

type Event = Pick<QueuedEvent, 'entity' | 'action'> & Partial<QueuedEvent>;

const START = Date.parse('2026-12-01T00:00:00Z');
/** A delivered outcome names the Mautic call that carried it, as that call's log line does. */
const call = { id: expect.any(String), at: expect.any(Number) };
const running: MauticSimulator[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((sim) => sim.close()));
});

/** A simulator of one line and a delivery as the batch function composes it (compose.ts). */
async function relayTo(mauticVersion: string, options: { batchMaxLimit?: number } = {}) {
  let now = START;
  const sim = await startMauticSimulator({ mauticVersion, now: () => now, ...options });
  running.push(sim);
  const token = sim.issueToken().accessToken;
  const observed = recorder();
  const version: { value?: string } = {};
  const deps: DeliveryDeps = {
    api: new MauticApiClient({
      baseUrl: sim.url,
      fetch,
      now: () => now,
      onVersion: (named) => {
        version.value = named;
      },
    }),
    tokens: { accessToken: async () => token },
    logger: observed.logger,
    metrics: observed.metrics,
    clock: { now: () => now },
    sleep: async (ms) => {
      now += ms;
    },
    random: () => 0.5,
    learnedLimit: { value: undefined },
    ledger: new InMemoryActionLedger(),
    mauticVersion: version,
  };
  const deliver = async (events: Event[]): Promise<MessageOutcome[]> => {
    const messages = events.map((event) => incoming(event));
    const outcomes = await deliverChunks(planBatches(messages, 200), now + 60_000, deps);
    return messages.map((message) => outcomes.get(message.messageId) as MessageOutcome);
  };
  const calls = (path: string | RegExp) =>
    sim.requests.filter((r) => (typeof path === 'string' ? r.path === path : path.test(r.path)));
  return { sim, deps, deliver, calls, observed, version };
}

const contact = (email: string): Event => ({
  entity: 'contacts',
  action: 'create',
  data: { email },
});
const company = (name: string): Event => ({
  entity: 'companies',
  action: 'create',
  data: { companyname: name },
});
const link = (id: number, companyId: number): Event => ({
  entity: 'contacts',
  action: 'linkCompany',
  id,
  companyId,
});

describe('a company create whose answer was lost (Mautic applied it, its answer unreadable)', () => {
  it.each([
    ['5.1', 'refused'],
    ['5.2.0', 'refused'],
    ['5.2.1', 'upserted'],
    ['5.2', 'upserted'],
    ['6', 'upserted'],
    ['7', 'upserted'],
  ])(
    'is sent again on %s, whose answers named its version: it is %s, never doubled',
    async (line, repeat) => {
      const relay = await relayTo(line);
      await relay.deliver([contact('ann@example.com')]);
      relay.sim.failAfterApply({ path: '/api/companies/batch/new' }, 'garble');

      const [outcome] = await relay.deliver([company('Acme')]);

      expect(relay.calls('/api/companies/batch/new')).toHaveLength(2);
      expect(relay.sim.records('companies').map((c) => c.companyname)).toEqual(['Acme']);
      expect(outcome).toEqual(
        repeat === 'refused'
          ? expect.objectContaining({ kind: 'rejected', reason: 'duplicate', status: 422 })
          : { kind: 'delivered', status: 200, id: 1, call },
      );
    },
  );

  it.each(['5.1', '7'])(
    'is dead-lettered, not sent again, while Mautic %s has named no version yet',
    async (line) => {
      const relay = await relayTo(line);
      relay.sim.failAfterApply({ path: '/api/companies/batch/new' }, 'garble');

      const [outcome] = await relay.deliver([company('Acme')]);

      // The unreadable answer carries no header: the version is still unknown, so no guess.
      expect(relay.version.value).toBeUndefined();
      expect(outcome).toMatchObject({ kind: 'rejected', reason: 'ambiguous_result' });
      expect(relay.calls('/api/companies/batch/new')).toHaveLength(1);
    },
  );
});

describe('an email a user has open for editing', () => {
  it('is retried on 7 (its 409 is transient), and delivered once the user closes it', async () => {
    const relay = await relayTo('7');
    relay.sim.seed('emails', { name: 'Welcome', subject: 'Welcome' });
    relay.sim.checkOut('emails', 1);
    const edit: Event = { entity: 'emails', action: 'edit', id: 1, data: { subject: 'Hi' } };

    const [locked] = await relay.deliver([edit]);
    relay.sim.checkIn('emails', 1);
    const [later] = await relay.deliver([edit]);

    expect(locked).toEqual({
      kind: 'retry',
      reason: 'mautic_locked',
      status: 409,
      message: expect.stringContaining('checked out by Admin User'),
    });
    expect(later).toMatchObject({ kind: 'delivered', status: 200, id: 1 });
    expect(relay.sim.records('emails')).toMatchObject([{ subject: 'Hi' }]);
  });

  it.each(['5.1', '6'])('is edited on %s, which does not lock it for the API', async (line) => {
    const relay = await relayTo(line);
    relay.sim.seed('emails', { name: 'Welcome', subject: 'Welcome' });
    relay.sim.checkOut('emails', 1);

    const [outcome] = await relay.deliver([
      { entity: 'emails', action: 'edit', id: 1, data: { subject: 'Hi' } },
    ]);

    expect(outcome).toMatchObject({ kind: 'delivered', status: 200 });
  });
});

describe('company links (linkCompany)', () => {
  async function seeded(line: string, options: { batchMaxLimit?: number } = {}) {
    const relay = await relayTo(line, options);
    for (const name of ['ann', 'bob', 'cy', 'di', 'ed'])
      relay.sim.seed('contacts', { email: `${name}@example.com` });
    relay.sim.seed('companies', { companyname: 'Acme' });
    relay.sim.seed('companies', { companyname: 'Globex' });
    return relay;
  }
  const links = [link(1, 1), link(2, 2), link(3, 1), link(4, 2), link(5, 1)];
  const linked = (relay: Awaited<ReturnType<typeof seeded>>) =>
    [1, 2, 3, 4, 5].map((id) => relay.sim.memberships(id)?.companies.map((c) => c.id));

  it('go in one call per chunk on 7, once its answers named the version', async () => {
    const relay = await seeded('7');
    await relay.deliver([contact('zed@example.com')]);

    const outcomes = await relay.deliver(links);

    expect(outcomes).toEqual(
      [1, 2, 3, 4, 5].map((id) => ({ kind: 'delivered', status: 200, id, call })),
    );
    expect(relay.calls('/api/companies/batch/addcontacts').map((r) => r.items)).toEqual([5]);
    expect(relay.calls(/^\/api\/companies\/\d+\/contact\//)).toEqual([]);
    expect(linked(relay)).toEqual([[1], [2], [1], [2], [1]]);
  });

  it('on 7 in a container that knows no version yet: the first pair alone, then the rest in bulk', async () => {
    const relay = await seeded('7');

    const outcomes = await relay.deliver(links);

    expect(outcomes.map((o) => o.kind)).toEqual(Array(5).fill('delivered'));
    expect(relay.calls(/^\/api\/companies\/\d+\/contact\//).map((r) => r.path)).toEqual([
      '/api/companies/1/contact/1/add',
    ]);
    expect(relay.calls('/api/companies/batch/addcontacts').map((r) => r.items)).toEqual([4]);
    expect(linked(relay)).toEqual([[1], [2], [1], [2], [1]]);
  });

  it.each(['5.1', '5.2', '6'])(
    'take one call per pair on %s, which has no bulk links',
    async (line) => {
      const relay = await seeded(line);
      await relay.deliver([contact('zed@example.com')]);

      const outcomes = await relay.deliver(links);

      expect(outcomes.map((o) => o.kind)).toEqual(Array(5).fill('delivered'));
      expect(relay.calls(/^\/api\/companies\/\d+\/contact\/\d+\/add$/)).toHaveLength(5);
      expect(relay.calls('/api/companies/batch/addcontacts')).toEqual([]);
      expect(linked(relay)).toEqual([[1], [2], [1], [2], [1]]);
    },
  );

  it("on 7 are split to Mautic's limit on its 400 over-limit answer, and the limit kept", async () => {
    const relay = await seeded('7', { batchMaxLimit: 2 });
    await relay.deliver([contact('zed@example.com')]);

    const outcomes = await relay.deliver(links);

    expect(outcomes.map((o) => o.kind)).toEqual(Array(5).fill('delivered'));
    expect(relay.calls('/api/companies/batch/addcontacts').map((r) => [r.items, r.status])).toEqual(
      [
        [5, 400],
        [2, 200],
        [2, 200],
        [1, 200],
      ],
    );
    expect(relay.deps.learnedLimit.value).toBe(2);
    expect(linked(relay)).toEqual([[1], [2], [1], [2], [1]]);
  });

  it('on 7 dead-letter a pair whose company or contact Mautic does not have, naming which', async () => {
    const relay = await seeded('7');
    await relay.deliver([contact('zed@example.com')]);

    const outcomes = await relay.deliver([link(1, 99), link(2, 1), link(77, 2)]);

    expect(outcomes).toEqual([
      {
        kind: 'rejected',
        reason: 'mautic_rejected_item',
        status: 404,
        message: 'Company not found (contact 1, company 99)',
      },
      { kind: 'delivered', status: 200, id: 2, call },
      {
        kind: 'rejected',
        reason: 'mautic_rejected_item',
        status: 404,
        message: 'Contact not found (contact 77, company 2)',
      },
    ]);
  });

  it('on 7 leave a pair Mautic refuses with 403 to the queue, loudly, as a per-pair 403 is', async () => {
    const relay = await seeded('7');
    await relay.deliver([contact('zed@example.com')]);
    const result = (contactId: number, status: number, message: string) => ({
      contactId,
      companyId: 1,
      status,
      message,
    });
    relay.sim.inject(
      { path: '/api/companies/batch/addcontacts' },
      {
        status: 200,
        headers: { 'content-type': 'application/json', 'mautic-version': '7.0.0' },
        body: JSON.stringify({
          results: [result(1, 200, 'Contact added to company'), result(2, 403, 'Access denied')],
          summary: { total: 2, succeeded: 1, failed: 1 },
        }),
      },
    );

    const outcomes = await relay.deliver([link(1, 1), link(2, 1)]);

    expect(outcomes).toEqual([
      { kind: 'delivered', status: 200, id: 1, call },
      {
        kind: 'retry',
        reason: 'mautic_refused_403',
        status: 403,
        message: 'Access denied (contact 2, company 1)',
      },
    ]);
    expect(relay.observed.lines.filter((line) => line.level === 'error')).toHaveLength(1);
  });

  it('fall back to one call per pair, for good, when a Mautic naming 7 has no bulk route', async () => {
    const relay = await seeded('7');
    await relay.deliver([contact('zed@example.com')]);
    relay.sim.inject(
      { path: '/api/companies/batch/addcontacts' },
      {
        status: 404,
        headers: { 'content-type': 'application/json' },
        body: '{"errors":[{"message":"Requested URL not found: \\/api\\/companies\\/batch\\/addcontacts","code":404,"type":null}]}',
      },
    );

    const first = await relay.deliver(links.slice(0, 2));
    const second = await relay.deliver(links.slice(2));

    expect([...first, ...second].map((o) => o.kind)).toEqual(Array(5).fill('delivered'));
    expect(relay.calls('/api/companies/batch/addcontacts')).toHaveLength(1);
    expect(relay.calls(/^\/api\/companies\/\d+\/contact\/\d+\/add$/)).toHaveLength(5);
    expect(linked(relay)).toEqual([[1], [2], [1], [2], [1]]);
  });
});
