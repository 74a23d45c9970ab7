/**
 * The REST half of the Mautic simulator (docs/mautic.md §4, §5, §7): the entity store and what
 * the batch, list and item controllers answer.
 */
import {
  isPhpIntKey,
  isValidEmail,
  type PhpArray,
  type PhpValue,
  phpArrayToJs,
  phpEmpty,
  phpIsNumeric,
  phpJsonEncode,
  sanitizeEmail,
} from './php.ts';
import {
  type DecodedBody,
  exceptionError,
  type Reply,
  type SimRequest,
  scalar,
} from './symfony.ts';
import { applyWrite, type WriteMode } from './write-rules.ts';

/** A FOSRest view of an API controller: JMS escaping and the Mautic-Version header. */
function view(status: number, payload: unknown): Reply {
  return {
    status,
    headers: {
      'content-type': 'application/json',
      'cache-control': 'no-cache, private',
      'mautic-version': MAUTIC_VERSION,
    },
    body: phpJsonEncode(payload),
  };
}

/** FetchCommonApiController::returnError outside batch mode: `type` is null, so omitted. */
function returnError(status: number, message: string): Reply {
  return view(status, { errors: [{ code: status, message, details: [] }] });
}

// ---------------------------------------------------------------------------------------------
// Entities (§4, §5, §7)

const MAUTIC_VERSION = '5.1.0';

type EntityName = 'contacts' | 'companies' | 'segments';
const ENTITY_NAMES: readonly EntityName[] = ['contacts', 'companies', 'segments'];

interface StoredRecord {
  id: number;
  addedAt: number;
  modifiedAt: number;
  fields: Record<string, unknown>;
}

/** The entity store and the settings its controllers read. */
export interface EntityState {
  now: () => number;
  batchMaxLimit: number;
  stores: Record<EntityName, { lastId: number; records: Map<number, StoredRecord> }>;
  /**
   * The contacts under their stored email lower-cased (string emails only), so the upsert does
   * not scan every contact. Kept by `insert`, `write` and `batchDelete`, the only places that
   * add, change or remove a contact's fields.
   */
  contactsByEmail: Map<string, Set<StoredRecord>>;
}

/** An empty store for contacts, companies and segments. */
export function createEntityState(now: () => number, batchMaxLimit: number): EntityState {
  const empty = () => ({ lastId: 0, records: new Map<number, StoredRecord>() });
  return {
    now,
    batchMaxLimit,
    stores: { contacts: empty(), companies: empty(), segments: empty() },
    contactsByEmail: new Map(),
  };
}

function entityName(entity: string): EntityName {
  const name = ENTITY_NAMES.find((candidate) => candidate === entity);
  if (name === undefined) {
    throw new TypeError(`Unknown entity "${entity}": use ${ENTITY_NAMES.join(', ')}`);
  }
  return name;
}

/** Stored records of one entity as flat field maps, in id order. */
export function listRecords(state: EntityState, entity: string) {
  return [...state.stores[entityName(entity)].records.values()]
    .sort((a, b) => a.id - b.id)
    .map(flatten);
}

/** Inserts a record as given; an `id` is ignored, `dateAdded` (ISO-8601) is kept. */
export function seedRecord(state: EntityState, entity: string, record: Record<string, unknown>) {
  const fields: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(record)) {
    if (!RESERVED_FIELDS.has(key)) fields[key] = value;
  }
  const added = typeof record.dateAdded === 'string' ? Date.parse(record.dateAdded) : Number.NaN;
  const addedAt = Number.isNaN(added) ? state.now() : added;
  return { id: insert(state, entityName(entity), fields, addedAt).id };
}

/** Items of a batch request: body entries for new and edit, ids for delete. */
export function batchItemCount(req: SimRequest): number | undefined {
  if (/^\/api\/[^/]+\/batch\/(new|edit)$/.test(req.path)) return countBody(req.body);
  if (/^\/api\/[^/]+\/batch\/delete$/.test(req.path)) return deleteIds(req.query).length;
  return undefined;
}

