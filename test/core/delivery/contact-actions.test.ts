import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type Chunk, planBatches } from '../../../functions/core/delivery/batch-plan.ts';
import { deliverChunks } from '../../../functions/core/delivery/delivery.ts';
import type { DeliveryDeps } from '../../../functions/core/delivery/delivery-calls.ts';
import type { MessageOutcome } from '../../../functions/core/delivery/failure-policy.ts';
import type { QueuedEvent } from '../../../functions/core/events.ts';
import { MauticApiClient } from '../../../functions/core/mautic/mautic-api.ts';
import type { FetchLike } from '../../../functions/core/ports.ts';
import { type MauticSimulator, startMauticSimulator } from '../../../mautic-simulator/server.ts';
import { InMemoryActionLedger } from '../../support/action-ledger.ts';
import { incoming } from '../../support/events.ts';
import { recorder } from '../../support/observe.ts';

// Contract §5 through the real client against the simulator: references resolved with as few
// lookups as the request line allows, never to a look-alike; the actions in bulk where Mautic
// has a bulk form; addPoints at most once.

const START = Date.parse('2026-11-25T00:00:00Z');
let now = START;
let sim: MauticSimulator;
let token: string;
let ledger: InMemoryActionLedger;
const observed = recorder();

type EventInput = Pick<QueuedEvent, 'entity' | 'action'> & Partial<QueuedEvent>;

