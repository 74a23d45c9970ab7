/**
 * The REST half of the Mautic simulator (reference §4, §5, §7): the entity store and what the
 * batch, list and item controllers answer. Also the PHP, Symfony and FOSRestBundle mechanics both
 * halves share (json_encode escaping, parse_str, the body listener, the response shapes), so that
 * mautic-simulator.ts reads as the OAuth2 server and the HTTP harness around them.
 */
import type { IncomingHttpHeaders } from 'node:http';

// ---------------------------------------------------------------------------------------------
// PHP functions whose output a client can tell apart

/** A PHP array as parse_str builds it: ordered, string keys, string or nested-array values. */
export type PhpArray = Map<string, PhpValue>;
/** One value of a parsed query string or form body. */
type PhpValue = string | PhpArray;

/**
 * PHP's json_encode. `hex` adds the JSON_HEX_* flags that Symfony's JsonResponse uses (so an
 * apostrophe becomes \u0027). A Map stands for a PHP array: it becomes a JSON array only when its
 * keys are exactly 0..n-1 in order, otherwise an object, which is the root of Mautic's batch
 * response quirk. Object properties whose value is undefined are left out.
 */
export function phpJsonEncode(value: unknown, options: { hex?: boolean } = {}): string {
  return encodeValue(value, options.hex === true);
}

function encodeValue(value: unknown, hex: boolean): string {
  if (value === null || value === undefined) return 'null';
  if (typeof value === 'string') return encodeString(value, hex);
  if (typeof value === 'number') return Number.isFinite(value) ? String(value) : '0';
  if (typeof value === 'boolean') return value ? 'true' : 'false';
  if (value instanceof Map) {
    const entries = [...value.entries()];
    if (entries.every(([key], index) => String(key) === String(index))) {
      return `[${entries.map(([, item]) => encodeValue(item, hex)).join(',')}]`;
    }
    return `{${entries.map(([key, item]) => `${encodeString(String(key), hex)}:${encodeValue(item, hex)}`).join(',')}}`;
  }
  if (Array.isArray(value)) return `[${value.map((item) => encodeValue(item, hex)).join(',')}]`;
  if (typeof value === 'object') {
    const parts: string[] = [];
    for (const [key, item] of Object.entries(value)) {
      if (item !== undefined) parts.push(`${encodeString(key, hex)}:${encodeValue(item, hex)}`);
    }
    return `{${parts.join(',')}}`;
  }
  return 'null';
}

const ESCAPES: Record<string, string> = {
  '"': '\\"',
  '\\': '\\\\',
  '/': '\\/',
  '\b': '\\b',
  '\t': '\\t',
  '\n': '\\n',
  '\f': '\\f',
  '\r': '\\r',
};
// JSON_HEX_TAG | JSON_HEX_AMP | JSON_HEX_APOS | JSON_HEX_QUOT, in PHP's own spelling.
const HEX_ESCAPES: Record<string, string> = {
  '<': '\\u003C',
  '>': '\\u003E',
  '&': '\\u0026',
  "'": '\\u0027',
  '"': '\\u0022',
};

function encodeString(text: string, hex: boolean): string {
  let out = '"';
  for (const char of text) {
    const escaped = (hex ? HEX_ESCAPES[char] : undefined) ?? ESCAPES[char];
    if (escaped !== undefined) {
      out += escaped;
      continue;
    }
    const code = char.charCodeAt(0);
    if (code >= 0x20 && code < 0x80) {
      out += char;
      continue;
    }
    // PHP escapes every non-ASCII character (no JSON_UNESCAPED_UNICODE) as lower-case UTF-16
    // units, so a character outside the BMP becomes a surrogate pair.
    for (let i = 0; i < char.length; i++) {
      out += `\\u${char.charCodeAt(i).toString(16).padStart(4, '0')}`;
    }
  }
  return `${out}"`;
}