interface EntityDefinition {
  multi: string;
  one: string;
  /** CustomFieldsApiControllerTrait: blanks and zeros do not overwrite on POST and PATCH. */
  customFields: boolean;
  /** Raw-SQL lists: `total` is a string and the list an object keyed by id (§5.4). */
  rawSqlList: boolean;
}

const ENTITIES: Record<EntityName, EntityDefinition> = {
  contacts: { multi: 'contacts', one: 'contact', customFields: true, rawSqlList: true },
  companies: { multi: 'companies', one: 'company', customFields: true, rawSqlList: true },
  segments: { multi: 'lists', one: 'list', customFields: false, rawSqlList: false },
};

// __proto__ too: a JSON body may carry it, and assigning it would swap a record's prototype.
const RESERVED_FIELDS = new Set([
  'id',
  'dateAdded',
  'dateModified',
  'overwriteWithBlank',
  '__proto__',
]);

function phpDate(ms: number): string {
  return `${new Date(ms).toISOString().slice(0, 19)}+00:00`;
}

function present(entity: EntityName, record: StoredRecord): Record<string, unknown> {
  const common = {
    id: record.id,
    isPublished: true,
    dateAdded: phpDate(record.addedAt),
    dateModified: phpDate(record.modifiedAt),
    createdBy: null,
    createdByUser: null,
    modifiedBy: null,
    modifiedByUser: null,
  };
  if (entity === 'segments') return { ...common, ...record.fields };
  const all = { id: record.id, ...record.fields };
  if (entity === 'companies') return { ...common, fields: { all } };
  const hasEmail = typeof record.fields.email === 'string' && record.fields.email !== '';
  return {
    ...common,
    owner: null,
    points: Number(record.fields.points) || 0,
    lastActive: null,
    dateIdentified: hasEmail ? phpDate(record.addedAt) : null,
    color: null,
    ipAddresses: [],
    fields: { all },
    tags: Array.isArray(record.fields.tags) ? record.fields.tags.map((tag) => ({ tag })) : [],
    utmtags: [],
    stage: null,
    doNotContact: [],
    frequencyRules: [],
  };
}

function flatten(record: StoredRecord): Record<string, unknown> & { id: number } {
  return {
    id: record.id,
    ...record.fields,
    dateAdded: phpDate(record.addedAt),
    dateModified: phpDate(record.modifiedAt),
  };
}

function isBlank(value: unknown): boolean {
  return value === null || value === '' || value === 0 || value === '0';
}

/** The submitted fields of one item: reserved keys out, the email cleaned as InputHelper does. */
function submittedFields(entity: EntityName, item: Record<string, unknown>) {
  const fields: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(item)) {
    if (!RESERVED_FIELDS.has(key)) fields[key] = value;
  }
  if (entity === 'contacts' && typeof fields.email === 'string') {
    fields.email = sanitizeEmail(fields.email);
  }
  return { fields, overwriteWithBlank: !phpEmpty(item.overwriteWithBlank) };
}

// ----- Write rules (issue 11): the field logic lives in write-rules.ts -----
function mergeFields(
  entity: EntityName,
  current: Record<string, unknown>,
  submitted: { fields: Record<string, unknown>; overwriteWithBlank: boolean },
  mode: WriteMode,
): Record<string, unknown> {
  return applyWrite(current, submitted.fields, {
    mode,
    overwriteWithBlank: submitted.overwriteWithBlank,
    contact: entity === 'contacts',
    customFields: ENTITIES[entity].customFields,
  });
}
// ----- end of write rules -----

/** A form violation, or undefined; only the constraints the simulator knows (§5.3, segments). */
function violation(
  entity: EntityName,
  submitted: Record<string, unknown>,
  result: Record<string, unknown>,
): { field: string; message: string } | undefined {
  if (entity === 'contacts' && 'email' in submitted && !isBlank(submitted.email)) {
    const email = String(submitted.email);
    if (!isValidEmail(email)) return { field: 'email', message: `${email} is invalid.` };
    if (/[\^&*%]/.test(email)) {
      return { field: 'email', message: `${email} has characters not allowed in email addresses.` };
    }
  }
  if (entity === 'segments' && (typeof result.name !== 'string' || result.name.trim() === '')) {
    return { field: 'name', message: 'A value is required.' };
  }
  return undefined;
}

