import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { possiblyApplied } from '../../../functions/core/delivery/answer-policy.ts';
import {
  MauticAuthError,
  MauticBatchLimitError,
  MauticPermanentError,
  MauticRateLimitError,
  MauticResponseError,
  MauticTransientError,
} from '../../../functions/core/errors.ts';
import { MauticApiClient } from '../../../functions/core/mautic/mautic-api.ts';
import { type MauticSimulator, startMauticSimulator } from '../../../mautic-simulator/server.ts';
import { expectNoSecrets, thrownBy } from '../../support/secrets.ts';

const START = Date.parse('2026-11-21T00:00:00Z');
let now = START;
let sim: MauticSimulator;
let api: MauticApiClient;
let call: { accessToken: string };
/** Every JSON answer the client received, to check which of Mautic's shapes a test exercised. */
let bodies: unknown[];
const capturingFetch = async (url: string, init: RequestInit): Promise<Response> => {
  const response = await fetch(url, init);
  const text = await response.clone().text();
  try {
    bodies.push(JSON.parse(text));
  } catch {
    bodies.push(text);
  }
  return response;
};
const json = { 'content-type': 'application/json' };

async function restart(options: Parameters<typeof startMauticSimulator>[0] = {}): Promise<void> {
  await sim?.close();
  sim = await startMauticSimulator({ now: () => now, ...options });
  api = new MauticApiClient({ baseUrl: sim.url, fetch: capturingFetch });
  call = { accessToken: sim.issueToken().accessToken };
}

beforeEach(async () => {
  now = START;
  bodies = [];
  await restart();
});

afterEach(async () => {
  await sim.close();
});

