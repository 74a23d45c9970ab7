import { MauticPermanentError, MauticResponseError } from '../errors.ts';
import type { ContactAction } from '../events.ts';
import { ENTITY_PATTERN } from '../mautic-names.ts';
import type {
  ActionFields,
  CallOptions,
  CompanyLink,
  ItemResult,
  MauticBatchApi,
} from '../ports.ts';
import { addToSegment, contactAction, findContacts, linkCompanies } from './mautic-contacts.ts';
import {
  apiErrorFor,
  createMauticHttp,
  isObject,
  type MauticAnswer,
  type MauticHttp,
  type MauticHttpOptions,
} from './mautic-http.ts';

/** One page of records from `GET /api/{entity}`. */
export interface RecordPage {
  /** All records matching the search (Mautic sends it as a string for contacts and companies). */
  total: number;
  /**
   * The records of this page. When Mautic keys them by id (contacts, companies) they come in
   * ascending id order, because JavaScript orders integer-like object keys that way.
   */
  records: Array<Record<string, unknown> & { id: number }>;
}

/** Entities whose response key is not their path name (docs/mautic.md §7). */
const RESPONSE_KEYS: Readonly<Record<string, string>> = {
  segments: 'lists',
  dynamiccontents: 'dynamicContents',
};
const NON_ENTITY_KEYS = new Set(['statusCodes', 'errors', 'total']);

/** How the client reaches Mautic, and who hears the version Mautic names. */
export interface MauticApiOptions extends MauticHttpOptions {
  /**
   * Told Mautic's version (its `Mautic-Version` header) from each API answer that names it. Only
   * Mautic's API controllers send it, so it comes with an authenticated call's answer; a token
   * answer or a 401 names none, and a 401 is not listened to even when a front adds one.
   */
  onVersion?: (version: string) => void;
}

/**
 * A client of Mautic's classic batch API. Each batch call returns one result per input item,
 * in input order, and absorbs Mautic's quirks: 201/200 overall even when items failed, lists
 * and errors as a JSON array or an object keyed by index, segments answering under `lists`,
 * deletes answering without `statusCodes`. A whole-call failure throws a `MauticError`.
 *
 * @example
 * const api = new MauticApiClient({ baseUrl, fetch });
 * const results = await api.create('contacts', [{ email: 'a@example.com' }], { accessToken });
 */
export class MauticApiClient implements MauticBatchApi {
  readonly #http: MauticHttp;
  readonly #now: () => number;
  readonly #onVersion: ((version: string) => void) | undefined;
  /** Cleared for good once Mautic has no bulk company links after all (a routing 404). */
  #bulkLinks = true;

  constructor(options: MauticApiOptions) {
    this.#http = createMauticHttp(options);
    this.#now = options.now ?? Date.now;
    this.#onVersion = options.onVersion;
  }

  /** `POST /api/{entity}/batch/new`. Contacts are matched by email and updated (status 200). */
  async create(
    entity: string,
    items: ReadonlyArray<Record<string, unknown>>,
    call: CallOptions,
  ): Promise<ItemResult[]> {
    const path = `/api/${checkEntity(entity)}/batch/new`;
    if (items.length === 0) return [];
    const answer = await this.#call('POST', path, call, { body: JSON.stringify(items) });
    return itemResults(entity, items.length, 'POST', path, answer);
  }

  /** `PATCH /api/{entity}/batch/edit`: partial updates; an unknown id is a per-item 404. */
  async edit(
    entity: string,
    items: ReadonlyArray<Record<string, unknown> & { id: number }>,
    call: CallOptions,
  ): Promise<ItemResult[]> {
    const path = `/api/${checkEntity(entity)}/batch/edit`;
    // Mautic mis-attributes items when some carry an id and some do not (docs/mautic.md §4.2).
    for (const item of items) checkId(item.id, 'items[].id');
    if (items.length === 0) return [];
    const answer = await this.#call('PATCH', path, call, { body: JSON.stringify(items) });
    return itemResults(entity, items.length, 'PATCH', path, answer);
  }

  /** `DELETE /api/{entity}/batch/delete?ids=…`. An id Mautic does not have counts as done. */
  async delete(
    entity: string,
    ids: ReadonlyArray<number>,
    call: CallOptions,
  ): Promise<ItemResult[]> {
    const path = `/api/${checkEntity(entity)}/batch/delete`;
    for (const id of ids) checkId(id, 'ids[]');
    if (ids.length === 0) return [];
    const answer = await this.#call('DELETE', path, call, { query: `ids=${ids.join(',')}` });
    return deleteResults(entity, ids, path, answer);
  }

