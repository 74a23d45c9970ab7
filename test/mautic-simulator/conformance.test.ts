import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULT_SIMULATOR_CLIENT, startMauticSimulator } from '../../mautic-simulator/server.ts';

/**
 * The answers recorded from a real, unmodified Mautic 5.1.1 (real-mautic-5.1.1/, one
 * file per call, in the order they were made) replayed against the simulator. Status codes and
 * bodies must be the same: every key and its order, arrays and objects keyed by position,
 * `statusCodes`, `errors` with their codes, types and messages, and every value, once what
 * differs by nature is normalised (record ids, dates, the API user's name, the token).
 */
const RECORDINGS = join(import.meta.dirname, 'real-mautic-5.1.1');

/** The recorded calls in the order they were made (summary.json lists them so). */
const CALLS = [
  'token',
  'bad_token',
  'contacts_batch_new',
  'contacts_batch_new_dup_and_invalid',
  'contacts_batch_edit',
  'contacts_batch_edit_missing_ids',
  'contacts_batch_delete',
  'companies_batch_new',
  'companies_batch_edit',
  'companies_batch_delete',
  'contacts_batch_new_201_over_limit',
  'contact_single_new',
];

interface Recording {
  request: { method: string; path: string; body: unknown };
  status: number;
  response: Record<string, unknown>;
}

function recording(name: string): Recording {
  return JSON.parse(readFileSync(join(RECORDINGS, `${name}.json`), 'utf8')) as Recording;
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** The records of an answer: its entity list (an array or an object keyed by position), or the one record. */
function recordsOf(body: Record<string, unknown>): Array<[string, Record<string, unknown>]> {
  for (const key of ['contacts', 'companies']) {
    const list = body[key];
    if (Array.isArray(list)) return list.map((record, index) => [`${key}.${index}`, record]);
    if (isObject(list))
      return Object.entries(list).map(([at, record]) => [
        `${key}.${at}`,
        record as Record<string, unknown>,
      ]);
  }
  return isObject(body.contact) ? [['contact', body.contact]] : [];
}

const DATE = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00$/;

/**
 * The body with what differs by nature replaced by its kind: a record's id (and its
 * `fields.all.id`) by `<id:number>` or `<id:string>`, dates by `<date>`, the API user's name by
 * `<user>`, the access token by `<token>`.
 */
function normalise(body: Record<string, unknown>): unknown {
  const copy = structuredClone(body);
  for (const [, record] of recordsOf(copy)) {
    record.id = `<id:${typeof record.id}>`;
    const all = isObject(record.fields) && isObject(record.fields.all) ? record.fields.all : {};
    if ('id' in all) all.id = `<id:${typeof all.id}>`;
  }
  if (typeof copy.access_token === 'string') copy.access_token = '<token>';
  const walk = (value: unknown, key = ''): unknown => {
    if (Array.isArray(value)) return value.map((item) => walk(item));
    if (isObject(value)) {
      return Object.fromEntries(
        Object.entries(value).map(([name, item]) => [name, walk(item, name)]),
      );
    }
    if (typeof value === 'string' && DATE.test(value)) return '<date>';
    if (typeof value === 'string' && /^(created|modified)ByUser$/.test(key)) return '<user>';
    return value;
  };
  return walk(copy);
}

/** Every object's keys in order, by path: what `toEqual` does not compare. */
function keyOrder(value: unknown, path = '$'): string[] {
  if (Array.isArray(value))
    return value.flatMap((item, index) => keyOrder(item, `${path}[${index}]`));
  if (!isObject(value)) return [];
  return [
    `${path}: ${Object.keys(value).join(',')}`,
    ...Object.entries(value).flatMap(([key, item]) => keyOrder(item, `${path}.${key}`)),
  ];
}

describe('the simulator answers as the recorded Mautic 5.1.1', () => {
  it('knows every recording (summary.json lists them, with timings, in short)', () => {
    const files = readdirSync(RECORDINGS).filter((file) => file.endsWith('.json'));
    expect(files.sort()).toEqual([...CALLS.map((name) => `${name}.json`), 'summary.json'].sort());
  });

  it('replays every recorded call with the same status and body', async () => {
    const sim = await startMauticSimulator();
    try {
      const { accessToken } = sim.issueToken();
      /** Recorded record id → the simulator's, per entity: one record is one id in both. */
      const ids = new Map<string, number>();
      const mapId = (entity: string, id: unknown) => ids.get(`${entity}:${id}`) ?? Number(id);
      const seen: string[] = [];

      for (const name of CALLS) {
        const { request, status, response } = recording(name);
        const entity = request.path.includes('/companies') ? 'companies' : 'contacts';
        let body = request.body;
        const headers: Record<string, string> = { 'content-type': 'application/json' };
        if (name === 'token') {
          // Sent as JSON: Mautic 5.1.1 accepts a JSON body at its token endpoint.
          body = {
            grant_type: 'client_credentials',
            client_id: DEFAULT_SIMULATOR_CLIENT.clientId,
            client_secret: DEFAULT_SIMULATOR_CLIENT.clientSecret,
          };
        } else {
          headers.authorization = `Bearer ${name === 'bad_token' ? 'not-a-token' : accessToken}`;
        }
        if (body === '<201 contacts>') {
          body = Array.from({ length: 201 }, (_, i) => ({ email: `over${i}@example.com` }));
        }
        if (Array.isArray(body)) {
          body = body.map((item: Record<string, unknown>) =>
            'id' in item ? { ...item, id: mapId(entity, item.id) } : item,
          );
        }
        const path = request.path.replace(
          /ids=([\d,]+)/,
          (_, list: string) =>
            `ids=${list
              .split(',')
              .map((id) => mapId(entity, id))
              .join(',')}`,
        );

        const answer = await fetch(`${sim.url}${path}`, {
          method: request.method,
          headers,
          body: body === null ? null : JSON.stringify(body),
        });
        const got = (await answer.json()) as Record<string, unknown>;

        expect({ name, status: answer.status }).toEqual({ name, status });
        // The recordings hold no headers; measured on the real 5.1.1, only an API controller's
        // answer names the version, not the token endpoint's nor the firewall's 401.
        const named = name === 'token' || name === 'bad_token' ? null : '5.1.1';
        expect(answer.headers.get('mautic-version'), name).toBe(named);
        expect(normalise(got), name).toEqual(normalise(response));
        expect(keyOrder(normalise(got)), name).toEqual(keyOrder(normalise(response)));
        // The same recorded record is the same simulated one: an upsert finds the contact the
        // earlier call created, an edit and a delete the ones they name.
        const simulated = new Map(recordsOf(got));
        for (const [at, record] of recordsOf(response)) {
          const key = `${entity}:${record.id}`;
          const simId = simulated.get(at)?.id as number;
          expect(ids.get(key) ?? simId, `${name} ${at}`).toBe(simId);
          // …and two recorded records are two simulated ones.
          const other = [...ids].find(
            ([known, id]) => id === simId && known.startsWith(`${entity}:`),
          );
          expect(other?.[0] ?? key, `${name} ${at}`).toBe(key);
          ids.set(key, simId);
        }
        seen.push(name);
      }
      expect(seen).toEqual(CALLS);
    } finally {
      await sim.close();
    }
  });
});