/** PHP's urldecode: `+` is a space, malformed `%` sequences stay as they are. */
export function phpUrldecode(text: string): string {
  const source = Buffer.from(text, 'utf8');
  const bytes: number[] = [];
  for (let i = 0; i < source.length; i++) {
    const byte = source[i] ?? 0;
    if (byte === 0x2b) {
      bytes.push(0x20);
      continue;
    }
    if (byte === 0x25 && i + 2 < source.length) {
      const pair = source.subarray(i + 1, i + 3).toString('latin1');
      if (/^[0-9A-Fa-f]{2}$/.test(pair)) {
        bytes.push(Number.parseInt(pair, 16));
        i += 2;
        continue;
      }
    }
    bytes.push(byte);
  }
  return Buffer.from(bytes).toString('utf8');
}

/**
 * PHP's parse_str, which is how PHP reads query strings and form bodies: `a[]=1&a[]=2` and
 * `a[0]=1` make nested arrays, spaces and dots in names become underscores, later keys win.
 */
export function parsePhpQuery(query: string): PhpArray {
  const result: PhpArray = new Map();
  for (const pair of query.split('&')) {
    if (pair === '') continue;
    const eq = pair.indexOf('=');
    const name = phpUrldecode(eq === -1 ? pair : pair.slice(0, eq)).replace(/^ +/, '');
    const value = eq === -1 ? '' : phpUrldecode(pair.slice(eq + 1));
    assignPhpKey(result, name, value);
  }
  return result;
}

function assignPhpKey(target: PhpArray, name: string, value: string): void {
  const open = name.indexOf('[');
  let base = open === -1 ? name : name.slice(0, open);
  const segments: string[] = [];
  if (open !== -1) {
    let rest = name.slice(open);
    while (rest.startsWith('[')) {
      const close = rest.indexOf(']');
      if (close === -1) break;
      segments.push(rest.slice(1, close));
      rest = rest.slice(close + 1);
    }
    // An unmatched '[' cannot start an array, so PHP keeps the name with the '[' turned into '_'.
    if (segments.length === 0) base = name.replace('[', '_');
  }
  base = base.replace(/[ .]/g, '_');
  if (base === '') return;
  let container = target;
  let key = base;
  for (const segment of segments) {
    let next = container.get(key);
    if (!(next instanceof Map)) {
      next = new Map();
      container.set(key, next);
    }
    container = next;
    key = segment === '' ? String(nextPhpIndex(container)) : segment;
  }
  container.set(key, value);
}

function nextPhpIndex(array: PhpArray): number {
  let next = 0;
  for (const key of array.keys()) {
    if (isPhpIntKey(key)) next = Math.max(next, Number(key) + 1);
  }
  return next;
}

/** Whether PHP would store this array key as an integer. */
function isPhpIntKey(key: string): boolean {
  return /^(0|-?[1-9]\d{0,17})$/.test(key);
}

/** The JSON-like value json_decode would have produced for the same PHP array. */
function phpArrayToJs(value: PhpValue): unknown {
  if (typeof value === 'string') return value;
  const entries = [...value.entries()];
  if (entries.every(([key], index) => key === String(index))) {
    return entries.map(([, item]) => phpArrayToJs(item));
  }
  return Object.fromEntries(entries.map(([key, item]) => [key, phpArrayToJs(item)]));
}

/** PHP's empty(): null, '', '0', 0, false and empty arrays. */
export function phpEmpty(value: unknown): boolean {
  if (value === undefined || value === null || value === false || value === 0) return true;
  if (value === '' || value === '0') return true;
  if (Array.isArray(value)) return value.length === 0;
  if (value instanceof Map) return value.size === 0;
  if (typeof value === 'object') return Object.keys(value).length === 0;
  return false;
}

/** PHP's is_numeric for a string (PHP 8 allows leading and trailing whitespace). */
function phpIsNumeric(text: string): boolean {
  return /^\s*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\s*$/.test(text);
}