type ItemOutcome =
  | { status: number; record: StoredRecord }
  | { status: number; error: Record<string, unknown> };

function batchError(message: string, code: number): ItemOutcome {
  return { status: code, error: { message, code, type: 'api' } };
}

/** Validates and stores one item; `existing` undefined creates a record with a new id. */
function write(
  state: EntityState,
  entity: EntityName,
  existing: StoredRecord | undefined,
  item: Record<string, unknown>,
  mode: WriteMode,
  successStatus: number,
): ItemOutcome {
  const submitted = submittedFields(entity, item);
  const fields = mergeFields(entity, existing?.fields ?? {}, submitted, mode);
  const problem = violation(entity, submitted.fields, fields);
  if (problem !== undefined) {
    const message = `${problem.field}: ${problem.message}`;
    const details = { [problem.field]: [problem.message] };
    return { status: 400, error: { code: 400, message, details, type: null } };
  }
  const now = state.now();
  if (existing !== undefined) {
    if (entity === 'contacts') unindexContact(state, existing);
    existing.fields = fields;
    if (entity === 'contacts') indexContact(state, existing);
    existing.modifiedAt = now;
    return { status: successStatus, record: existing };
  }
  return { status: successStatus, record: insert(state, entity, fields, now) };
}

function insert(
  state: EntityState,
  entity: EntityName,
  fields: Record<string, unknown>,
  addedAt: number,
): StoredRecord {
  const store = state.stores[entity];
  store.lastId += 1;
  const record = { id: store.lastId, addedAt, modifiedAt: addedAt, fields };
  store.records.set(record.id, record);
  if (entity === 'contacts') indexContact(state, record);
  return record;
}

/** The key of a contact in `contactsByEmail`; undefined when its email is not a string. */
function emailKey(record: StoredRecord): string | undefined {
  const stored = record.fields.email;
  return typeof stored === 'string' ? stored.toLowerCase() : undefined;
}

function indexContact(state: EntityState, record: StoredRecord): void {
  const key = emailKey(record);
  if (key === undefined) return;
  const holders = state.contactsByEmail.get(key);
  if (holders === undefined) state.contactsByEmail.set(key, new Set([record]));
  else holders.add(record);
}

/** Call before the record's fields change or it leaves the store. */
function unindexContact(state: EntityState, record: StoredRecord): void {
  const key = emailKey(record);
  if (key === undefined) return;
  const holders = state.contactsByEmail.get(key);
  holders?.delete(record);
  if (holders?.size === 0) state.contactsByEmail.delete(key);
}

/** LeadModel::checkForDuplicateContact: case-insensitive email, most recently added wins. */
function findContactByEmail(state: EntityState, email: string): StoredRecord | undefined {
  let best: StoredRecord | undefined;
  for (const record of state.contactsByEmail.get(email.toLowerCase()) ?? []) {
    const newer =
      best === undefined ||
      record.addedAt > best.addedAt ||
      (record.addedAt === best.addedAt && record.id > best.id);
    if (newer) best = record;
  }
  return best;
}

/** An id as SQL `IN (…)` would match it: integers and numeric strings. */
function findById(state: EntityState, entity: EntityName, raw: unknown): StoredRecord | undefined {
  const text = typeof raw === 'number' ? String(raw) : typeof raw === 'string' ? raw.trim() : '';
  const match = /^(\d+)(\.0*)?$/.exec(text);
  return match?.[1] === undefined ? undefined : state.stores[entity].records.get(Number(match[1]));
}

/**
 * The request items keyed as PHP keys them. Undefined for what makes Mautic's batch loop throw
 * (a string key or a non-object item: a TypeError, hence a generic 500).
 */
