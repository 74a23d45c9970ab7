/**
 * The records as the simulator's handle shows and takes them (`records(entity)`,
 * `seed(entity, record)`): flat field maps in id order, and records inserted without validation.
 */
import { ENTITY_NAMES, type EntityName } from './entities.ts';
import { phpIntval } from './php.ts';
import {
  addDncEntry,
  type DncEntry,
  type EntityState,
  insert,
  phpDate,
  RESERVED_FIELDS,
  registerTags,
  type StoredRecord,
} from './store.ts';

function entityName(entity: string): EntityName {
  const name = ENTITY_NAMES.find((candidate) => candidate === entity);
  if (name === undefined) {
    throw new TypeError(`Unknown entity "${entity}": use ${ENTITY_NAMES.join(', ')}`);
  }
  return name;
}

/** The DNC entries of a contact as tests compare them: what a client can set, no id or date. */
function dncSummary(entries: readonly DncEntry[]) {
  return entries.map(({ channel, reason, comments, channelId }) => ({
    channel,
    reason,
    comments,
    channelId,
  }));
}

function flatten(state: EntityState, entity: EntityName, record: StoredRecord) {
  const dnc = entity === 'contacts' ? (state.links.get(record.id)?.doNotContact ?? []) : [];
  return {
    id: record.id,
    ...record.fields,
    ...(dnc.length > 0 ? { doNotContact: dncSummary(dnc) } : {}),
    dateAdded: phpDate(record.addedAt),
    dateModified: phpDate(record.modifiedAt ?? record.addedAt),
  };
}

/**
 * Stored records of one entity as flat field maps, in id order. A contact with Do Not Contact
 * entries also has `doNotContact: [{channel, reason, comments, channelId}]`.
 */
export function listRecords(
  state: EntityState,
  entity: string,
): Array<Record<string, unknown> & { id: number }> {
  const name = entityName(entity);
  return [...state.stores[name].records.values()]
    .sort((a, b) => a.id - b.id)
    .map((record) => flatten(state, name, record));
}

/**
 * Inserts a record as given, with no validation; an `id` is ignored, `dateAdded` (ISO-8601) is
 * kept. A contact's `doNotContact` items become its entries, as on a create (channel `email`
 * and reason 3 unless given), and its `tags` become tags.
 */
export function seedRecord(state: EntityState, entity: string, record: Record<string, unknown>) {
  const name = entityName(entity);
  const fields: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(record)) {
    if (!RESERVED_FIELDS.has(key) && !(name === 'contacts' && key === 'doNotContact')) {
      fields[key] = value;
    }
  }
  const added = typeof record.dateAdded === 'string' ? Date.parse(record.dateAdded) : Number.NaN;
  const addedAt = Number.isNaN(added) ? state.now() : added;
  const stored = insert(state, name, fields, addedAt, null);
  if (name !== 'contacts') return { id: stored.id };
  if (Array.isArray(fields.tags)) registerTags(state, fields.tags.map(String));
  if (Array.isArray(record.doNotContact)) {
    for (const item of record.doNotContact as Array<Record<string, unknown>>) {
      const channel = typeof item.channel === 'string' ? item.channel : 'email';
      const reason = item.reason === undefined ? 3 : phpIntval(item.reason);
      addDncEntry(state, stored, { channel, reason, comments: String(item.comments ?? '') });
    }
  }
  return { id: stored.id };
}