describe('MauticApiClient.create', () => {
  it('creates every contact in one call and returns their ids in input order', async () => {
    const items = Array.from({ length: 200 }, (_, i) => ({
      email: `user${i}@example.com`,
      firstname: `U${i}`,
    }));

    const results = await api.create('contacts', items, call);

    expect(results).toHaveLength(200);
    expect(results.every((r) => r.kind === 'delivered' && r.status === 201)).toBe(true);
    const stored = sim.records('contacts');
    results.forEach((result, i) => {
      const record = stored.find((r) => r.id === (result.kind === 'delivered' ? result.id : -1));
      expect(record?.email).toBe(`user${i}@example.com`);
    });
    expect(sim.requests.filter((r) => r.path === '/api/contacts/batch/new')).toHaveLength(1);
  });

  it('reports 200 with the same id when a contact with that email exists, in any case', async () => {
    const [first] = await api.create(
      'contacts',
      [{ email: 'Ann@Example.com', firstname: 'Ann' }],
      call,
    );

    const [second] = await api.create(
      'contacts',
      [{ email: 'ann@example.COM', lastname: 'Lee' }],
      call,
    );

    expect(first).toMatchObject({ kind: 'delivered', status: 201 });
    expect(second).toEqual({
      kind: 'delivered',
      status: 200,
      id: first?.kind === 'delivered' ? first.id : -1,
    });
    expect(sim.records('contacts')).toHaveLength(1);
    expect(sim.records('contacts')[0]).toMatchObject({ firstname: 'Ann', lastname: 'Lee' });
  });

  it('gives each item its own result when one in the middle fails (record list keyed by index)', async () => {
    const items = [
      { email: 'a@example.com' },
      { email: 'john..doe@example.com' },
      { email: 'c@example.com' },
    ];

    const results = await api.create('contacts', items, call);

    const answer = bodies.at(-1) as { contacts: unknown; errors: unknown };
    expect(Array.isArray(answer.contacts)).toBe(false);
    expect(Object.keys(answer.contacts as object)).toEqual(['0', '2']);
    expect(Object.keys(answer.errors as object)).toEqual(['1']);

    expect(results[0]).toMatchObject({ kind: 'delivered', status: 201 });
    expect(results[1]).toEqual({
      kind: 'rejected',
      status: 400,
      message: 'email: john..doe@example.com is invalid.',
      details: { email: ['john..doe@example.com is invalid.'] },
    });
    expect(results[2]).toMatchObject({ kind: 'delivered', status: 201 });
    expect(new Set(sim.records('contacts').map((r) => r.email))).toEqual(
      new Set(['a@example.com', 'c@example.com']),
    );
  });

  it('reads errors as a JSON array when the failures are items 0..k', async () => {
    const results = await api.create(
      'contacts',
      [{ email: 'bad^one@example.com' }, { email: 'ok@example.com' }],
      call,
    );

    const answer = bodies.at(-1) as { contacts: unknown; errors: unknown };
    expect(Array.isArray(answer.errors)).toBe(true);
    expect(Object.keys(answer.contacts as object)).toEqual(['1']);

    expect(results[0]).toMatchObject({ kind: 'rejected', status: 400 });
    expect(results[0]?.kind === 'rejected' && results[0].message).toContain(
      'has characters not allowed',
    );
    expect(results[1]).toMatchObject({ kind: 'delivered', status: 201 });
  });

  it('reads the answer when every item failed and no record list came back', async () => {
    const results = await api.create('contacts', [{ email: 'x@' }, { email: 'y@' }], call);

    expect(results.map((r) => [r.kind, r.status])).toEqual([
      ['rejected', 400],
      ['rejected', 400],
    ]);
  });

  it('reports a duplicate email inside one batch as created then updated, same id', async () => {
    const results = await api.create(
      'contacts',
      [{ email: 'dup@example.com' }, { email: 'DUP@example.com', city: 'Oslo' }],
      call,
    );

    expect(results.map((r) => r.status)).toEqual([201, 200]);
    expect(results[0]?.kind === 'delivered' && results[0].id).toBe(
      results[1]?.kind === 'delivered' && results[1].id,
    );
    expect(sim.records('contacts')).toHaveLength(1);
  });

  it('reads segments under `lists` and their per-item validation errors', async () => {
    const results = await api.create(
      'segments',
      [{ name: 'Newsletter' }, { name: '' }, { name: 'VIP' }],
      call,
    );

    expect(bodies.at(-1)).toHaveProperty('lists');
    expect(bodies.at(-1)).not.toHaveProperty('segments');

    expect(results[0]).toMatchObject({ kind: 'delivered', status: 201 });
    expect(results[1]).toMatchObject({
      kind: 'rejected',
      status: 400,
      message: 'name: A value is required.',
    });
    expect(results[2]).toMatchObject({ kind: 'delivered', status: 201 });
    expect(sim.records('segments').map((r) => r.name)).toEqual(['Newsletter', 'VIP']);
  });

  it('creates companies, each a new record', async () => {
    const results = await api.create(
      'companies',
      // Two names: Mautic 5.1 refuses a second company of one name (422).
      [{ companyname: 'Acme' }, { companyname: 'Globex' }],
      call,
    );

    expect(results.map((r) => r.status)).toEqual([201, 201]);
    expect(sim.records('companies')).toHaveLength(2);
  });

  it('makes no call for an empty batch and refuses an entity outside the contract', async () => {
    await expect(api.create('contacts', [], call)).resolves.toEqual([]);
    await expect(api.create('../oauth', [{}], call)).rejects.toThrow(TypeError);
    await expect(api.create('contacts/x', [{}], call)).rejects.toThrow(/entity/);
    expect(sim.requests).toHaveLength(0);
  });
});

describe('MauticApiClient.edit', () => {
  it('updates known ids and rejects an unknown id with a per-item 404', async () => {
    const { id } = sim.seed('contacts', { email: 'e@example.com', firstname: 'Eve' });

    const results = await api.edit('contacts', [{ id, firstname: 'Evelyn' }, { id: 987654 }], call);

    expect(results[0]).toEqual({ kind: 'delivered', status: 200, id });
    expect(results[1]).toEqual({ kind: 'rejected', status: 404, message: 'Item was not found.' });
    expect(sim.records('contacts')[0]).toMatchObject({
      firstname: 'Evelyn',
      email: 'e@example.com',
    });
    expect(sim.requests.at(-1)).toMatchObject({
      method: 'PATCH',
      path: '/api/contacts/batch/edit',
    });
  });

  it('refuses an item without a positive integer id before calling Mautic', async () => {
    const items = [{ id: 1 }, { firstname: 'no id' }] as unknown as Array<{ id: number }>;

    await expect(api.edit('contacts', items, call)).rejects.toThrow(/items\[\]\.id/);
    await expect(api.edit('contacts', [{ id: 1.5 }], call)).rejects.toThrow(TypeError);
    expect(sim.requests).toHaveLength(0);
  });
});

