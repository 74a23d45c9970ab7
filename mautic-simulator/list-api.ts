/**
 * The list routes `GET /api/{entity}`. For contacts (reference §11.1, §5.4): `where` and `search` ANDed, `start` and `limit`
 * (default 30, no maximum, 0 for no limit, and then `start` is ignored too), `minimal`, and the
 * answer `{"total":"<n>","contacts":{<id>:{…}}}` with `{}` when nothing matches. Contacts come in
 * id order: Mautic orders by `last_active DESC`, which no simulated contact has. Other entities
 * take a simpler `search` (`ids:`, `field:value` exact, or a substring).
 */
import { searchTest } from './contact-search.ts';
import { whereTest } from './contact-where.ts';
import { ENTITIES, type EntityName } from './entities.ts';
import { type PhpArray, phpEmpty, phpIntval } from './php.ts';
import { present } from './present.ts';
import type { EntityState, StoredRecord } from './store.ts';
import { exceptionError, type Reply, scalar, view } from './symfony.ts';

/** Symfony's InputBag::get: a query parameter that is an array is a bad request. */
function scalarQuery(query: PhpArray, name: string, fallback: string): string | undefined {
  const value = query.get(name);
  if (value instanceof Map) return undefined;
  return value ?? fallback;
}

export function listContacts(state: EntityState, query: PhpArray): Reply {
  const search = scalarQuery(query, 'search', '');
  const start = scalarQuery(query, 'start', '0');
  const limit = scalarQuery(query, 'limit', '30');
  if (search === undefined || start === undefined || limit === undefined) {
    return exceptionError(400);
  }
  const tests = [whereTest(state, query.get('where')), searchTest(state, search)].filter(
    (test) => test !== undefined,
  );
  const matching = [...state.stores.contacts.records.values()]
    .filter((record) => tests.every((test) => test(record)))
    .sort((a, b) => a.id - b.id);
  // buildLimiterClauses: an empty limit sets neither LIMIT nor OFFSET.
  const page = phpEmpty(limit)
    ? matching
    : matching.slice(
        Math.max(0, phpIntval(start)),
        Math.max(0, phpIntval(start)) + Math.max(0, phpIntval(limit)),
      );
  const minimal = !phpEmpty(query.get('minimal'));
  const contacts = new Map<string, unknown>();
  for (const record of page) {
    contacts.set(String(record.id), present(state, 'contacts', record, { minimal }));
  }
  // An empty PHP array would be `[]`; Mautic answers `{}` (§5.4).
  return view(200, { total: String(matching.length), contacts: contacts.size > 0 ? contacts : {} });
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

export function listEntities(state: EntityState, entity: EntityName, query: PhpArray): Reply {
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
      [definition.multi]: page.map((record) => present(state, entity, record)),
    });
  }
  const byId: Record<string, unknown> = {};
  for (const record of page) byId[String(record.id)] = present(state, entity, record);
  return view(200, { total: String(matching.length), [definition.multi]: byId });
}