function batchItems(body: DecodedBody): Array<[string, Record<string, unknown>]> | undefined {
  let entries: Array<[string, unknown]>;
  if (body.kind === 'json') {
    entries = Array.isArray(body.value)
      ? body.value.map((item, index) => [String(index), item])
      : Object.entries(body.value as object);
  } else if (body.kind === 'form') {
    entries = [...body.params.entries()].map(([key, value]) => [key, phpArrayToJs(value)]);
  } else {
    entries = [];
  }
  const items: Array<[string, Record<string, unknown>]> = [];
  for (const [key, item] of entries) {
    if (!isPhpIntKey(key) || item === null || typeof item !== 'object' || Array.isArray(item)) {
      return undefined;
    }
    items.push([key, item as Record<string, unknown>]);
  }
  return items;
}

function countBody(body: DecodedBody): number {
  if (body.kind === 'json') {
    return Array.isArray(body.value) ? body.value.length : Object.keys(body.value as object).length;
  }
  // A form body's access_token is taken out by oauth2-php before Mautic counts anything.
  if (body.kind === 'form')
    return [...body.params.keys()].filter((key) => key !== 'access_token').length;
  return 0;
}

function batchLimitError(state: EntityState): Reply {
  return returnError(500, `A max of ${state.batchMaxLimit} entities are supported at a time.`);
}

function batchResponse(
  status: number,
  entity: EntityName,
  outcomes: Array<[string, ItemOutcome]>,
): Reply {
  const list = new Map<string, unknown>();
  const statusCodes = new Map<string, number>();
  const errors = new Map<string, unknown>();
  for (const [key, outcome] of outcomes) {
    statusCodes.set(key, outcome.status);
    if ('error' in outcome) errors.set(key, outcome.error);
    else list.set(key, present(entity, outcome.record));
  }
  return view(status, {
    [ENTITIES[entity].multi]: list,
    statusCodes,
    errors: errors.size > 0 ? errors : undefined,
  });
}

function batchNew(state: EntityState, entity: EntityName, body: DecodedBody): Reply {
  if (countBody(body) > state.batchMaxLimit) return batchLimitError(state);
  const items = batchItems(body);
  if (items === undefined) return exceptionError(500);
  const outcomes: Array<[string, ItemOutcome]> = [];
  // Sequential on purpose: a duplicate email later in the batch finds the contact just created.
  for (const [key, item] of items) {
    const email = typeof item.email === 'string' ? sanitizeEmail(item.email) : '';
    const match =
      entity === 'contacts' && email !== '' ? findContactByEmail(state, email) : undefined;
    outcomes.push([
      key,
      match === undefined
        ? write(state, entity, undefined, item, 'post', 201)
        : write(state, entity, match, item, 'patch', 200),
    ]);
  }
  return batchResponse(201, entity, outcomes);
}

function batchEdit(
  state: EntityState,
  entity: EntityName,
  method: string,
  body: DecodedBody,
): Reply {
  if (countBody(body) > state.batchMaxLimit) return batchLimitError(state);
  const items = batchItems(body);
  if (items === undefined) return exceptionError(500);
  const hasId = (item: Record<string, unknown>) => item.id !== undefined && item.id !== null;
  // BatchIdToEntityHelper only reports missing ids when at least one item has one.
  const someHaveIds = items.some(([, item]) => hasId(item));
  const outcomes: Array<[string, ItemOutcome]> = [];
  for (const [key, item] of items) {
    if (someHaveIds && !hasId(item)) {
      outcomes.push([key, batchError('mautic.api.call.id_missing', 400)]);
      continue;
    }
    const existing = findById(state, entity, item.id);
    if (existing !== undefined) {
      outcomes.push([
        key,
        write(state, entity, existing, item, method === 'PUT' ? 'put' : 'patch', 200),
      ]);
    } else if (method === 'PATCH') {
      outcomes.push([key, batchError('Item was not found.', 404)]);
    } else {
      outcomes.push([key, write(state, entity, undefined, item, 'put', 201)]);
    }
  }
  return batchResponse(200, entity, outcomes);
}