describe('MauticApiClient.delete', () => {
  it('counts deleted ids as 200 and ids Mautic does not have as done with 404', async () => {
    const a = sim.seed('contacts', { email: 'a@example.com' });
    const c = sim.seed('contacts', { email: 'c@example.com' });

    const results = await api.delete('contacts', [a.id, 424242, c.id], call);

    const answer = bodies.at(-1) as Record<string, unknown>;
    expect(answer).not.toHaveProperty('statusCodes');
    expect(Object.keys(answer.contacts as object)).toEqual(['0', '2']);

    expect(results).toEqual([
      { kind: 'delivered', status: 200, id: a.id },
      { kind: 'delivered', status: 404, id: 424242 },
      { kind: 'delivered', status: 200, id: c.id },
    ]);
    expect(sim.records('contacts')).toHaveLength(0);
    expect(sim.requests.at(-1)).toMatchObject({
      method: 'DELETE',
      query: `ids=${a.id},424242,${c.id}`,
    });
  });

  it('rejects an item Mautic refused to delete (errors appended to the answer)', async () => {
    sim.inject(
      { method: 'DELETE', path: '/api/contacts/batch/delete' },
      {
        status: 200,
        headers: json,
        body: JSON.stringify({
          contacts: [{ id: 5 }, { id: 6 }],
          errors: {
            1: {
              message: 'You do not have access to the requested area/action.',
              code: 403,
              type: 'api',
            },
          },
        }),
      },
    );

    const results = await api.delete('contacts', [5, 6], call);

    expect(results).toEqual([
      { kind: 'delivered', status: 200, id: 5 },
      {
        kind: 'rejected',
        status: 403,
        message: 'You do not have access to the requested area/action.',
      },
    ]);
  });
});