function depsWith(fetchLike: FetchLike = fetch): DeliveryDeps {
  return {
    api: new MauticApiClient({ baseUrl: sim.url, fetch: fetchLike }),
    ledger,
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

function plan(events: EventInput[]): { chunks: Chunk[]; ids: string[] } {
  const messages = events.map((event) => incoming(event));
  return { chunks: planBatches(messages, 200), ids: messages.map((m) => m.messageId) };
}

async function deliver(events: EventInput[], fetchLike?: FetchLike) {
  const { chunks, ids } = plan(events);
  const outcomes = await deliverChunks(chunks, now + 60_000, depsWith(fetchLike));
  return ids.map((id) => outcomes.get(id) as MessageOutcome);
}

const apiCalls = () =>
  sim.requests.filter((r) => r.path.startsWith('/api/')).map((r) => `${r.method} ${r.path}`);

async function get(path: string): Promise<Record<string, unknown>> {
  const response = await fetch(`${sim.url}${path}`, {
    headers: { authorization: `Bearer ${token}` },
  });
  expect(response.status).toBe(200);
  return (await response.json()) as Record<string, unknown>;
}

const segmentsOf = async (id: number) =>
  Object.keys((await get(`/api/contacts/${id}/segments`)).lists as object).map(Number);
const contact = async (id: number) =>
  (await get(`/api/contacts/${id}`)).contact as Record<string, unknown>;

beforeEach(async () => {
  now = START;
  observed.clear();
  ledger = new InMemoryActionLedger();
  sim = await startMauticSimulator({ now: () => now });
  token = sim.issueToken().accessToken;
});

afterEach(async () => {
  await sim.close();
});

describe('contacts named by match', () => {
  it('adds a contact the batch creates to a segment by its email, looked up after the create', async () => {
    const segment = sim.seed('segments', {
      name: 'Customers',
      alias: 'customers',
      isPublished: true,
    });

    const outcomes = await deliver([
      { entity: 'contacts', action: 'create', data: { email: 'ann@example.com' } },
      {
        entity: 'contacts',
        action: 'addToSegment',
        match: { email: 'ANN@example.com' },
        segmentId: segment.id,
      },
    ]);

    expect(outcomes.map((o) => o.kind)).toEqual(['delivered', 'delivered']);
    expect(apiCalls()).toEqual([
      'POST /api/contacts/batch/new',
      'GET /api/contacts',
      `POST /api/segments/${segment.id}/contacts/add`,
    ]);
    const [created] = sim.records('contacts');
    expect(await segmentsOf(created?.id ?? 0)).toEqual([segment.id]);
  });

  it('resolves 200 references in one lookup and adds them to two segments in one call each', async () => {
    const one = sim.seed('segments', { name: 'One', alias: 'one', isPublished: true });
    const two = sim.seed('segments', { name: 'Two', alias: 'two', isPublished: true });
    const ids = Array.from(
      { length: 200 },
      (_, i) => sim.seed('contacts', { email: `user${i}@example.com` }).id,
    );

    const outcomes = await deliver(
      ids.map((_, i) => ({
        entity: 'contacts',
        action: 'addToSegment' as const,
        match: { email: `user${i}@example.com` },
        segmentId: i % 2 === 0 ? one.id : two.id,
      })),
    );

    expect(outcomes.every((o) => o.kind === 'delivered')).toBe(true);
    expect(apiCalls()).toEqual([
      'GET /api/contacts',
      `POST /api/segments/${one.id}/contacts/add`,
      `POST /api/segments/${two.id}/contacts/add`,
    ]);
    expect(await segmentsOf(ids[0] ?? 0)).toEqual([one.id]);
    expect(await segmentsOf(ids[199] ?? 0)).toEqual([two.id]);
    // A contact reference is personal data: counts and ids only in the log.
    expect(JSON.stringify(observed.lines)).not.toContain('@example.com');
    expect(observed.lines.find((l) => l.message === 'Mautic lookup')?.extra).toEqual([
      expect.objectContaining({ event: 'mautic_lookup', values: 200 }),
    ]);
  });

  it('splits a lookup whose query would pass the request-line limit, and no more', async () => {
    const long = (i: number) => `${'x'.repeat(60)}.${i}@example.com`;
    for (let i = 0; i < 200; i++) sim.seed('contacts', { email: long(i) });

    const outcomes = await deliver(
      Array.from({ length: 200 }, (_, i) => ({
        entity: 'contacts',
        action: 'edit' as const,
        match: { email: long(i) },
        data: { city: 'Oslo' },
      })),
    );

    expect(outcomes.every((o) => o.kind === 'delivered')).toBe(true);
    const lookups = sim.requests.filter((r) => r.method === 'GET' && r.path === '/api/contacts');
    // 200 × 77 bytes of value: three requests under 7,600 bytes of query each.
    expect(lookups).toHaveLength(3);
    expect(lookups.every((r) => r.status === 200 && r.query.length <= 7_600)).toBe(true);
    expect(sim.records('contacts').every((c) => c.city === 'Oslo')).toBe(true);
  });

  it('fits 200 addresses of 34 characters in one lookup, @ and commas unescaped', async () => {
    const address = (i: number) => `first.last${String(i).padStart(3, '0')}@companys-example.com`;
    expect(address(7)).toHaveLength(34);
    for (let i = 0; i < 200; i++) sim.seed('contacts', { email: address(i) });

    const found = await depsWith().api.findContacts(
      'email',
      Array.from({ length: 200 }, (_, i) => address(i)),
      { accessToken: token },
    );

    expect([...found.values()].every((ids) => ids.length === 1)).toBe(true);
    const lookups = sim.requests.filter((r) => r.method === 'GET' && r.path === '/api/contacts');
    expect(lookups).toHaveLength(1);
    expect(lookups[0]?.query).toContain('first.last000@companys-example.com,first.last001@');
  });

  it('never resolves a reference to a look-alike: prefixes, LIKE wildcards, accents', async () => {
    sim.seed('contacts', { email: 'ann@example.com.au' });
    sim.seed('contacts', { email: 'annXdoe@example.com' });
    sim.seed('contacts', { email: 'ánn@example.com' });

    const outcomes = await deliver([
      {
        entity: 'contacts',
        action: 'edit',
        match: { email: 'ann@example.com' },
        data: { city: 'A' },
      },
      {
        entity: 'contacts',
        action: 'addPoints',
        match: { email: 'ann_doe@example.com' },
        points: 5,
      },
    ]);

    expect(outcomes).toEqual([
      expect.objectContaining({ kind: 'rejected', reason: 'no_match' }),
      expect.objectContaining({ kind: 'rejected', reason: 'no_match' }),
    ]);
    expect(sim.records('contacts').map((c) => c.city ?? null)).toEqual([null, null, null]);
    expect(ledger.calls).toEqual([]);
  });

  it('checks every contact a lookup lists against the value: an accent-folded look-alike that SQL lets through is no match', async () => {
    // Mautic's utf8mb4_unicode_ci folds accents and trailing spaces; the simulator does not, so
    // Mautic's answer is scripted here.
    const listed = (id: number, email: string) => ({
      id,
      fields: { all: { id: String(id), email } },
    });
    sim.inject(
      { method: 'GET', path: '/api/contacts' },
      {
        status: 200,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          total: '3',
          contacts: {
            4: listed(4, 'ánn@example.com'),
            5: listed(5, 'ann@example.com '),
            6: listed(6, 'ANN@example.com'),
          },
        }),
      },
    );

    const found = await depsWith().api.findContacts(
      'email',
      ['Ann@Example.com', 'bo@example.com'],
      {
        accessToken: token,
      },
    );

    expect(found).toEqual(
      new Map([
        ['ann@example.com', [5, 6]],
        ['bo@example.com', []],
      ]),
    );
    const query = new URLSearchParams(sim.requests.at(-1)?.query ?? '');
    expect(Object.fromEntries(query)).toMatchObject({
      'where[0][col]': 'email',
      'where[0][expr]': 'in',
      'where[0][val]': 'ann@example.com,bo@example.com',
    });
  });

  it('quotes a value holding a comma or a quote as str_getcsv reads it', async () => {
    const odd = sim.seed('contacts', { email: 'plain@example.com', crm_id: 'a,"b"' });

    const found = await depsWith().api.findContacts('crm_id', ['a,"b"', 'c'], {
      accessToken: token,
    });

    expect(found.get('a,"b"')).toEqual([odd.id]);
    const query = new URLSearchParams(sim.requests.at(-1)?.query ?? '');
    expect(query.get('where[0][val]')).toBe('"a,""b""",c');
  });

  it('looks up again what a create may have changed: a field it wrote, the contact it updated', async () => {
    sim.seed('contacts', { email: 'bob@example.com' });
    const old = sim.seed('contacts', { email: 'old@example.com', crm_id: '999' });

    const outcomes = await deliver([
      // Makes the run look every reference up before the creates.
      { entity: 'contacts', action: 'addPoints', match: { email: 'bob@example.com' }, points: 1 },
      { entity: 'contacts', action: 'create', data: { email: 'ann@example.com', crm_id: '1001' } },
      { entity: 'contacts', action: 'create', data: { email: 'cy@example.com', crm_id: '999' } },
      { entity: 'contacts', action: 'edit', match: { crm_id: '1001' }, data: { city: 'Lyon' } },
      { entity: 'contacts', action: 'addPoints', match: { crm_id: '999' }, points: 5 },
    ]);

    const cy = sim.records('contacts').find((c) => c.email === 'cy@example.com');
    expect(outcomes.map((o) => (o.kind === 'rejected' ? o.reason : o.kind))).toEqual([
      'delivered',
      'delivered',
      'delivered',
      'delivered',
      'ambiguous_match',
    ]);
    expect(outcomes[4]).toMatchObject({
      reason: 'ambiguous_match',
      message: `Contacts ${old.id}, ${cy?.id} all match match.crm_id`,
    });
    expect(sim.records('contacts').find((c) => c.email === 'ann@example.com')?.city).toBe('Lyon');
    expect((await contact(old.id)).points).toBe(0);
  });

  it('takes an edit that writes its own reference unchanged for no barrier: one lookup for 50', async () => {
    for (let i = 0; i < 50; i++) sim.seed('contacts', { email: `u${i}@example.com` });

    const outcomes = await deliver(
      Array.from({ length: 50 }, (_, i) => ({
        entity: 'contacts',
        action: 'edit' as const,
        match: { email: `u${i}@example.com` },
        data: { email: `U${i}@example.com `.trim(), city: 'Oslo' },
      })),
    );

    expect(outcomes.every((o) => o.kind === 'delivered')).toBe(true);
    expect(apiCalls()).toEqual(['GET /api/contacts', 'PATCH /api/contacts/batch/edit']);
  });

  it('learns nothing from a lookup that failed part-way, and sends its events back whole', async () => {
    const ann = sim.seed('contacts', { email: 'ann@example.com', crm_id: 'c1' });
    const failsOnCrmId: FetchLike = async (url, init) =>
      url.includes('crm_id')
        ? new Response('{"errors":[{"code":500,"message":"x"}]}', { status: 500 })
        : fetch(url, init);

    const outcomes = await deliver(
      [
        {
          entity: 'contacts',
          action: 'edit',
          match: { email: 'ann@example.com' },
          data: { city: 'A' },
        },
        { entity: 'contacts', action: 'edit', match: { crm_id: 'c1' }, data: { city: 'B' } },
      ],
      failsOnCrmId,
    );

    expect(outcomes).toEqual([
      expect.objectContaining({ kind: 'retry', reason: 'mautic_server' }),
      expect.objectContaining({ kind: 'retry', reason: 'earlier_event_pending' }),
    ]);
    expect(sim.records('contacts').find((c) => c.id === ann.id)?.city ?? null).toBeNull();
  });

  it('sends the events of a refused lookup back to the queue, never to the dead letters', async () => {
    sim.inject(
      { method: 'GET', path: '/api/contacts' },
      { status: 400, body: '{"errors":[{"code":400,"message":"This is a bad request."}]}' },
      5,
    );

    const outcomes = await deliver([
      { entity: 'contacts', action: 'addPoints', match: { email: 'ann@example.com' }, points: 1 },
    ]);

    expect(outcomes).toEqual([
      expect.objectContaining({ kind: 'retry', reason: 'lookup_refused', status: 400 }),
    ]);
  });

  it('reads a number field as Mautic lists it (a number) and matches its text', async () => {
    sim.inject(
      { method: 'GET', path: '/api/contacts' },
      {
        status: 200,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          total: '1',
          contacts: { 8: { id: 8, fields: { all: { id: '8', customer_no: 1001 } } } },
        }),
      },
    );

    const found = await depsWith().api.findContacts('customer_no', ['1001'], {
      accessToken: token,
    });

    expect(found).toEqual(new Map([['1001', [8]]]));
  });

  it('pages through a lookup that lists more contacts than a page holds', async () => {
    const ids = Array.from(
      { length: 15 },
      (_, i) => sim.seed('contacts', { email: `d${i}@example.com`, crm_id: 'dup' }).id,
    );

    const outcomes = await deliver([
      { entity: 'contacts', action: 'edit', match: { crm_id: 'dup' }, data: { city: 'X' } },
    ]);

    // A page holds 2 × 1 + 10 contacts: the 15 take two.
    expect(
      sim.requests.filter((r) => r.method === 'GET' && r.path === '/api/contacts'),
    ).toHaveLength(2);
    expect(outcomes[0]).toEqual({
      kind: 'rejected',
      reason: 'ambiguous_match',
      message: `Contacts ${ids.join(', ')} all match match.crm_id`,
    });
  });

  it('holds an event naming a contact by id behind one naming it by match that went back to the queue', async () => {
    const ann = sim.seed('contacts', { email: 'ann@example.com' });
    sim.inject({ method: 'GET', path: '/api/contacts' }, { status: 503, body: '' }, 10);

    const outcomes = await deliver([
      {
        entity: 'contacts',
        action: 'edit',
        match: { email: 'ann@example.com' },
        data: { city: 'A' },
      },
      { entity: 'contacts', action: 'edit', id: ann.id, data: { city: 'B' } },
    ]);

    expect(outcomes.map((o) => (o.kind === 'retry' ? o.reason : o.kind))).toEqual([
      'mautic_server',
      'earlier_event_pending',
    ]);
    expect(sim.records('contacts')[0]?.city ?? null).toBeNull();
  });

  it('dead-letters no_match and ambiguous_match (ids in the detail), and counts a delete of nobody as done', async () => {
    const a = sim.seed('contacts', { email: 'a@example.com', crm_id: 'dup' });
    const b = sim.seed('contacts', { email: 'b@example.com', crm_id: 'dup' });

    const outcomes = await deliver([
      {
        entity: 'contacts',
        action: 'addPoints',
        match: { email: 'nobody@example.com' },
        points: 1,
      },
      { entity: 'contacts', action: 'edit', match: { crm_id: 'DUP' }, data: { city: 'X' } },
      { entity: 'contacts', action: 'delete', match: { email: 'gone@example.com' } },
    ]);

    expect(outcomes[0]).toEqual({
      kind: 'rejected',
      reason: 'no_match',
      message: 'No contact matches match.email',
    });
    expect(outcomes[1]).toEqual({
      kind: 'rejected',
      reason: 'ambiguous_match',
      message: `Contacts ${a.id}, ${b.id} all match match.crm_id`,
    });
    expect(outcomes[2]?.kind).toBe('delivered');
    expect(sim.records('contacts').map((c) => c.city ?? null)).toEqual([null, null]);
    // Nor on the dead-letter paths: no reference in a log line.
    expect(JSON.stringify(observed.lines)).not.toContain('@example.com');
    expect(JSON.stringify(observed.lines)).not.toMatch(/dup/i);
  });

  it('looks a reference up again after an edit that may move it, and sees a contact the batch deleted as gone', async () => {
    const first = sim.seed('contacts', { email: 'first@example.com' });
    sim.seed('contacts', { email: 'other@example.com' });

    const outcomes = await deliver([
      { entity: 'contacts', action: 'delete', match: { email: 'other@example.com' } },
      { entity: 'contacts', action: 'addPoints', match: { email: 'other@example.com' }, points: 3 },
      { entity: 'contacts', action: 'edit', id: first.id, data: { email: 'renamed@example.com' } },
      {
        entity: 'contacts',
        action: 'addPoints',
        match: { email: 'renamed@example.com' },
        points: 7,
      },
    ]);

    expect(outcomes.map((o) => (o.kind === 'rejected' ? o.reason : o.kind))).toEqual([
      'delivered',
      'no_match',
      'delivered',
      'delivered',
    ]);
    expect((await contact(first.id)).points).toBe(7);
  });
});

