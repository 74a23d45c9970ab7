/**
 * The batch controllers (docs/mautic.md §4; CommonApiController::newEntitiesAction,
 * editEntitiesAction, deleteEntitiesAction of Mautic 5.1.1) for every entity of entities.ts:
 * each item goes through processForm (write rules, validation, save) one at a time, so a later
 * item sees what an earlier one saved, and the answer keeps PHP's keys (array or object).
 */

import { nullUnlistedSelects } from './company-fields.ts';
import { identifyCompany, replaceCompanies } from './company-links.ts';
import { applyItemDnc } from './contact-actions.ts';
import { ENTITIES, type EntityName } from './entities.ts';
import {
  isPhpIntKey,
  type PhpArray,
  type PhpValue,
  phpArrayToJs,
  phpEmpty,
  phpIsNumeric,
  sanitizeEmail,
} from './php.ts';
import { present, type RecordView } from './present.ts';
import {
  type EntityState,
  findById,
  findContactByEmail,
  holdersOf,
  insert,
  RESERVED_FIELDS,
  registerTags,
  removeRecord,
  type StoredRecord,
  setRecordFields,
  tagNames,
  touch,
} from './store.ts';
import {
  type DecodedBody,
  exceptionError,
  PhpError,
  type Reply,
  returnError,
  view,
} from './symfony.ts';
import { validateItem } from './validation.ts';
import { LOCKABLE, lockedMessage } from './versions.ts';
import { applyWrite, type WriteMode } from './write-rules.ts';

/** What one item became: a saved record (shown as created or as loaded), or an error. */
export type ItemOutcome =
  | { status: number; record: StoredRecord; view: RecordView }
  | { status: number; error: Record<string, unknown> };

/** Keys of a contact item that preSaveEntity applies after the form, not as fields. */
const CONTACT_OPERATIONS = new Set(['doNotContact', 'companies']);

/** The submitted fields of one item: reserved keys out, emails cleaned as InputHelper does. */
function submittedFields(entity: EntityName, item: Record<string, unknown>) {
  const fields: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(item)) {
    if (RESERVED_FIELDS.has(key) || (entity === 'contacts' && CONTACT_OPERATIONS.has(key))) {
      continue;
    }
    fields[key] = value;
  }
  const emailField = { contacts: 'email', companies: 'companyemail' }[entity as string];
  const email = emailField === undefined ? undefined : fields[emailField];
  if (emailField !== undefined && typeof email === 'string')
    fields[emailField] = sanitizeEmail(email);
  return { fields, overwriteWithBlank: !phpEmpty(item.overwriteWithBlank) };
}

/**
 * preSaveEntity and LeadModel::saveEntity for a saved contact item: new tags, `companies`,
 * a changed `company`, then `doNotContact` (which may throw, after the save, as PHP does).
 */
function saveContactOperations(
  state: EntityState,
  record: StoredRecord,
  item: Record<string, unknown>,
  companyBefore: unknown,
  isNew: boolean,
) {
  if (Array.isArray(record.fields.tags)) registerTags(state, record.fields.tags.map(String));
  const company = record.fields.company;
  if (item.companies !== undefined && item.companies !== null) {
    if (typeof item.companies !== 'object') throw new PhpError('modifyCompanies needs an array');
    replaceCompanies(state, record, Object.values(item.companies));
  }
  if (company !== companyBefore) {
    identifyCompany(state, record, phpEmpty(company) ? '' : String(company));
  }
  applyItemDnc(state, record, item.doNotContact, isNew);
}

/**
 * processForm for one item; `existing` undefined creates a record with a new id. `matched`: the
 * record was found by getNewEntity (a contact's email), which shows it in its own way.
 */