describe('MauticApiClient whole-call failures', () => {
  it('recognises the batch limit answer and carries N', async () => {
    await restart({ batchMaxLimit: 50 });
    const items = Array.from({ length: 51 }, (_, i) => ({ email: `l${i}@example.com` }));

    const error = await thrownBy(() => api.create('contacts', items, call));

    expect(error).toBeInstanceOf(MauticBatchLimitError);
    expect(error).toMatchObject({ limit: 50, status: 500, retryable: true });
    expect(sim.records('contacts')).toHaveLength(0);
  });

  it("recognises Mautic 7's batch limit answer on its company links, a 400", async () => {
    await restart({ batchMaxLimit: 2, mauticVersion: '7' });
    const links = [1, 2, 3].map((contactId) => ({ contactId, companyId: 1 }));

    const error = await thrownBy(() => api.linkCompanies(links, call));

    expect(error).toBeInstanceOf(MauticBatchLimitError);
    expect(error).toMatchObject({ limit: 2, status: 400, retryable: true });
  });

  it('tells an unknown token from an expired one and from no usable token', async () => {
    const unknown = await thrownBy(() =>
      api.list('contacts', {}, { accessToken: 'not-a-real-token' }),
    );
    sim.expireAccessTokens();
    const expired = await thrownBy(() =>
      api.create('contacts', [{ email: 'a@example.com' }], call),
    );
    sim.inject(
      { path: '/api/contacts' },
      {
        status: 401,
        headers: json,
        body: '{"errors":[{"message":"API authorization denied.","code":401,"type":"access_denied"}]}',
      },
    );
    const denied = await thrownBy(() => api.list('contacts', {}, call));

    expect(unknown).toBeInstanceOf(MauticAuthError);
    expect(unknown).toMatchObject({ reason: 'token_invalid', status: 401 });
    expect(expired).toMatchObject({ reason: 'token_expired' });
    expect(denied).toMatchObject({ reason: 'access_denied' });
    for (const error of [unknown, expired, denied])
      expectNoSecrets(error, [call.accessToken, 'not-a-real-token']);
  });

  it('stops at the rate limit with the reset time from X-RateLimit-Reset', async () => {
    await restart({ rateLimit: { limit: 2, windowSeconds: 3600 } });
    await api.list('contacts', {}, call);
    await api.list('contacts', {}, call);

    const error = await thrownBy(() => api.list('contacts', {}, call));

    expect(error).toBeInstanceOf(MauticRateLimitError);
    expect(error).toMatchObject({ status: 429, limit: 2, retryable: true });
    expect((error as MauticRateLimitError).resetAt).toBe(Math.floor(START / 1000 + 3600) * 1000);
    expectNoSecrets(error, [call.accessToken]);
  });

  it('treats 5xx answers, dropped connections, timeouts and aborts as transient', async () => {
    sim.inject(
      { path: '/api/contacts/batch/new' },
      {
        status: 500,
        headers: json,
        body: '{"errors":[{"message":"Looks like I encountered an error (error #500).","code":500,"type":null}]}',
      },
    );
    const server = await thrownBy(() => api.create('contacts', [{ email: 'a@example.com' }], call));
    sim.inject(
      { path: '/api/contacts/batch/new' },
      { status: 502, body: '<html>Bad Gateway</html>' },
    );
    const proxy = await thrownBy(() => api.create('contacts', [{ email: 'a@example.com' }], call));
    sim.inject(
      { path: '/api/contacts/batch/new' },
      { status: 504, body: '<html>504 Gateway Time-out</html>' },
    );
    const gatewayTimeout = await thrownBy(() =>
      api.create('contacts', [{ email: 'a@example.com' }], call),
    );
    sim.setFaults({ seed: 7, dropRate: 1 });
    const dropped = await thrownBy(() =>
      api.create('contacts', [{ email: 'a@example.com' }], call),
    );
    sim.setFaults({ seed: 7, latencyMs: { min: 500, max: 500 } });
    const quick = new MauticApiClient({ baseUrl: sim.url, fetch, timeoutMs: 50 });
    const slow = await thrownBy(() => quick.list('contacts', {}, call));
    // A call's own timeout (the delivery derives one per call) goes before the client's.
    const ownTimeout = await thrownBy(() => api.list('contacts', {}, { ...call, timeoutMs: 50 }));
    const aborted = await thrownBy(() =>
      api.list('contacts', {}, { ...call, signal: AbortSignal.timeout(30) }),
    );
    const already = await thrownBy(() =>
      api.list('contacts', {}, { ...call, signal: AbortSignal.abort() }),
    );

    expect(server).toBeInstanceOf(MauticTransientError);
    expect(server).toMatchObject({ kind: 'server', status: 500 });
    expect(proxy).toMatchObject({ kind: 'server', status: 502 });
    expect(dropped).toMatchObject({ kind: 'network', retryable: true });
    expect(slow).toMatchObject({ kind: 'timeout' });
    expect(ownTimeout).toMatchObject({ kind: 'timeout' });
    expect(aborted).toMatchObject({ kind: 'aborted' });
    expect(already).toMatchObject({ kind: 'aborted' });
    // Whether the request may have been applied (contract §2, "No blind re-send"): any 5xx may
    // follow saves (Mautic's batch has no transaction), and a proxy's gateway timeout answers
    // while PHP goes on; a drop, a timeout or an abort in flight cannot tell either.
    expect(gatewayTimeout).toMatchObject({ kind: 'server', status: 504 });
    expect(
      [server, proxy, gatewayTimeout, dropped, slow, aborted, already].map(possiblyApplied),
    ).toEqual([true, true, true, true, true, true, false]);
    for (const error of [server, proxy, dropped, slow, aborted])
      expectNoSecrets(error, [call.accessToken]);
  });

  it('reads when to come back: a 503 with Retry-After took no request, one without may have; a 429 takes the later of its reset and Retry-After', async () => {
    const before = Date.now();
    sim.inject(
      { path: '/api/companies/batch/new' },
      { status: 503, headers: { 'retry-after': '7' }, body: '<html>Maintenance</html>' },
    );
    const maintenance = await thrownBy(() => api.create('companies', [{ companyname: 'A' }], call));
    sim.inject({ path: '/api/companies/batch/new' }, { status: 503, body: 'busy' });
    const bare = await thrownBy(() => api.create('companies', [{ companyname: 'A' }], call));
    const dated = new Date(Math.ceil((Date.now() + 60_000) / 1000) * 1000);
    sim.inject(
      { path: '/api/companies/batch/new' },
      { status: 503, headers: { 'retry-after': dated.toUTCString() }, body: '' },
    );
    const byDate = await thrownBy(() => api.create('companies', [{ companyname: 'A' }], call));
    const reset = Math.floor(before / 1000) + 4;
    sim.inject(
      { path: '/api/companies/batch/new' },
      {
        status: 429,
        headers: { 'x-ratelimit-reset': String(reset), 'retry-after': '30' },
        body: '{"errors":[{"code":429,"message":"You exceeded the rate limit"}]}',
      },
    );
    const limited = await thrownBy(() => api.create('companies', [{ companyname: 'A' }], call));
    const after = Date.now();

    expect(maintenance).toMatchObject({ kind: 'server', status: 503, possiblyApplied: false });
    const retryAt = (maintenance as MauticTransientError).retryAt as number;
    expect(retryAt).toBeGreaterThanOrEqual(before + 7_000);
    expect(retryAt).toBeLessThanOrEqual(after + 7_000);
    expect((maintenance as Error).message).toContain(`back at ${new Date(retryAt).toISOString()}`);
    expect(bare).toMatchObject({ kind: 'server', status: 503, possiblyApplied: true });
    expect((bare as MauticTransientError).retryAt).toBeUndefined();
    expect(byDate).toMatchObject({ retryAt: dated.getTime(), possiblyApplied: false });
    expect(limited).toBeInstanceOf(MauticRateLimitError);
    // Retry-After (30 s from now) is later than the window's reset (4 s): never earlier.
    expect((limited as MauticRateLimitError).resetAt).toBeGreaterThanOrEqual(before + 30_000);
  });

  it('tells a request that never left (connection refused) from one Mautic applied and then lost', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const { port } = closed.address() as AddressInfo;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const nowhere = new MauticApiClient({ baseUrl: `http://127.0.0.1:${port}`, fetch });
    const refused = await thrownBy(() => nowhere.create('companies', [{ companyname: 'A' }], call));
    sim.failAfterApply({ path: '/api/companies/batch/new' }, 'drop');
    const dropped = await thrownBy(() => api.create('companies', [{ companyname: 'B' }], call));
    sim.failAfterApply({ path: '/api/companies/batch/new' }, 'garble');
    const garbled = await thrownBy(() => api.create('companies', [{ companyname: 'C' }], call));

    expect(refused).toMatchObject({ kind: 'network', possiblyApplied: false });
    expect(dropped).toMatchObject({ kind: 'network', possiblyApplied: true });
    expect(garbled).toBeInstanceOf(MauticResponseError);
    expect(garbled).toMatchObject({ status: 200, possiblyApplied: true });
    expect((garbled as Error).message).toContain('a body that is not JSON');
    expect(sim.records('companies').map((record) => record.companyname)).toEqual(['B', 'C']);
    for (const error of [refused, dropped, garbled]) expectNoSecrets(error, [call.accessToken]);
  });

  it('treats a whole-call 403 and 404 as permanent, with Mautic message', async () => {
    sim.inject(
      { path: '/api/contacts/batch/new' },
      {
        status: 403,
        headers: json,
        body: '{"errors":[{"code":403,"message":"You do not have access to the requested area/action.","details":[]}]}',
      },
    );
    const forbidden = await thrownBy(() =>
      api.create('contacts', [{ email: 'a@example.com' }], call),
    );
    const missing = await thrownBy(() => api.create('nosuchthings', [{ a: 1 }], call));

    expect(forbidden).toBeInstanceOf(MauticPermanentError);
    expect(forbidden).toMatchObject({ status: 403, retryable: false });
    expect((forbidden as Error).message).toBe(
      'POST /api/contacts/batch/new failed with status 403 (You do not have access to the requested area/action.)',
    );
    expect(missing).toMatchObject({ status: 404, retryable: false });
  });

  it('does not follow a redirect, so the token never travels to another host', async () => {
    const seen: string[] = [];
    const other: Server = createServer((req, res) => {
      seen.push(String(req.headers.authorization));
      res.end('{}');
    });
    await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = other.address() as AddressInfo;
      sim.inject(
        { path: '/api/contacts/batch/new' },
        { status: 302, headers: { location: `http://127.0.0.1:${port}/steal` } },
      );

      const error = await thrownBy(() =>
        api.create('contacts', [{ email: 'a@example.com' }], call),
      );

      expect(error).toBeInstanceOf(MauticPermanentError);
      expect(error).toMatchObject({ status: 302 });
      expect(seen).toEqual([]);
    } finally {
      await new Promise((resolve) => other.close(resolve));
    }
  });

  it.each([
    ['a body that is not JSON', 201, '<html>login</html>'],
    ['an empty body', 201, ''],
    ['a JSON array', 201, '[]'],
    ['no statusCodes', 201, '{"contacts":[{"id":1}]}'],
    ['too few statusCodes', 201, '{"contacts":[{"id":1}],"statusCodes":[201]}'],
    ['a 2xx item without a record', 201, '{"contacts":[],"statusCodes":[201,201]}'],
    ['a record without an id', 201, '{"contacts":[{"id":"x"},{"id":2}],"statusCodes":[201,201]}'],
    [
      'statusCodes that are not numbers',
      201,
      '{"contacts":[{"id":1},{"id":2}],"statusCodes":["201","201"]}',
    ],
    ['a record list that is a string', 201, '{"contacts":"oops","statusCodes":[201,201]}'],
    ['errors keyed by names', 201, '{"contacts":{},"statusCodes":[400,400],"errors":{"a":{}}}'],
  ])('rejects an answer with %s as a typed response error', async (_what, status, body) => {
    sim.inject({ path: '/api/contacts/batch/new' }, { status, headers: json, body });

    const error = await thrownBy(() =>
      api.create('contacts', [{ email: 'a@example.com' }, { email: 'b@example.com' }], call),
    );

    expect(error).toBeInstanceOf(MauticResponseError);
    expect(error).toMatchObject({ status, method: 'POST', path: '/api/contacts/batch/new' });
  });

  it('caps the response body, declared or streamed', async () => {
    const small = new MauticApiClient({ baseUrl: sim.url, fetch, maxResponseBytes: 1024 });
    const big = JSON.stringify({
      contacts: [{ id: 1, pad: 'x'.repeat(4096) }],
      statusCodes: [201],
    });
    sim.inject({ path: '/api/contacts/batch/new' }, { status: 201, headers: json, body: big });
    const declared = await thrownBy(() =>
      small.create('contacts', [{ email: 'a@example.com' }], call),
    );

    const streaming = createServer((_req, res) => {
      res.writeHead(201, json);
      res.write('{"contacts":[{"id":1,"pad":"');
      res.end(`${'y'.repeat(4096)}"}],"statusCodes":[201]}`);
    });
    await new Promise<void>((resolve) => streaming.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = streaming.address() as AddressInfo;
      const client = new MauticApiClient({
        baseUrl: `http://127.0.0.1:${port}`,
        fetch,
        maxResponseBytes: 1024,
      });
      const streamed = await thrownBy(() =>
        client.create('contacts', [{ email: 'a@example.com' }], call),
      );

      for (const error of [declared, streamed]) {
        expect(error).toBeInstanceOf(MauticResponseError);
        expect((error as Error).message).toContain('larger than 1024 bytes');
        expect(error).toMatchObject({ retryable: false });
      }
    } finally {
      await new Promise((resolve) => streaming.close(resolve));
    }
  });

  it('refuses a token with white space without echoing it', async () => {
    const error = await thrownBy(() =>
      api.list('contacts', {}, { accessToken: 'abc\r\nX-Evil: 1' }),
    );

    expect(error).toBeInstanceOf(TypeError);
    expect((error as Error).message).not.toContain('abc');
    expect(sim.requests).toHaveLength(0);
  });
});