/** FILTER_SANITIZE_EMAIL: drops every character that may not appear in an email address. */
function sanitizeEmail(text: string): string {
  return text.replace(/[^A-Za-z0-9!#$%&'*+\-=?^_`{|}~@.[\]]/g, '');
}

// PHP's FILTER_VALIDATE_EMAIL pattern (Michael Rushton's, ext/filter/logical_filters.c, the
// non-Unicode variant). The domain's `(?:label\.){1,126}){1,}` is written as `(?:label\.)+`:
// the same language, without the exponential backtracking that PCRE caps and JavaScript does not.
const EMAIL_PATTERN =
  // biome-ignore lint/suspicious/noControlCharactersInRegex: quoted local parts may hold control characters.
  /^(?!(?:(?:\x22?\x5C[\x00-\x7E]\x22?)|(?:\x22?[^\x5C\x22]\x22?)){255,})(?!(?:(?:\x22?\x5C[\x00-\x7E]\x22?)|(?:\x22?[^\x5C\x22]\x22?)){65,}@)(?:(?:[\x21\x23-\x27\x2A\x2B\x2D\x2F-\x39\x3D\x3F\x5E-\x7E]+)|(?:\x22(?:[\x01-\x08\x0B\x0C\x0E-\x1F\x21\x23-\x5B\x5D-\x7F]|(?:\x5C[\x00-\x7F]))*\x22))(?:\.(?:(?:[\x21\x23-\x27\x2A\x2B\x2D\x2F-\x39\x3D\x3F\x5E-\x7E]+)|(?:\x22(?:[\x01-\x08\x0B\x0C\x0E-\x1F\x21\x23-\x5B\x5D-\x7F]|(?:\x5C[\x00-\x7F]))*\x22)))*@(?:(?:(?!.*[^.]{64,})(?:(?:xn--)?[a-z0-9]+(?:-+[a-z0-9]+)*\.)+(?:(?:[a-z][a-z0-9]*)|(?:(?:xn--)[a-z0-9]+))(?:-+[a-z0-9]+)*)|(?:\[(?:(?:IPv6:(?:(?:[a-f0-9]{1,4}(?::[a-f0-9]{1,4}){7})|(?:(?!(?:.*[a-f0-9][:\]]){7,})(?:[a-f0-9]{1,4}(?::[a-f0-9]{1,4}){0,5})?::(?:[a-f0-9]{1,4}(?::[a-f0-9]{1,4}){0,5})?)))|(?:(?:IPv6:(?:(?:[a-f0-9]{1,4}(?::[a-f0-9]{1,4}){5}:)|(?:(?!(?:.*[a-f0-9]:){5,})(?:[a-f0-9]{1,4}(?::[a-f0-9]{1,4}){0,3})?::(?:[a-f0-9]{1,4}(?::[a-f0-9]{1,4}){0,3}:)?)))?(?:(?:25[0-5])|(?:2[0-4][0-9])|(?:1[0-9]{2})|(?:[1-9]?[0-9]))(?:\.(?:(?:25[0-5])|(?:2[0-4][0-9])|(?:1[0-9]{2})|(?:[1-9]?[0-9]))){3}))\]))$/i;

/** FILTER_VALIDATE_EMAIL without flags (ASCII only, at most 320 characters). */
function isValidEmail(text: string): boolean {
  return text.length <= 320 && EMAIL_PATTERN.test(text);
}

// ---------------------------------------------------------------------------------------------
// Requests and responses as Symfony and FOSRestBundle shape them (§4.2, §6.1)

/** What the simulator sends back. */
export interface Reply {
  status: number;
  headers: Record<string, string>;
  body: string | Buffer;
}

/** The request body after PHP and the FOSRest body listener: parsed, decoded, ignored or invalid. */
export type DecodedBody =
  | { kind: 'none' }
  | { kind: 'invalid' }
  | { kind: 'form'; params: PhpArray }
  | { kind: 'json'; value: unknown };

/** A request as the simulator's handlers see it. */
export interface SimRequest {
  method: string;
  path: string;
  query: PhpArray;
  headers: IncomingHttpHeaders;
  body: DecodedBody;
}

/** Symfony's default content type for a plain Response. */
export const HTML = 'text/html; charset=UTF-8';
const JSON_CONTENT_TYPES = new Set(['application/json', 'application/x-json']);
const FORM_CONTENT_TYPE = 'application/x-www-form-urlencoded';

/**
 * What PHP and FOSRestBundle's body listener make of a body: form bodies are parsed, JSON bodies
 * decoded (for /api routes even without a Content-Type, their _format being json), and any other
 * body is ignored, a JSON body sent as text/plain included. Invalid JSON or a scalar is 'invalid'.
 */
export function decodeBody(
  method: string,
  path: string,
  headers: IncomingHttpHeaders,
  raw: Buffer,
): DecodedBody {
  if (!['POST', 'PUT', 'PATCH', 'DELETE'].includes(method)) return { kind: 'none' };
  const type = (headers['content-type'] ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
  const text = raw.toString('utf8');
  if (type === FORM_CONTENT_TYPE) return { kind: 'form', params: parsePhpQuery(text) };
  const json = JSON_CONTENT_TYPES.has(type) || (type === '' && isApiPath(path));
  // FOSRest skips PHP-empty content, which includes the body "0".
  if (!json || text === '' || text === '0') return { kind: 'none' };
  try {
    const value: unknown = JSON.parse(text);
    return value !== null && typeof value === 'object'
      ? { kind: 'json', value }
      : { kind: 'invalid' };
  } catch {
    return { kind: 'invalid' };
  }
}

/** The decoded body as Symfony's parameter bag (`$request->request`). */
export function bodyParams(body: DecodedBody): Record<string, unknown> {
  const value =
    body.kind === 'form' ? phpArrayToJs(body.params) : body.kind === 'json' ? body.value : {};
  if (value === null || typeof value !== 'object') return {};
  if (Array.isArray(value)) return Object.fromEntries(value.map((item, index) => [index, item]));
  return value as Record<string, unknown>;
}

/** Whether Mautic's `^/api` firewall covers the path. */
export function isApiPath(path: string): boolean {
  return path === '/api' || path.startsWith('/api/');
}

/** filter_var with FILTER_REQUIRE_SCALAR: a string, or undefined when missing or not scalar. */
export function scalar(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (typeof value === 'number') return String(value);
  if (typeof value === 'boolean') return value ? '1' : '';
  return undefined;
}

/** PHP truthiness of a string parameter. */
export function truthy(value: string | undefined): value is string {
  return value !== undefined && value !== '' && value !== '0';
}

function genericMessage(status: number): string {
  return `Looks like I encountered an error (error #${status}). If I do it again, please report me to the system administrator!`;
}

/** Symfony JsonResponse (ApiSubscriber rewrites, ExceptionController): JSON_HEX_* escaping. */
function symfonyJson(status: number, payload: unknown): Reply {
  return {
    status,
    headers: { 'content-type': 'application/json', 'cache-control': 'no-cache, private' },
    body: phpJsonEncode(payload, { hex: true }),
  };
}

/** ApiSubscriber's rewrite of an OAuth2 error: `{"errors":[{message, code, type}]}` (§1.7). */
export function oauthError(status: number, type: string, message: string): Reply {
  return symfonyJson(status, { errors: [{ message, code: status, type }] });
}

/** ExceptionController (§6.4): the generic message unless a not-found message is shown. */
export function exceptionError(status: number, message = genericMessage(status)): Reply {
  return symfonyJson(status, { errors: [{ message, code: status, type: null }] });
}

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
    tags: [],
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

type WriteMode = 'post' | 'patch' | 'put';

function mergeFields(
  entity: EntityName,
  current: Record<string, unknown>,
  submitted: { fields: Record<string, unknown>; overwriteWithBlank: boolean },
  mode: WriteMode,
): Record<string, unknown> {
  // PUT binds with clear-missing, so unsent fields go; POST and PATCH keep them.
  const result = mode === 'put' ? {} : { ...current };
  const keepBlanks =
    mode === 'put' || submitted.overwriteWithBlank || !ENTITIES[entity].customFields;
  for (const [key, value] of Object.entries(submitted.fields)) {
    if (keepBlanks || !isBlank(value)) result[key] = value;
  }
  return result;
}

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