describe('the integrator actions', () => {
  it('joins and leaves campaigns, links and unlinks companies, sets and lifts Do Not Contact', async () => {
    const ann = sim.seed('contacts', { email: 'ann@example.com' });
    const campaign = sim.seed('campaigns', { name: 'Welcome', isPublished: true });
    const company = sim.seed('companies', { companyname: 'Acme' });

    const outcomes = await deliver([
      {
        entity: 'contacts',
        action: 'addToCampaign',
        match: { email: 'ann@example.com' },
        campaignId: campaign.id,
      },
      { entity: 'contacts', action: 'linkCompany', id: ann.id, companyId: company.id },
      {
        entity: 'contacts',
        action: 'addDoNotContact',
        match: { email: 'ann@example.com' },
        reason: 'unsubscribed',
        comments: 'shop',
      },
    ]);

    expect(outcomes.every((o) => o.kind === 'delivered')).toBe(true);
    expect(
      Object.keys((await get(`/api/contacts/${ann.id}/campaigns`)).campaigns as object),
    ).toEqual([String(campaign.id)]);
    expect((await get(`/api/contacts/${ann.id}/companies`)).total).toBe(1);
    expect((await contact(ann.id)).doNotContact).toEqual([
      expect.objectContaining({ channel: 'email', reason: 1, comments: 'shop' }),
    ]);
    // Do Not Contact went through batch edit: one call for many.
    expect(apiCalls()).toContain('PATCH /api/contacts/batch/edit');

    const undone = await deliver([
      { entity: 'contacts', action: 'removeFromCampaign', id: ann.id, campaignId: campaign.id },
      {
        entity: 'contacts',
        action: 'unlinkCompany',
        match: { email: 'ann@example.com' },
        companyId: company.id,
      },
      { entity: 'contacts', action: 'removeDoNotContact', id: ann.id },
    ]);

    expect(undone.every((o) => o.kind === 'delivered')).toBe(true);
    expect((await get(`/api/contacts/${ann.id}/campaigns`)).total).toBe(0);
    expect((await get(`/api/contacts/${ann.id}/companies`)).total).toBe(0);
    expect((await contact(ann.id)).doNotContact).toEqual([]);
  });

  it("dead-letters an action on an unknown segment, campaign or company with Mautic's 404, not retried", async () => {
    const ann = sim.seed('contacts', { email: 'ann@example.com' });

    const outcomes = await deliver([
      { entity: 'contacts', action: 'addToSegment', id: ann.id, segmentId: 999 },
      { entity: 'contacts', action: 'addToCampaign', id: ann.id, campaignId: 999 },
      { entity: 'contacts', action: 'linkCompany', id: ann.id, companyId: 999 },
    ]);

    const refused = (message: string) =>
      expect.objectContaining({
        kind: 'rejected',
        reason: 'mautic_rejected_item',
        status: 404,
        message,
      });
    expect(outcomes).toEqual([
      refused('Mautic found no segment 999 (Item was not found.)'),
      // CampaignApiController answers the same for an unknown contact: it cannot tell which.
      refused(
        `Mautic found no campaign 999 or no contact ${ann.id} (its answer does not say which) (Item was not found.)`,
      ),
      refused('Mautic found no company 999 (Item was not found.)'),
    ]);
    expect(apiCalls()).toHaveLength(3);
  });

  it('says which record Mautic did not find when the contact named by id is the unknown one', async () => {
    const segment = sim.seed('segments', { name: 'S', alias: 's', isPublished: true });
    const company = sim.seed('companies', { companyname: 'Acme' });
    const campaign = sim.seed('campaigns', { name: 'C', isPublished: true });

    const outcomes = await deliver([
      { entity: 'contacts', action: 'removeFromSegment', id: 404, segmentId: segment.id },
      { entity: 'contacts', action: 'linkCompany', id: 405, companyId: company.id },
      { entity: 'contacts', action: 'removeFromCampaign', id: 406, campaignId: campaign.id },
      { entity: 'contacts', action: 'addPoints', id: 407, points: 3 },
      { entity: 'contacts', action: 'addDoNotContact', id: 408 },
      { entity: 'contacts', action: 'addToSegment', id: 409, segmentId: segment.id },
    ]);

    expect(outcomes.map((outcome) => outcome.kind === 'rejected' && outcome.message)).toEqual([
      'Mautic found no contact 404 (Contact not found.)',
      'Mautic found no contact 405 (Contact not found.)',
      'Mautic found no contact 406 (Contact not found.)',
      'Mautic found no contact 407 (Contact not found.)',
      'Mautic found no contact 408 (Item was not found.)',
      `Mautic found no contact 409 to add to segment ${segment.id} (or may not edit it)`,
    ]);
  });
});