  /** `GET /api/{entity}` with Mautic's `search` syntax (e.g. `email:a@example.com`). */
  async list(
    entity: string,
    query: { search?: string; start?: number; limit?: number },
    call: CallOptions,
  ): Promise<RecordPage> {
    const path = `/api/${checkEntity(entity)}`;
    const params = new URLSearchParams();
    if (query.search !== undefined) params.set('search', query.search);
    if (query.start !== undefined) params.set('start', String(checkCount(query.start, 'start')));
    if (query.limit !== undefined) params.set('limit', String(checkCount(query.limit, 'limit')));
    const answer = await this.#call('GET', path, call, { query: params.toString() });
    const bad = badShape('GET', path, answer.status);
    const json = answer.json;
    if (!isObject(json)) throw bad('a body that is not a JSON object');
    const total =
      typeof json.total === 'string' && /^\d+$/.test(json.total) ? Number(json.total) : json.total;
    if (typeof total !== 'number' || !Number.isInteger(total) || total < 0)
      throw bad('no numeric total');
    const list = json[listKey(entity, json)];
    if (list === undefined) return { total, records: [] };
    if (!isObject(list) && !Array.isArray(list))
      throw bad('a record list that is neither array nor object');
    const records = Object.values(list).map((record) => {
      const id = isObject(record) ? toId(record.id) : undefined;
      if (!isObject(record) || id === undefined) throw bad('a record without a numeric id');
      return { ...record, id };
    });
    return { total, records };
  }

