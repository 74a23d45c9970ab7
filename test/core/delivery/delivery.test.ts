import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type Chunk, planBatches } from '../../../functions/core/delivery/batch-plan.ts';
import { deliverChunks } from '../../../functions/core/delivery/delivery.ts';
import {
  DEFAULT_DELIVERY_OPTIONS,
  type DeliveryDeps,
} from '../../../functions/core/delivery/delivery-calls.ts';
import type { MessageOutcome } from '../../../functions/core/delivery/failure-policy.ts';
import { MauticPermanentError } from '../../../functions/core/errors.ts';
import type { QueuedEvent } from '../../../functions/core/events.ts';
import { MauticApiClient } from '../../../functions/core/mautic/mautic-api.ts';
import { type MauticSimulator, startMauticSimulator } from '../../../mautic-simulator/server.ts';
import { InMemoryActionLedger } from '../../support/action-ledger.ts';
import { incoming } from '../../support/events.ts';
import { recorder } from '../../support/observe.ts';

const START = Date.parse('2026-11-21T00:00:00Z');
const json = { 'content-type': 'application/json' };
let now = START;
let sim: MauticSimulator;
let deps: DeliveryDeps;
let sleeps: number[];
let tokenReads: Array<{ fresh: boolean }>;
let refreshes: string[];
const observed = recorder();
const { lines: logs, emitted: metrics } = observed;
let currentToken: string;
let renew: () => string;

function plan(
  events: Array<Pick<QueuedEvent, 'entity' | 'action'> & Partial<QueuedEvent>>,
  batchSize = 200,
): Chunk[] {
  return planBatches(events.map(incoming), batchSize);
}

const creates = (count: number, prefix = 'u') =>
  Array.from({ length: count }, (_, i) => ({
    entity: 'contacts',
    action: 'create' as const,
    data: { email: `${prefix}${i}@example.com` },
  }));

const ids = (chunks: Chunk[]) => chunks.flatMap((c) => c.items.flatMap((item) => item.messageIds));
const kinds = (outcomes: Map<string, MessageOutcome>) => [...outcomes.values()].map((o) => o.kind);
const apiCalls = () => sim.requests.filter((r) => r.path.startsWith('/api/'));

