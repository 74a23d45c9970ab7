/**
 * The REST half of the Mautic simulator (docs/mautic.md §4, §5, §7; reference §11): what the
 * batch, list and item controllers answer, and the routing of every API path it serves. The
 * records live in store.ts; the membership, Do Not Contact, points and lookup endpoints in their
 * own modules.
 */
import { actionRoute } from './action-routes.ts';
import { applyItemDnc } from './contact-actions.ts';
import { listContacts, listEntities } from './list-api.ts';
import {
  isPhpIntKey,
  isValidEmail,
  type PhpArray,
  type PhpValue,
  phpArrayToJs,
  phpEmpty,
  phpIsNumeric,
  sanitizeEmail,
} from './php.ts';
import { ENTITIES, present } from './present.ts';
import {
  ENTITY_NAMES,
  type EntityName,
  type EntityState,
  findById,
  findContactByEmail,
  insert,
  RESERVED_FIELDS,
  removeRecord,
  type StoredRecord,
  setContactFields,
} from './store.ts';
import {
  bodyParams,
  type DecodedBody,
  exceptionError,
  PhpError,
  type Reply,
  returnError,
  type SimRequest,
  view,
} from './symfony.ts';
import { applyWrite, type WriteMode } from './write-rules.ts';

// The store's entry points, which tests and the in-memory Mautic import from here.
export { createEntityState, type EntityState, listRecords, seedRecord } from './store.ts';

/** Items of a batch request: body entries for new and edit, ids for delete and segment adds. */
export function batchItemCount(req: SimRequest): number | undefined {
  if (/^\/api\/[^/]+\/batch\/(new|edit)$/.test(req.path)) return countBody(req.body);
  if (/^\/api\/[^/]+\/batch\/delete$/.test(req.path)) return deleteIds(req.query).length;
  if (/^\/api\/segments\/[^/]+\/contacts\/add$/.test(req.path)) {
    const ids = bodyParams(req.body).ids;
    return ids !== null && typeof ids === 'object' ? Object.keys(ids).length : 0;
  }
  return undefined;
}

function isBlank(value: unknown): boolean {
  return value === null || value === '' || value === 0 || value === '0';
}

/**
 * The submitted fields of one item: reserved keys out, the email cleaned as InputHelper does.
 * A contact's `doNotContact` is no field: preSaveEntity turns it into DNC entries.
 */
function submittedFields(entity: EntityName, item: Record<string, unknown>) {
  const fields: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(item)) {
    if (RESERVED_FIELDS.has(key) || (entity === 'contacts' && key === 'doNotContact')) continue;
    fields[key] = value;
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
  const named = typeof result.name === 'string' && result.name.trim() !== '';
  if (entity === 'segments' && !named) return { field: 'name', message: 'A value is required.' };
  if (entity === 'campaigns' && !named) return { field: 'name', message: 'A name is required.' };
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
  let record: StoredRecord;
  if (existing === undefined) record = insert(state, entity, fields, now);
  else if (entity === 'contacts') {
    record = existing;
    setContactFields(state, record, fields, now);
  } else {
    record = existing;
    Object.assign(record, { fields, modifiedAt: now });
  }
  if (entity === 'contacts') applyItemDnc(state, record, item.doNotContact, existing === undefined);
  return { status: successStatus, record };
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
  state: EntityState,
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
    else list.set(key, present(state, entity, outcome.record));
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
  return batchResponse(state, 201, entity, outcomes);
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
  return batchResponse(state, 200, entity, outcomes);
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
    deleted.set(key, present(state, entity, record));
    found.push(record);
  }
  for (const record of found) removeRecord(state, entity, record);
  return view(200, { [ENTITIES[entity].multi]: deleted });
}

/** The standard routes of §4.1 for one entity; undefined when the path is none of them. */
function standardRoute(
  state: EntityState,
  entity: EntityName,
  rest: string | undefined,
  req: SimRequest,
): Reply | undefined {
  const { method } = req;
  if (rest === undefined && method === 'GET') {
    return entity === 'contacts'
      ? listContacts(state, req.query)
      : listEntities(state, entity, req.query);
  }
  if (rest === 'batch/new' && method === 'POST') return batchNew(state, entity, req.body);
  if (rest === 'batch/edit' && (method === 'PUT' || method === 'PATCH')) {
    return batchEdit(state, entity, method, req.body);
  }
  if (rest === 'batch/delete' && method === 'DELETE') return batchDelete(state, entity, req.query);
  if (rest !== undefined && /^\d+$/.test(rest) && method === 'GET') {
    const record = state.stores[entity].records.get(Number(rest));
    return record === undefined
      ? returnError(404, 'Item was not found.')
      : view(200, { [ENTITIES[entity].one]: present(state, entity, record) });
  }
  return undefined;
}

/**
 * Every API route the simulator serves; anything else is the catch-all 404. What would make
 * PHP throw answers the generic 500, after the work done before it, as in Mautic.
 */
export function routeEntities(state: EntityState, req: SimRequest): Reply {
  const match = /^\/api\/(contacts|companies|segments|campaigns)(?:\/(.*))?$/.exec(req.path);
  const entity = ENTITY_NAMES.find((name) => name === match?.[1]);
  const rest = match?.[2];
  try {
    const reply =
      entity === undefined
        ? undefined
        : (standardRoute(state, entity, rest, req) ??
          (rest === undefined ? undefined : actionRoute(state, entity, rest, req)));
    return reply ?? exceptionError(404, `Requested URL not found: ${req.path}`);
  } catch (error) {
    if (error instanceof PhpError) return exceptionError(500);
    throw error;
  }
}