export function processItem(
  state: EntityState,
  entity: EntityName,
  existing: StoredRecord | undefined,
  item: Record<string, unknown>,
  mode: WriteMode,
  matched = false,
): ItemOutcome {
  const submitted = submittedFields(entity, item);
  const { write } = ENTITIES[entity];
  const knownTags = write === 'contact' ? tagNames(state) : undefined;
  const fields = applyWrite(existing?.fields ?? {}, submitted.fields, {
    mode,
    overwriteWithBlank: submitted.overwriteWithBlank,
    style: write,
    ...(knownTags === undefined ? {} : { knownTags }),
  });
  if (entity === 'companies' && state.line.unlistedSelectNull) nullUnlistedSelects(fields);
  const error = validateItem(state, entity, existing, submitted.fields, fields);
  if (error !== undefined) return { status: error.code, error: { ...error } };
  const companyBefore = existing?.fields.company;
  let record: StoredRecord;
  if (existing === undefined) {
    record = insert(state, entity, fields, state.now(), state.apiUser);
  } else {
    record = existing;
    touch(state, record);
    setRecordFields(state, entity, record, fields);
  }
  if (entity === 'contacts') {
    saveContactOperations(state, record, item, companyBefore, existing === undefined);
  }
  const shown = existing === undefined ? 'created' : matched ? 'matched' : 'loaded';
  return { status: existing === undefined ? 201 : 200, record, view: shown };
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

/** Items of a batch body, as validateBatchPayload counts them. */
export function countBody(body: DecodedBody): number {
  if (body.kind === 'json') {
    return Array.isArray(body.value) ? body.value.length : Object.keys(body.value as object).length;
  }
  // A form body's access_token is taken out by oauth2-php before Mautic counts anything.
  if (body.kind === 'form')
    return [...body.params.keys()].filter((key) => key !== 'access_token').length;
  return 0;
}

/** validateBatchPayload's refusal: a 500 on the standard routes, a 400 on 7.x's company links. */
export function batchLimitError(state: EntityState, status = 500): Reply {
  return returnError(status, `A max of ${state.batchMaxLimit} entities are supported at a time.`);
}

/** Who checked the record out for editing, on a line whose API then refuses its edits (7.x). */
export function lockOf(state: EntityState, entity: EntityName, record: StoredRecord | undefined) {
  if (record === undefined || !state.line.lockedEdits || !LOCKABLE.has(entity)) return undefined;
  const lock = state.checkedOut.get(`${entity}:${record.id}`);
  return lock === undefined ? undefined : lockedMessage(record.fields.name, lock);
}

/** The payload: the listed records by key, `statusCodes`, and `errors` when any item failed. */
function batchResponse(
  state: EntityState,
  status: number,
  entity: EntityName,
  listed: Map<string, { record: StoredRecord; view: RecordView }>,
  statusCodes: Map<string, number>,
  errors: Map<string, unknown>,
): Reply {
  const list = new Map<string, unknown>();
  for (const [key, { record, view: shown }] of listed) {
    list.set(key, present(state, entity, record, { view: shown }));
  }
  return view(status, {
    [ENTITIES[entity].multi]: list,
    statusCodes,
    errors: errors.size > 0 ? errors : undefined,
  });
}

/** The record a batch/new item updates instead of creating one (getNewEntity), if any. */
export function upsertTarget(
  state: EntityState,
  entity: EntityName,
  item: Record<string, unknown>,
) {
  if (entity === 'contacts') {
    const email = typeof item.email === 'string' ? sanitizeEmail(item.email) : '';
    return email === '' ? undefined : findContactByEmail(state, email);
  }
  if (entity === 'tags') {
    // TagApiController::getNewEntity: no name throws; a tag of that name is updated.
    if (phpEmpty(item.tag)) throw new PhpError('A tag name is required');
    return holdersOf(state, 'tags', 'tag', String(item.tag))[0];
  }
  if (entity === 'companies' && state.line.companyUpsert && typeof item.companyname === 'string') {
    // CompanyApiController::getNewEntity from 5.2.1 (IdentifyCompanyHelper::findCompany): the
    // company that has the name is updated, also one this call created.
    return holdersOf(state, 'companies', 'companyname', item.companyname).at(-1);
  }
  return undefined;
}

export function batchNew(state: EntityState, entity: EntityName, body: DecodedBody): Reply {
  if (countBody(body) > state.batchMaxLimit) return batchLimitError(state);
  const items = batchItems(body);
  if (items === undefined) return exceptionError(500);
  const listed = new Map<string, { record: StoredRecord; view: RecordView }>();
  const statusCodes = new Map<string, number>();
  const errors = new Map<string, unknown>();
  // Sequential on purpose: a duplicate email later in the batch finds the contact just created.
  for (const [key, item] of items) {
    const match = upsertTarget(state, entity, item);
    // A matched company is bound as POST binds a form, as the single create binds one (rest.ts).
    const outcome =
      match === undefined
        ? processItem(state, entity, undefined, item, 'post')
        : entity === 'companies'
          ? processItem(state, entity, match, item, 'put')
          : processItem(state, entity, match, item, 'patch', true);
    statusCodes.set(key, outcome.status);
    if ('error' in outcome) errors.set(key, outcome.error);
    else listed.set(key, outcome);
  }
  return batchResponse(state, 201, entity, listed, statusCodes, errors);
}

/**
 * getBatchEntities with BatchIdToEntityHelper: the records of the items' ids, put back at the
 * keys of the items that named them, counting positions among the items *with* an id (so an
 * item without one shifts the later records onto earlier keys: Mautic's own bug); each id-less
 * item gets `mautic.api.call.id_missing`, unless no item has an id at all.
 */
function batchEntities(
  state: EntityState,
  entity: EntityName,
  items: Array<[string, Record<string, unknown>]>,
) {
  const ids: unknown[] = [];
  const missing: string[] = [];
  for (const [key, item] of items) {
    if (item.id === undefined || item.id === null) missing.push(key);
    else ids.push(item.id);
  }
  const entities = new Map<string, { record: StoredRecord; view: RecordView }>();
  const errors = new Map<string, unknown>();
  if (ids.length === 0) return { entities, errors };
  ids.forEach((id, position) => {
    const record = findById(state, entity, id);
    // The lookup by id is PHP's array key: 809 and "809" find the record, " 809" does not.
    const key = items[position]?.[0];
    if (record !== undefined && String(record.id) === String(id) && key !== undefined) {
      entities.set(key, { record, view: 'loaded' });
    }
  });
  for (const key of missing) {
    errors.set(key, { message: 'mautic.api.call.id_missing', code: 400, type: 'api' });
  }
  return { entities, errors };
}

export function batchEdit(
  state: EntityState,
  entity: EntityName,
  method: string,
  body: DecodedBody,
): Reply {
  if (countBody(body) > state.batchMaxLimit) return batchLimitError(state);
  const items = batchItems(body);
  if (items === undefined) return exceptionError(500);
  const { entities, errors } = batchEntities(state, entity, items);
  const statusCodes = new Map<string, number>();
  for (const [key, item] of items) {
    const existing = entities.get(key)?.record;
    const locked = lockOf(state, entity, existing);
    if ((existing === undefined && method === 'PATCH') || locked !== undefined) {
      // setBatchError: PATCH needs an entity; 7.x refuses one a user has checked out.
      const code = locked === undefined ? 404 : 409;
      entities.delete(key);
      errors.set(key, { message: locked ?? 'Item was not found.', code, type: 'api' });
      statusCodes.set(key, code);
      continue;
    }
    const outcome = processItem(state, entity, existing, item, method === 'PUT' ? 'put' : 'patch');
    // A refused item's entity stays where getBatchEntities put it: the answer still lists it.
    if ('error' in outcome) errors.set(key, outcome.error);
    else entities.set(key, outcome);
    const error = errors.get(key) as { code: number } | undefined;
    statusCodes.set(key, error?.code ?? outcome.status);
  }
  return batchResponse(state, 200, entity, entities, statusCodes, errors);
}

/** BatchIdToEntityHelper::extractIdsFromIdKey: `ids=1,2`, `ids=5`, `ids[]=1`, `ids[k]=1`. */
export function deleteIds(query: PhpArray): Array<[string, PhpValue]> {
  const ids = query.get('ids');
  if (ids instanceof Map) return [...ids.entries()];
  if (ids !== undefined && (ids.includes(',') || phpIsNumeric(ids))) {
    return ids.split(',').map((id, index) => [String(index), id]);
  }
  return [];
}

export function batchDelete(state: EntityState, entity: EntityName, query: PhpArray): Reply {
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