  /** `GET /api/contacts` with `where … in`: exact, case-insensitive (mautic-contacts.ts). */
  findContacts(
    field: string,
    values: ReadonlyArray<string>,
    call: CallOptions,
  ): Promise<Map<string, number[]>> {
    return findContacts(this.#send, field, values, call);
  }

  /** `POST /api/segments/{id}/contacts/add`: many contacts, one call. */
  addToSegment(
    segmentId: number,
    contactIds: ReadonlyArray<number>,
    call: CallOptions,
  ): Promise<ItemResult[]> {
    return addToSegment(this.#send, segmentId, contactIds, call);
  }

  /** One integrator action on one contact, through its own endpoint (mautic-contacts.ts). */
  contactAction(
    action: ContactAction,
    contactId: number,
    fields: ActionFields,
    call: CallOptions,
  ): Promise<ItemResult> {
    return contactAction(this.#send, action, contactId, fields, call);
  }

  /**
   * `POST /api/companies/batch/addcontacts` (Mautic 7), as the delivery chooses it by version: a
   * Mautic that turns out not to have the route (a routing 404) is sent one call per pair, now
   * and for the client's life.
   */
  async linkCompanies(links: ReadonlyArray<CompanyLink>, call: CallOptions): Promise<ItemResult[]> {
    if (this.#bulkLinks) {
      try {
        return await linkCompanies(this.#send, links, call);
      } catch (error) {
        const unrouted =
          error instanceof MauticPermanentError &&
          error.status === 404 &&
          error.mauticMessage?.startsWith('Requested URL not found');
        if (!unrouted) throw error;
        this.#bulkLinks = false;
      }
    }
    const results: ItemResult[] = [];
    for (const { contactId, companyId } of links)
      results.push(await this.contactAction('linkCompany', contactId, { companyId }, call));
    return results;
  }

  readonly #send = (
    method: string,
    path: string,
    call: CallOptions,
    request: { body?: string; query?: string },
  ) => this.#call(method, path, call, request);

  async #call(
    method: string,
    path: string,
    call: CallOptions,
    request: { body?: string; query?: string },
  ): Promise<MauticAnswer> {
    // A token with white space would split or inject headers; say so without echoing it.
    if (!call.accessToken || /\s/.test(call.accessToken)) {
      throw new TypeError('Expected `accessToken` to be a non-empty string without white space.');
    }
    const answer = await this.#http.send({
      method,
      path,
      ...(request.query ? { query: request.query } : {}),
      headers: {
        authorization: `Bearer ${call.accessToken}`,
        accept: 'application/json',
        ...(request.body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(request.body === undefined ? {} : { body: request.body }),
      signal: call.signal,
      timeoutMs: call.timeoutMs,
    });
    const version = answer.status === 401 ? null : answer.headers.get('mautic-version');
    if (version) this.#onVersion?.(version);
    const error = apiErrorFor(method, path, answer, this.#now());
    if (error) throw error;
    if (!answer.isJson) throw badShape(method, path, answer.status)('a body that is not JSON');
    return answer;
  }
}

/** Maps a batch/new or batch/edit answer to one result per request item. */
function itemResults(
  entity: string,
  count: number,
  method: string,
  path: string,
  answer: MauticAnswer,
): ItemResult[] {
  const bad = badShape(method, path, answer.status);
  const json = answer.json;
  if (!isObject(json)) throw bad('a body that is not a JSON object');
  const statuses = byIndex(json.statusCodes, bad, 'statusCodes');
  const records = byIndex(json[listKey(entity, json)], bad, 'the record list');
  const errors = byIndex(json.errors, bad, 'errors');
  const results: ItemResult[] = [];
  for (let index = 0; index < count; index++) {
    const status = statuses.get(index);
    if (typeof status !== 'number' || !Number.isInteger(status) || status < 100 || status > 599) {
      throw bad(`no status code for item ${index}`);
    }
    if (status >= 200 && status < 300) {
      const record = records.get(index);
      const id = isObject(record) ? toId(record.id) : undefined;
      if (id === undefined) throw bad(`item ${index} marked ${status} without a record id`);
      results.push({ kind: 'delivered', status, id });
    } else {
      results.push(rejected(status, errors.get(index)));
    }
  }
  return results;
}

/**
 * Maps a batch/delete answer: it has no `statusCodes`, lists the records that were deleted
 * (keyed by request position) and skips ids Mautic does not have, which count as done.
 */
function deleteResults(
  entity: string,
  ids: ReadonlyArray<number>,
  path: string,
  answer: MauticAnswer,
): ItemResult[] {
  const bad = badShape('DELETE', path, answer.status);
  const json = answer.json;
  if (!isObject(json)) throw bad('a body that is not a JSON object');
  const errors = byIndex(json.errors, bad, 'errors');
  const deleted = new Set<number>();
  for (const record of byIndex(json[listKey(entity, json)], bad, 'the record list').values()) {
    const id = isObject(record) ? toId(record.id) : undefined;
    if (id !== undefined) deleted.add(id);
  }
  return ids.map((id, index): ItemResult => {
    const error = errors.get(index);
    if (error !== undefined)
      return rejected(isObject(error) && typeof error.code === 'number' ? error.code : 403, error);
    return { kind: 'delivered', status: deleted.has(id) ? 200 : 404, id };
  });
}

function rejected(status: number, error: unknown): ItemResult {
  const message =
    isObject(error) && typeof error.message === 'string' && error.message !== ''
      ? error.message
      : `Mautic answered ${status} for this item`;
  const details = isObject(error) ? error.details : undefined;
  const hasDetails =
    details !== undefined && details !== null && !(Array.isArray(details) && details.length === 0);
  return { kind: 'rejected', status, message, ...(hasDetails ? { details } : {}) };
}

/**
 * Mautic serialises its per-index maps as a JSON array only when the keys are exactly
 * 0..n-1, otherwise as an object keyed by index (docs/mautic.md §4.3). Both become a Map.
 */
function byIndex(
  value: unknown,
  bad: (problem: string) => Error,
  what: string,
): Map<number, unknown> {
  const map = new Map<number, unknown>();
  if (value === undefined || value === null) return map;
  if (Array.isArray(value)) {
    value.forEach((item, index) => {
      map.set(index, item);
    });
    return map;
  }
  if (!isObject(value)) throw bad(`${what} that is neither array nor object`);
  for (const [key, item] of Object.entries(value)) {
    if (!/^(0|[1-9]\d*)$/.test(key)) throw bad(`${what} keyed by something other than an index`);
    map.set(Number(key), item);
  }
  return map;
}

/** The key of the record list: the entity's own name, `lists` for segments, or the one key left. */
function listKey(entity: string, json: Record<string, unknown>): string {
  const known = RESPONSE_KEYS[entity] ?? entity;
  if (known in json) return known;
  const others = Object.keys(json).filter((key) => !NON_ENTITY_KEYS.has(key));
  return others.length === 1 && others[0] !== undefined ? others[0] : known;
}

function badShape(method: string, path: string, status: number) {
  return (problem: string) =>
    new MauticResponseError(problem, { method, path, status, retryable: true });
}

function toId(value: unknown): number | undefined {
  const id = typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : value;
  return typeof id === 'number' && Number.isSafeInteger(id) && id > 0 ? id : undefined;
}

function checkEntity(entity: string): string {
  if (!ENTITY_PATTERN.test(entity))
    throw new TypeError('Expected `entity` to match /^[a-z][a-zA-Z]{1,63}$/.');
  return entity;
}

function checkId(id: unknown, what: string): void {
  if (typeof id !== 'number' || !Number.isSafeInteger(id) || id <= 0) {
    throw new TypeError(`Expected \`${what}\` to be a positive integer.`);
  }
}

function checkCount(value: number, what: string): number {
  if (!Number.isSafeInteger(value) || value < 0)
    throw new TypeError(`Expected \`${what}\` to be a non-negative integer.`);
  return value;
}