describe('addPoints, at most once per event', () => {
  it('adds points, subtracts negative ones, and settles the same event again without a call', async () => {
    const ann = sim.seed('contacts', { email: 'ann@example.com' });
    const event = incoming({
      entity: 'contacts',
      action: 'addPoints',
      match: { email: 'ann@example.com' },
      points: 10,
    });
    const minus = incoming({ entity: 'contacts', action: 'addPoints', id: ann.id, points: -3 });

    await deliverChunks(planBatches([event, minus], 200), now + 60_000, depsWith());
    const calls = apiCalls().length;
    // The queue delivers the first event again (its answer was acknowledged late, say).
    const again = await deliverChunks(planBatches([event], 200), now + 60_000, depsWith());

    expect(again.get(event.messageId)?.kind).toBe('delivered');
    expect(apiCalls().slice(calls)).toEqual(['GET /api/contacts']);
    expect((await contact(ann.id)).points).toBe(7);
    expect([...ledger.entries().values()]).toEqual(['done', 'done']);
  });

  it('applies once when the answer is lost: the event is dead-lettered ambiguous_result, also when it comes again', async () => {
    const ann = sim.seed('contacts', { email: 'ann@example.com' });
    // Mautic applies the call, then the connection drops before its answer.
    sim.failAfterApply({ path: /\/points\// }, 'drop');
    const event = incoming({ entity: 'contacts', action: 'addPoints', id: ann.id, points: 10 });

    const first = await deliverChunks(planBatches([event], 200), now + 60_000, depsWith());
    const again = await deliverChunks(planBatches([event], 200), now + 60_000, depsWith());

    expect((await contact(ann.id)).points).toBe(10);
    expect(first.get(event.messageId)).toEqual(
      expect.objectContaining({ kind: 'rejected', reason: 'ambiguous_result' }),
    );
    expect(again.get(event.messageId)).toEqual(
      expect.objectContaining({ kind: 'rejected', reason: 'ambiguous_result' }),
    );
    expect(apiCalls().filter((c) => c.includes('/points/'))).toHaveLength(1);
  });

  it('releases the claim when the call certainly did not apply, so the retry applies it once', async () => {
    const ann = sim.seed('contacts', { email: 'ann@example.com' });
    sim.inject(
      { path: `/api/contacts/${ann.id}/points/plus/4` },
      {
        status: 429,
        body: JSON.stringify({ errors: [{ code: 429, message: 'API limit reached' }] }),
      },
    );
    const event = incoming({ entity: 'contacts', action: 'addPoints', id: ann.id, points: 4 });

    const first = await deliverChunks(planBatches([event], 200), now + 60_000, depsWith());
    const retried = await deliverChunks(planBatches([event], 200), now + 60_000, depsWith());

    expect(first.get(event.messageId)).toEqual(
      expect.objectContaining({ kind: 'retry', reason: 'rate_limited' }),
    );
    expect(retried.get(event.messageId)?.kind).toBe('delivered');
    expect((await contact(ann.id)).points).toBe(4);
  });

  it('retries after a 503 that says when to come back (the request was not taken), dead-letters after a bare 503 or a 502 (it may have been)', async () => {
    const ann = sim.seed('contacts', { email: 'ann@example.com' });
    const bob = sim.seed('contacts', { email: 'bob@example.com' });
    const cy = sim.seed('contacts', { email: 'cy@example.com' });
    const unavailable = { status: 503, headers: { 'retry-after': '120' }, body: '' };
    sim.inject({ path: `/api/contacts/${ann.id}/points/plus/6` }, unavailable, 1);
    sim.inject({ path: `/api/contacts/${bob.id}/points/plus/8` }, { status: 502, body: '' }, 1);
    sim.inject({ path: `/api/contacts/${cy.id}/points/plus/9` }, { status: 503, body: '' }, 1);
    const six = incoming({ entity: 'contacts', action: 'addPoints', id: ann.id, points: 6 });
    const eight = incoming({ entity: 'contacts', action: 'addPoints', id: bob.id, points: 8 });
    const nine = incoming({ entity: 'contacts', action: 'addPoints', id: cy.id, points: 9 });

    const first = await deliverChunks(planBatches([six], 200), now + 60_000, depsWith());
    const others = await deliverChunks(planBatches([eight, nine], 200), now + 60_000, depsWith());
    const again = await deliverChunks(planBatches([six], 200), now + 60_000, depsWith());

    expect(first.get(six.messageId)).toEqual(
      expect.objectContaining({ kind: 'retry', reason: 'mautic_server', status: 503 }),
    );
    for (const event of [eight, nine]) {
      expect(others.get(event.messageId)).toEqual(
        expect.objectContaining({ kind: 'rejected', reason: 'ambiguous_result' }),
      );
    }
    expect(again.get(six.messageId)?.kind).toBe('delivered');
    expect((await contact(ann.id)).points).toBe(6);
    expect((await contact(bob.id)).points).toBe(0);
    expect((await contact(cy.id)).points).toBe(0);
  });

  it('dead-letters ambiguous_result after a 5xx, and leaves the event to the queue when the ledger is down', async () => {
    const ann = sim.seed('contacts', { email: 'ann@example.com' });
    sim.inject(
      { path: `/api/contacts/${ann.id}/points/plus/2` },
      { status: 500, body: JSON.stringify({ errors: [{ code: 500, message: 'Internal' }] }) },
    );
    const failing = incoming({ entity: 'contacts', action: 'addPoints', id: ann.id, points: 2 });
    const later = incoming({ entity: 'contacts', action: 'addPoints', id: ann.id, points: 5 });

    const outcomes = await deliverChunks(planBatches([failing], 200), now + 60_000, depsWith());
    ledger.failNext('claim');
    const down = await deliverChunks(planBatches([later], 200), now + 60_000, depsWith());

    expect(outcomes.get(failing.messageId)).toEqual(
      expect.objectContaining({ kind: 'rejected', reason: 'ambiguous_result' }),
    );
    expect(apiCalls().filter((c) => c.includes('/points/'))).toHaveLength(1);
    expect(down.get(later.messageId)).toEqual(
      expect.objectContaining({ kind: 'retry', reason: 'ledger_unavailable' }),
    );
    expect((await contact(ann.id)).points ?? 0).toBe(0);
  });
});