/** BatchIdToEntityHelper::extractIdsFromIdKey: `ids=1,2`, `ids=5`, `ids[]=1`, `ids[k]=1`. */
function deleteIds(query: PhpArray): Array<[string, PhpValue]> {
  const ids = query.get('ids');
  if (ids instanceof Map) return [...ids.entries()];
  if (ids !== undefined && (ids.includes(',') || phpIsNumeric(ids))) {
    return ids.split(',').map((id, index) => [String(index), id]);
  }
  return [];
}

function batchDelete(state: EntityState, entity: EntityName, query: PhpArray): Reply {
  // The limit counts query parameters, so `ids` is one however many ids it holds (§4.4).
  if (query.size > state.batchMaxLimit) return batchLimitError(state);
  const deleted = new Map<string, unknown>();
  const found: StoredRecord[] = [];
  for (const [key, raw] of deleteIds(query)) {
    const record = typeof raw === 'string' ? findById(state, entity, raw) : undefined;
    if (record === undefined) continue;
    deleted.set(key, present(entity, record));
    found.push(record);
  }
  for (const record of found) {
    state.stores[entity].records.delete(record.id);
    if (entity === 'contacts') unindexContact(state, record);
  }
  return view(200, { [ENTITIES[entity].multi]: deleted });
}

function matchesSearch(record: StoredRecord, search: string): boolean {
  const ids = /^ids:(.*)$/i.exec(search);
  if (ids?.[1] !== undefined) {
    return ids[1].split(',').some((id) => id.trim() === String(record.id));
  }
  const command = /^([A-Za-z0-9_]+):(.*)$/.exec(search);
  if (command?.[1] !== undefined && command[2] !== undefined) {
    const value = record.fields[command[1]];
    return value !== undefined && String(value).toLowerCase() === command[2].toLowerCase();
  }
  const needle = search.toLowerCase();
  return Object.values(record.fields).some(
    (value) =>
      (typeof value === 'string' || typeof value === 'number') &&
      String(value).toLowerCase().includes(needle),
  );
}

function listEntities(state: EntityState, entity: EntityName, query: PhpArray): Reply {
  const search = (scalar(query.get('search')) ?? '').trim();
  const start = Math.max(0, Number.parseInt(scalar(query.get('start')) ?? '0', 10) || 0);
  const limit = Number.parseInt(scalar(query.get('limit')) ?? '30', 10) || 0;
  const matching = [...state.stores[entity].records.values()]
    .filter((record) => search === '' || matchesSearch(record, search))
    .sort((a, b) => a.id - b.id);
  const page = matching.slice(start, limit > 0 ? start + limit : undefined);
  const definition = ENTITIES[entity];
  if (!definition.rawSqlList) {
    return view(200, {
      total: matching.length,
      [definition.multi]: page.map((record) => present(entity, record)),
    });
  }
  const byId: Record<string, unknown> = {};
  for (const record of page) byId[String(record.id)] = present(entity, record);
  return view(200, { total: String(matching.length), [definition.multi]: byId });
}

/** The entity routes of §4.1 that the simulator serves; anything else is the catch-all 404. */
export function routeEntities(state: EntityState, req: SimRequest): Reply {
  const match = /^\/api\/(contacts|companies|segments)(?:\/(.*))?$/.exec(req.path);
  const entity = ENTITY_NAMES.find((name) => name === match?.[1]);
  const rest = match?.[2];
  const { method } = req;
  if (entity !== undefined) {
    if (rest === undefined && method === 'GET') return listEntities(state, entity, req.query);
    if (rest === 'batch/new' && method === 'POST') return batchNew(state, entity, req.body);
    if (rest === 'batch/edit' && (method === 'PUT' || method === 'PATCH')) {
      return batchEdit(state, entity, method, req.body);
    }
    if (rest === 'batch/delete' && method === 'DELETE') {
      return batchDelete(state, entity, req.query);
    }
    if (rest !== undefined && /^\d+$/.test(rest) && method === 'GET') {
      const record = state.stores[entity].records.get(Number(rest));
      return record === undefined
        ? returnError(404, 'Item was not found.')
        : view(200, { [ENTITIES[entity].one]: present(entity, record) });
    }
  }
  return exceptionError(404, `Requested URL not found: ${req.path}`);
}
