/**
 * The REST half of the Mautic simulator (docs/mautic.md §4, §5, §7; reference §11): the
 * standard routes of every entity in entities.ts (batch.ts holds the batch controllers), the
 * single-record routes, and the routing of every API path it serves. The records live in
 * store.ts; the membership, Do Not Contact, points and lookup endpoints in their own modules.
 */
import { actionRoute } from './action-routes.ts';
import {
  batchDelete,
  batchEdit,
  batchNew,
  countBody,
  deleteIds,
  lockOf,
  processItem,
  upsertTarget,
} from './batch.ts';
import { ENTITIES, type EntityName, entityNamed } from './entities.ts';
import { listContacts, listEntities } from './list-api.ts';
import { phpEmpty } from './php.ts';
import { present } from './present.ts';
import { type EntityState, getEntity, holdersOf, removeRecord } from './store.ts';
import {
  bodyParams,
  exceptionError,
  PhpError,
  type Reply,
  returnError,
  type SimRequest,
  view,
} from './symfony.ts';

// The store's entry points, which tests and the in-memory Mautic import from here.
export { listRecords, seedRecord } from './records.ts';
export { createEntityState, type EntityState } from './store.ts';

/** Items of a batch request: body entries for new and edit, ids for delete and segment adds. */
export function batchItemCount(req: SimRequest): number | undefined {
  if (/^\/api\/[^/]+\/batch\/(new|edit)$/.test(req.path)) return countBody(req.body);
  if (/^\/api\/[^/]+\/batch\/delete$/.test(req.path)) return deleteIds(req.query).length;
  if (req.path === '/api/companies/batch/addcontacts') {
    const assignments = bodyParams(req.body).assignments;
    return assignments !== null && typeof assignments === 'object'
      ? Object.keys(assignments).length
      : 0;
  }
  if (/^\/api\/segments\/[^/]+\/contacts\/add$/.test(req.path)) {
    const ids = bodyParams(req.body).ids;
    return ids !== null && typeof ids === 'object' ? Object.keys(ids).length : 0;
  }
  return undefined;
}

/** processForm outside batch mode: `{<one>: record}`, or returnError's body (no `type`). */
function singleAnswer(
  entity: EntityName,
  outcome: ReturnType<typeof processItem>,
  state: EntityState,
) {
  if ('error' in outcome) {
    const { code, message, details } = outcome.error as {
      code: number;
      message: string;
      details: unknown;
    };
    return returnError(code, message, details);
  }
  const record = present(state, entity, outcome.record, { view: outcome.view });
  return view(outcome.status, { [ENTITIES[entity].one]: record });
}

/**
 * POST /api/{entity}/new (newEntityAction): a contact matched by email is updated (200); a
 * company matched by name is edited as POST binds, clearing the fields not sent, unless
 * `force` is set (CompanyApiController); anything else is created (201).
 */
function newOne(state: EntityState, entity: EntityName, req: SimRequest): Reply {
  const params = bodyParams(req.body);
  if (entity === 'companies' && phpEmpty(params.force) && typeof params.companyname === 'string') {
    const match = holdersOf(state, 'companies', 'companyname', params.companyname).at(-1);
    if (match !== undefined)
      return singleAnswer(entity, processItem(state, entity, match, params, 'put'), state);
  }
  const match = upsertTarget(state, entity, params);
  const outcome = match
    ? processItem(state, entity, match, params, 'patch', true)
    : processItem(state, entity, undefined, params, 'post');
  return singleAnswer(entity, outcome, state);
}

/** PUT|PATCH /api/{entity}/{id}/edit (editEntityAction): PATCH needs the record, PUT creates. */
function editOne(state: EntityState, entity: EntityName, id: string, req: SimRequest): Reply {
  const record = getEntity(state, entity, id);
  if (record === undefined && req.method === 'PATCH')
    return returnError(404, 'Item was not found.');
  const locked = lockOf(state, entity, record);
  if (locked !== undefined) return returnError(409, locked);
  const mode = req.method === 'PUT' ? 'put' : 'patch';
  return singleAnswer(
    entity,
    processItem(state, entity, record, bodyParams(req.body), mode),
    state,
  );
}

/** DELETE /api/{entity}/{id}/delete (deleteEntityAction): the record as it was. */
function deleteOne(state: EntityState, entity: EntityName, id: string): Reply {
  const record = getEntity(state, entity, id);
  if (record === undefined) return returnError(404, 'Item was not found.');
  const shown = present(state, entity, record);
  removeRecord(state, entity, record);
  return view(200, { [ENTITIES[entity].one]: shown });
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
  if (rest === 'new' && method === 'POST') return newOne(state, entity, req);
  const single = /^(\d+)(?:\/(edit|delete))?$/.exec(rest ?? '');
  const id = single?.[1];
  if (id === undefined) return undefined;
  if (single?.[2] === undefined && method === 'GET') {
    const record = state.stores[entity].records.get(Number(id));
    return record === undefined
      ? returnError(404, 'Item was not found.')
      : view(200, { [ENTITIES[entity].one]: present(state, entity, record) });
  }
  if (single?.[2] === 'edit' && (method === 'PUT' || method === 'PATCH')) {
    return editOne(state, entity, id, req);
  }
  if (single?.[2] === 'delete' && method === 'DELETE') return deleteOne(state, entity, id);
  return undefined;
}

/**
 * Every API route the simulator serves; anything else is the catch-all 404. What would make
 * PHP throw answers the generic 500, after the work done before it, as in Mautic.
 */
export function routeEntities(state: EntityState, req: SimRequest): Reply {
  const match = /^\/api\/([^/]+)(?:\/(.*))?$/.exec(req.path);
  const entity = entityNamed(match?.[1]);
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