describe('MauticApiClient.list', () => {
  it('reads contacts keyed by id with total as a string', async () => {
    const ids = ['a', 'b', 'c'].map((n) => sim.seed('contacts', { email: `${n}@example.com` }).id);

    const page = await api.list('contacts', { search: 'email:b@example.com' }, call);
    const all = await api.list('contacts', { start: 1, limit: 2 }, call);

    expect(page.total).toBe(1);
    expect(page.records.map((r) => r.id)).toEqual([ids[1]]);
    expect(all.total).toBe(3);
    expect(all.records).toHaveLength(2);
    expect(sim.requests.at(-1)?.query).toBe('start=1&limit=2');
  });

  it('reads an empty answer {"total":"0","contacts":{}}', async () => {
    await expect(api.list('contacts', {}, call)).resolves.toEqual({ total: 0, records: [] });
  });

  it('reads segments as a JSON array under `lists` with an integer total', async () => {
    sim.seed('segments', { name: 'One' });
    sim.seed('segments', { name: 'Two' });

    const page = await api.list('segments', {}, call);

    expect(page.total).toBe(2);
    expect(page.records.map((r) => r.name)).toEqual(['One', 'Two']);
  });

  it.each([
    ['no total', '{"contacts":{}}'],
    ['a total that is not a number', '{"total":"many","contacts":{}}'],
    ['a record without an id', '{"total":"1","contacts":{"1":{"email":"a@example.com"}}}'],
    ['records as a string', '{"total":"1","contacts":"x"}'],
  ])('rejects a list answer with %s', async (_what, body) => {
    sim.inject({ path: '/api/contacts' }, { status: 200, headers: json, body });

    await expect(api.list('contacts', {}, call)).rejects.toBeInstanceOf(MauticResponseError);
  });

  it('refuses a negative start or limit', async () => {
    await expect(api.list('contacts', { limit: -1 }, call)).rejects.toThrow(/limit/);
    await expect(api.list('contacts', { start: 0.5 }, call)).rejects.toThrow(/start/);
  });
});