async function restart(options: Parameters<typeof startMauticSimulator>[0] = {}): Promise<void> {
  await sim?.close();
  sim = await startMauticSimulator({ now: () => now, ...options });
  currentToken = sim.issueToken().accessToken;
  renew = () => currentToken;
  deps = {
    api: new MauticApiClient({ baseUrl: sim.url, fetch }),
    // Stands in for the waiting token source: a refused token is "renewed" as `renew` says.
    tokens: {
      accessToken: async (options) => {
        tokenReads.push({ fresh: options?.fresh ?? false });
        if (options?.refused !== undefined) {
          refreshes.push(`refused, waiting until ${options.waitUntil}`);
          currentToken = renew();
        }
        return currentToken;
      },
    },
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
}

beforeEach(async () => {
  now = START;
  sleeps = [];
  tokenReads = [];
  refreshes = [];
  observed.clear();
  await restart();
});

afterEach(async () => {
  await sim.close();
});

const deadline = () => now + 60_000;

/** A delivered outcome names the Mautic call that carried it, as that call's log line does. */
const call = { id: expect.any(String), at: expect.any(Number) };

describe('deliverChunks', () => {
  it('delivers 450 creates in 3 calls and logs one line per call with ids, never contents', async () => {
    const chunks = plan(creates(450));

    const outcomes = await deliverChunks(chunks, deadline(), deps);

    expect(outcomes.size).toBe(450);
    expect(kinds(outcomes).every((k) => k === 'delivered')).toBe(true);
    expect(apiCalls()).toHaveLength(3);
    const lines = logs.filter((l) => l.message === 'Mautic call');
    expect(lines).toHaveLength(3);
    expect(lines[0]?.extra).toEqual([
      expect.objectContaining({
        entity: 'contacts',
        action: 'create',
        items: 200,
        statuses: { 201: 200 },
      }),
    ]);
    expect(JSON.stringify(logs)).not.toContain('@example.com');
    expect(JSON.stringify(logs)).not.toContain(currentToken);
    expect(metrics.filter(([name]) => name === 'MauticCalls')).toHaveLength(3);
    expect(metrics.filter(([name]) => name === 'BatchFill').map(([, , v]) => v)).toEqual([
      100, 100, 25,
    ]);
  });

  it('rejects invalid items for good, gives coalesced messages one outcome (the earlier one coalesced into the later), and retries other item statuses', async () => {
    const { id } = sim.seed('contacts', { email: 'known@example.com' });
    const chunks = plan([
      { entity: 'contacts', action: 'create', data: { email: 'ok@example.com' } },
      { entity: 'contacts', action: 'create', data: { email: 'bad^x@example.com' } },
      { entity: 'contacts', action: 'create', data: { email: 'OK@example.com', city: 'Oslo' } },
      { entity: 'contacts', action: 'edit', id, data: { firstname: 'K' } },
      { entity: 'contacts', action: 'edit', id: 9999, data: { firstname: 'Nobody' } },
      { entity: 'contacts', action: 'delete', id: 8888 },
    ]);
    const [ok, bad, okAgain, edit, unknownEdit, del] = ids(chunks).sort(
      (a, b) => Number(a.slice(1)) - Number(b.slice(1)),
    );

    const outcomes = await deliverChunks(chunks, deadline(), deps);

    expect(outcomes.get(ok ?? '')).toMatchObject({ kind: 'delivered', status: 201 });
    expect(outcomes.get(ok ?? '')).toEqual({ ...outcomes.get(okAgain ?? ''), into: okAgain });
    expect(outcomes.get(bad ?? '')).toMatchObject({
      kind: 'rejected',
      reason: 'mautic_rejected_item',
      status: 400,
    });
    expect(outcomes.get(edit ?? '')).toEqual({ kind: 'delivered', status: 200, id, call });
    expect(outcomes.get(unknownEdit ?? '')).toMatchObject({
      kind: 'rejected',
      status: 404,
      message: 'Item was not found.',
    });
    expect(outcomes.get(del ?? '')).toEqual({ kind: 'delivered', status: 404, id: 8888, call });
    expect(
      sim.records('contacts').find((r) => String(r.email).toLowerCase() === 'ok@example.com'),
    ).toMatchObject({
      city: 'Oslo',
    });
  });

  it('retries an item whose per-item status is not a permanent one', async () => {
    sim.inject(
      { path: '/api/contacts/batch/new' },
      {
        status: 201,
        headers: json,
        body: JSON.stringify({
          contacts: { 0: { id: 1 } },
          statusCodes: [201, 500],
          errors: { 1: { message: 'Deadlock', code: 500 } },
        }),
      },
    );

    const outcomes = await deliverChunks(plan(creates(2)), deadline(), deps);

    expect([...outcomes.values()].map((o) => o.kind).sort()).toEqual(['delivered', 'retry']);
    expect([...outcomes.values()].find((o) => o.kind === 'retry')).toEqual({
      kind: 'retry',
      reason: 'mautic_item_500',
    });
  });

  it('backs off with equal jitter through a short 5xx storm and delivers', async () => {
    sim.inject({ path: '/api/contacts/batch/new' }, { status: 503, body: 'busy' }, 2);

    const outcomes = await deliverChunks(plan(creates(1)), deadline(), deps);

    expect(kinds(outcomes)).toEqual(['delivered']);
    expect(sleeps).toEqual([150, 300]);
    expect(apiCalls()).toHaveLength(3);
  });

  it('leaves the items to the queue after maxAttempts, or when no time is left to back off', async () => {
    sim.inject({ path: '/api/contacts/batch/new' }, { status: 500, body: '' }, 10);

    const exhausted = await deliverChunks(plan(creates(2)), deadline(), deps);
    sleeps = [];
    const rushed = await deliverChunks(
      plan(creates(2, 'r')),
      now + DEFAULT_DELIVERY_OPTIONS.deadlineMarginMs + 50,
      deps,
    );

    // The last failure goes with the retry, for the dead letter should the horizon run out.
    const lastFailure = {
      kind: 'retry',
      reason: 'mautic_server',
      status: 500,
      message:
        'MauticTransientError: POST /api/contacts/batch/new failed with status 500 (server, possibly applied)',
    };
    expect([...exhausted.values()]).toEqual([lastFailure, lastFailure]);
    // Two tries of the call, then one of each half (both fail: Mautic fails every call, so no
    // narrowing further), then the rushed call's one try.
    expect(apiCalls()).toHaveLength(5);
    expect(sleeps).toEqual([]);
    expect(kinds(rushed)).toEqual(['retry', 'retry']);
  });

  it('makes no call when the deadline margin is already reached', async () => {
    const outcomes = await deliverChunks(plan(creates(2)), now + 1000, deps);

    expect([...outcomes.values()]).toEqual([
      { kind: 'retry', reason: 'deadline' },
      { kind: 'retry', reason: 'deadline' },
    ]);
    expect(apiCalls()).toHaveLength(0);
  });

  it('re-reads the token bypassing the cache after a 401 and delivers with the fresh one', async () => {
    const stale = currentToken;
    sim.expireAccessTokens();
    deps.tokens = {
      accessToken: async (options) => {
        tokenReads.push({ fresh: options?.fresh ?? false });
        return options?.fresh ? currentToken : stale;
      },
    };
    currentToken = sim.issueToken().accessToken;

    const outcomes = await deliverChunks(plan(creates(2)), deadline(), deps);

    expect(kinds(outcomes)).toEqual(['delivered', 'delivered']);
    expect(tokenReads).toEqual([{ fresh: false }, { fresh: true }]);
    expect(refreshes).toEqual([]);
  });

  it('waits for a newer token when the fresh one is refused too, and delivers with it', async () => {
    sim.expireAccessTokens();
    renew = () => sim.issueToken().accessToken;

    const outcomes = await deliverChunks(plan(creates(2)), deadline(), deps);

    expect(kinds(outcomes)).toEqual(['delivered', 'delivered']);
    expect(refreshes).toEqual([
      `refused, waiting until ${deadline() - DEFAULT_DELIVERY_OPTIONS.deadlineMarginMs}`,
    ]);
    expect(apiCalls().map((r) => r.status)).toEqual([401, 401, 201]);
  });

  it('leaves the items to the queue when even the renewed token is refused', async () => {
    sim.expireAccessTokens();

    const outcomes = await deliverChunks(
      plan([...creates(2), { entity: 'companies', action: 'create', data: { companyname: 'A' } }]),
      deadline(),
      deps,
    );

    expect([...outcomes.values()]).toEqual(
      Array(3).fill({ kind: 'retry', reason: 'unauthorized_token_expired' }),
    );
  });

  it('leaves the items to the queue as no_token when no token can be had in time', async () => {
    deps.tokens = {
      accessToken: async () => {
        throw new Error('No usable Mautic access token arrived in time');
      },
    };

    const outcomes = await deliverChunks(plan(creates(1)), deadline(), deps);

    expect([...outcomes.values()]).toEqual([{ kind: 'retry', reason: 'no_token' }]);
    expect(apiCalls()).toHaveLength(0);
  });

  it('stops calling Mautic after a 429 and delays what is left until the window resets', async () => {
    await restart({ rateLimit: { limit: 1, windowSeconds: 600 } });
    const chunks = plan([
      ...creates(250),
      { entity: 'companies', action: 'create', data: { companyname: 'A' } },
    ]);

    const outcomes = await deliverChunks(
      chunks,
      deadline(),
      { ...deps },
      { ...DEFAULT_DELIVERY_OPTIONS, concurrency: 1 },
    );

    const resetAt = (Math.floor(START / 1000) + 600) * 1000;
    expect(kinds(outcomes).filter((k) => k === 'delivered')).toHaveLength(200);
    expect([...outcomes.values()].filter((o) => o.kind === 'retry')).toEqual(
      Array(51).fill(
        expect.objectContaining({
          kind: 'retry',
          reason: 'rate_limited',
          notBefore: resetAt,
        }),
      ),
    );
    expect(apiCalls().map((r) => r.status)).toEqual([201, 429]);
  });

  it('halves to the batch limit Mautic states, delivers everything, and remembers the limit', async () => {
    await restart({ batchMaxLimit: 50 });

    const first = await deliverChunks(plan(creates(120)), deadline(), deps);
    const callsBefore = apiCalls().length;
    const second = await deliverChunks(plan(creates(120, 'second')), deadline(), deps);

    expect(kinds(first).every((k) => k === 'delivered')).toBe(true);
    expect(kinds(second).every((k) => k === 'delivered')).toBe(true);
    expect(deps.learnedLimit.value).toBe(50);
    expect(
      apiCalls()
        .slice(0, callsBefore)
        .map((r) => r.status),
    ).toEqual([500, 201, 201, 201]);
    expect(
      apiCalls()
        .slice(callsBefore)
        .map((r) => r.items),
    ).toEqual([50, 50, 20]);
    expect(sim.records('contacts')).toHaveLength(240);
  });

  it('keeps every item on the queue and logs an error when Mautic refuses a call for configuration reasons', async () => {
    const forbidden =
      '{"errors":[{"code":403,"message":"You do not have access to the requested area/action.","details":[]}]}';
    sim.inject(
      { path: '/api/contacts/batch/new' },
      { status: 403, headers: json, body: forbidden },
    );
    sim.inject(
      { path: '/api/companies/batch/new' },
      { status: 302, headers: { location: 'https://elsewhere.example/' } },
    );

    const outcomes = await deliverChunks(
      plan([...creates(2), { entity: 'companies', action: 'create', data: { companyname: 'A' } }]),
      deadline(),
      deps,
    );

    expect([...outcomes.values()]).toEqual([
      { kind: 'retry', reason: 'mautic_refused_403' },
      { kind: 'retry', reason: 'mautic_refused_403' },
      { kind: 'retry', reason: 'mautic_refused_302' },
    ]);
    const errors = logs.filter((l) => l.level === 'error');
    expect(errors.map((l) => l.message)).toEqual([
      "Mautic refused the call; check the base URL and the API user's permissions",
      "Mautic refused the call; check the base URL and the API user's permissions",
    ]);
    expect(errors[0]?.extra).toEqual([
      expect.objectContaining({ entity: 'contacts', status: 403 }),
    ]);
  });

  it('refuses the events of an entity Mautic has no route for (its own 404)', async () => {
    const outcomes = await deliverChunks(
      plan([{ entity: 'nosuchthings', action: 'create', data: { a: 1 } }, ...creates(1)]),
      deadline(),
      deps,
    );

    const [unknown, contact] = [...outcomes.values()];
    expect(unknown).toMatchObject({
      kind: 'rejected',
      reason: 'mautic_unknown_entity',
      status: 404,
    });
    expect(contact).toMatchObject({ kind: 'delivered' });
  });

  it('halves a call Mautic answers 400 as a whole until it refuses the one item at fault', async () => {
    const chunks = plan(creates(4));
    // The whole call, then the half holding item 2, then item 2 alone: 400; the rest pass.
    const bad = '{"errors":[{"code":400,"message":"Invalid json message received","details":[]}]}';
    sim.inject({ path: '/api/contacts/batch/new' }, { status: 400, headers: json, body: bad });
    const outcomes = await deliverChunks(chunks, deadline(), {
      ...deps,
      api: {
        ...deps.api,
        create: (entity, items, call) =>
          items.some((item) => item.email === 'u2@example.com') && items.length < 4
            ? Promise.reject(
                new MauticPermanentError({
                  method: 'POST',
                  path: '/api/contacts/batch/new',
                  status: 400,
                  mauticMessage: 'Invalid json message received',
                }),
              )
            : deps.api.create(entity, items, call),
      },
    });

    const byEmail = new Map(
      chunks[0]?.items.map((item) => [item.payload.email, outcomes.get(item.messageIds[0] ?? '')]),
    );
    expect(byEmail.get('u2@example.com')).toMatchObject({
      kind: 'rejected',
      reason: 'mautic_refused_item',
      status: 400,
    });
    for (const email of ['u0@example.com', 'u1@example.com', 'u3@example.com'])
      expect(byEmail.get(email)?.kind).toBe('delivered');
  });

  it('does not learn a batch limit that the call did not exceed', async () => {
    sim.inject(
      { path: '/api/contacts/batch/new' },
      {
        status: 500,
        headers: json,
        body: '{"errors":[{"code":500,"message":"A max of 200 entities are supported at a time.","details":[]}]}',
      },
    );

    const outcomes = await deliverChunks(plan(creates(2)), deadline(), deps);

    expect(deps.learnedLimit.value).toBeUndefined();
    expect(kinds(outcomes)).toEqual(['delivered', 'delivered']);
    expect(sleeps).toHaveLength(1);
  });

  it('makes no more calls after a renewed token is refused too', async () => {
    sim.expireAccessTokens();

    await deliverChunks(
      plan([...creates(2), { entity: 'companies', action: 'create', data: { companyname: 'A' } }]),
      deadline(),
      deps,
      {
        ...DEFAULT_DELIVERY_OPTIONS,
        concurrency: 1,
      },
    );

    expect(apiCalls().map((r) => r.path)).toEqual([
      '/api/contacts/batch/new',
      '/api/contacts/batch/new',
      '/api/contacts/batch/new',
    ]);
    expect(refreshes).toHaveLength(1);
  });

  it('waits the default delay after a 429 without X-RateLimit-Reset, across entities running at once', async () => {
    sim.inject(
      { path: /batch\/new$/ },
      {
        status: 429,
        body: '{"errors":[{"code":429,"message":"You exceeded the rate limit of 1 API calls per hour.","details":[]}]}',
      },
      2,
    );

    const outcomes = await deliverChunks(
      plan([
        ...creates(1),
        { entity: 'companies', action: 'create', data: { companyname: 'A' } },
        { entity: 'segments', action: 'create', data: { name: 'S' } },
      ]),
      deadline(),
      deps,
      { ...DEFAULT_DELIVERY_OPTIONS, concurrency: 2 },
    );

    const notBefore = START + DEFAULT_DELIVERY_OPTIONS.defaultRateLimitDelayMs;
    expect([...outcomes.values()]).toEqual(
      Array(3).fill(expect.objectContaining({ kind: 'retry', reason: 'rate_limited', notBefore })),
    );
    expect(apiCalls()).toHaveLength(2);
  });

  it('measures batch fill against the limit Mautic stated once it is learned', async () => {
    deps.learnedLimit.value = 50;

    await deliverChunks(plan(creates(60)), deadline(), deps);

    expect(metrics.filter(([name]) => name === 'BatchFill').map(([, , value]) => value)).toEqual([
      100, 20,
    ]);
  });

  it('retries an answer of an unexpected shape, and stops at an aborted signal', async () => {
    sim.inject(
      { path: '/api/contacts/batch/new' },
      { status: 201, headers: json, body: '<html>' },
      3,
    );
    const garbled = await deliverChunks(plan(creates(1)), deadline(), deps);
    const controller = new AbortController();
    controller.abort();
    const aborted = await deliverChunks(
      plan(creates(1, 'a')),
      deadline(),
      deps,
      DEFAULT_DELIVERY_OPTIONS,
      controller.signal,
    );

    expect([...garbled.values()]).toEqual([
      expect.objectContaining({ kind: 'retry', reason: 'mautic_bad_response' }),
    ]);
    expect([...aborted.values()]).toEqual([{ kind: 'retry', reason: 'deadline' }]);
  });
});

describe('deliverChunks: order, merges and answers that cannot tell', () => {
  it('makes one call per 200 events for 2,000 distinct creates (calls per event ≤ 1.05/200)', async () => {
    const outcomes = await deliverChunks(plan(creates(2_000)), deadline(), deps);

    expect(kinds(outcomes).filter((kind) => kind === 'delivered')).toHaveLength(2_000);
    expect(apiCalls()).toHaveLength(10);
    expect(apiCalls().length / 2_000).toBeLessThanOrEqual(1.05 / 200);
  });

  it('leaves the later events of a record to the queue when an earlier one goes back there', async () => {
    const first = sim.seed('contacts', { email: 'one@example.com' });
    const second = sim.seed('contacts', { email: 'two@example.com' });
    const chunks = plan([
      { entity: 'contacts', action: 'edit', id: first.id, data: { city: 'A' } },
      { entity: 'contacts', action: 'edit', id: second.id, data: { city: 'B' } },
      { entity: 'contacts', action: 'delete', id: first.id },
      { entity: 'contacts', action: 'delete', id: second.id },
      { entity: 'contacts', action: 'create', data: { email: 'three@example.com' } },
    ]);
    const [editFirst, editSecond, deleteFirst, deleteSecond, create] = ids(chunks).sort(
      (a, b) => Number(a.slice(1)) - Number(b.slice(1)),
    );
    // Mautic hits a deadlock on the first edit only.
    sim.inject(
      { path: '/api/contacts/batch/edit' },
      {
        status: 200,
        headers: json,
        body: JSON.stringify({
          contacts: { 1: { id: second.id } },
          statusCodes: [500, 200],
          errors: { 0: { message: 'Deadlock', code: 500 } },
        }),
      },
    );

    const outcomes = await deliverChunks(chunks, deadline(), deps);

    expect(outcomes.get(editFirst ?? '')).toEqual({ kind: 'retry', reason: 'mautic_item_500' });
    expect(outcomes.get(editSecond ?? '')).toMatchObject({ kind: 'delivered' });
    expect(outcomes.get(deleteFirst ?? '')).toEqual({
      kind: 'retry',
      reason: 'earlier_event_pending',
      message: 'An earlier event of the same record went back to the queue (mautic_item_500)',
    });
    expect(outcomes.get(deleteSecond ?? '')).toMatchObject({ kind: 'delivered', status: 200 });
    // A create may be the same record as any edit or delete before it (upsert by email).
    expect(outcomes.get(create ?? '')).toMatchObject({
      kind: 'retry',
      reason: 'earlier_event_pending',
    });
    expect(sim.records('contacts').map((record) => record.id)).toEqual([first.id]);
    expect(apiCalls().map((request) => request.items)).toEqual([2, 1]);
  });

  it('holds back what follows a rate-limited event until the same reset', async () => {
    sim.inject(
      { path: '/api/contacts/batch/new' },
      {
        status: 429,
        headers: { 'x-ratelimit-reset': String(Math.floor(START / 1000) + 600) },
        body: '{"errors":[{"code":429,"message":"You exceeded the rate limit of 1 API calls per hour.","details":[]}]}',
      },
    );

    const outcomes = await deliverChunks(
      plan([...creates(1), { entity: 'contacts', action: 'delete', id: 1 }]),
      deadline(),
      deps,
    );

    expect([...outcomes.values()]).toMatchObject([
      { kind: 'retry', reason: 'rate_limited', notBefore: START + 600_000, status: 429 },
      {
        kind: 'retry',
        reason: 'earlier_event_pending',
        notBefore: START + 600_000,
        message: expect.stringMatching(
          /^An earlier event .* \(rate_limited: MauticRateLimitError: /,
        ),
      },
    ]);
  });

  it('sends a merged item Mautic refuses as invalid again event by event, in order', async () => {
    const { id } = sim.seed('segments', { name: 'Seg' });
    const chunks = plan([
      { entity: 'segments', action: 'edit', id, data: { description: 'kept' } },
      { entity: 'segments', action: 'edit', id, data: { name: '' } },
    ]);
    const [good, bad] = ids(chunks);

    const outcomes = await deliverChunks(chunks, deadline(), deps);

    expect(chunks[0]?.items).toHaveLength(1);
    expect(outcomes.get(good ?? '')).toMatchObject({ kind: 'delivered', status: 200 });
    expect(outcomes.get(bad ?? '')).toMatchObject({
      kind: 'rejected',
      reason: 'mautic_rejected_item',
      status: 400,
    });
    expect(sim.records('segments')).toMatchObject([{ name: 'Seg', description: 'kept' }]);
    expect(apiCalls().map((request) => request.items)).toEqual([1, 1, 1]);
  });

  it('delivers an event repeated in the batch once, both messages sharing the outcome', async () => {
    const original = incoming({
      entity: 'companies',
      action: 'create',
      data: { companyname: 'A' },
    });
    const repeat = { messageId: 'repeat', event: { ...original.event } };

    const outcomes = await deliverChunks(planBatches([original, repeat], 200), deadline(), deps);

    expect(outcomes.get('repeat')).toEqual(outcomes.get(original.messageId));
    expect(outcomes.get('repeat')).toMatchObject({ kind: 'delivered', status: 201 });
    expect(sim.records('companies')).toHaveLength(1);
  });

  for (const how of ['garble', 'drop', 'gateway_timeout'] as const) {
    it(`refuses a segment create whose answer Mautic spoilt after applying it (${how}) as ambiguous_result, sent once`, async () => {
      sim.failAfterApply({ path: '/api/segments/batch/new' }, how);

      const outcomes = await deliverChunks(
        plan([{ entity: 'segments', action: 'create', data: { name: 'Buyers', alias: 'buyers' } }]),
        deadline(),
        deps,
      );

      const [outcome] = [...outcomes.values()];
      expect(outcome).toMatchObject({ kind: 'rejected', reason: 'ambiguous_result' });
      expect(outcome?.kind === 'rejected' && outcome.message).toMatch(
        /^Mautic may have created this record; its answer cannot tell \(Mautic\w*Error: POST \/api\/segments\/batch\/new /,
      );
      expect(sim.records('segments').filter((s) => s.name === 'Buyers')).toHaveLength(1);
      expect(apiCalls()).toHaveLength(1);
      expect(JSON.stringify(outcome)).not.toContain(currentToken);
    });

    it(`sends a contact create again after such an answer (${how}): the upsert keeps it one record`, async () => {
      sim.failAfterApply({ path: '/api/contacts/batch/new' }, how);

      const outcomes = await deliverChunks(
        plan([{ entity: 'contacts', action: 'create', data: { email: 'once@example.com' } }]),
        deadline(),
        deps,
      );

      expect([...outcomes.values()]).toEqual([
        { kind: 'delivered', status: 200, id: sim.records('contacts')[0]?.id, call },
      ]);
      expect(sim.records('contacts')).toHaveLength(1);
      expect(apiCalls()).toHaveLength(2);
    });
  }

  it('retries a company create that never left (connection refused) as a plain transient failure', async () => {
    const closed = await startMauticSimulator();
    const url = closed.url;
    await closed.close();
    deps.api = new MauticApiClient({ baseUrl: url, fetch });

    const outcomes = await deliverChunks(
      plan([{ entity: 'companies', action: 'create', data: { companyname: 'Acme' } }]),
      deadline(),
      deps,
    );

    expect([...outcomes.values()]).toEqual([
      {
        kind: 'retry',
        reason: 'mautic_network',
        message: `MauticTransientError: POST /api/companies/batch/new failed (network: ${new URL(url).host} ECONNREFUSED)`,
      },
    ]);
    expect(sleeps).toHaveLength(2);
  });

  it('sends an edit again after an answer that cannot tell: applying it twice is applying it once', async () => {
    const { id } = sim.seed('companies', { companyname: 'Old' });
    sim.failAfterApply({ path: '/api/companies/batch/edit' }, 'garble');

    const outcomes = await deliverChunks(
      plan([{ entity: 'companies', action: 'edit', id, data: { companyname: 'New' } }]),
      deadline(),
      deps,
    );

    expect([...outcomes.values()]).toEqual([{ kind: 'delivered', status: 200, id, call }]);
    expect(sim.records('companies')).toMatchObject([{ id, companyname: 'New' }]);
  });
});
