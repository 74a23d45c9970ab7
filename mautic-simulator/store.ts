/**
 * The simulator's Mautic database: a record store per entity of entities.ts, and what links a
 * contact to the others (segment and campaign memberships, company links, Do Not Contact
 * entries), with the lookups every controller shares. Contact tags are names, and every tag a
 * contact was given is a record of the `tags` store, as Mautic keeps its tags in their own table.
 */
import { DEFAULT_COMPANY_FIELDS } from './company-fields.ts';
import {
  DEFAULT_CONTACT_FIELDS,
  FIRST_CUSTOM_FIELD_ID,
  NON_FIELD_KEYS,
  SOCIAL_ALIASES,
} from './contact-fields.ts';
import { ENTITY_NAMES, type EntityName } from './entities.ts';
import { phpEmpty, phpIntval } from './php.ts';
import { collationKey } from './sql.ts';
import { type MauticLine, mauticLine } from './versions.ts';

export type { EntityName } from './entities.ts';

export interface StoredRecord {
  id: number;
  addedAt: number;
  /** null until the record is first saved again after its creation (Mautic's `dateModified`). */
  modifiedAt: number | null;
  /** A contact's `dateIdentified`: when it first had a name, an email, a company or a social id. */
  identifiedAt: number | null;
  /** The API user who created or last modified it; null for a seeded record. */
  createdByUser: string | null;
  modifiedByUser: string | null;
  fields: Record<string, unknown>;
}

/** A row of lead_lists_leads or campaign_leads. */
export interface Membership {
  addedAt: number;
  manuallyAdded: boolean;
  manuallyRemoved: boolean;
}

/** A row of lead_donotcontact. */
export interface DncEntry {
  id: number;
  addedAt: number;
  reason: number;
  comments: string;
  channel: string;
  channelId: number | null;
}

/** Everything that ties one contact to other records; rows of deleted records are skipped on read. */
export interface ContactLinks {
  segments: Map<number, Membership>;
  campaigns: Map<number, Membership>;
  /** Company id → link, in the order the links were made. */
  companies: Map<number, { addedAt: number; primary: boolean }>;
  doNotContact: DncEntry[];
}

type Store = { lastId: number; records: Map<number, StoredRecord> };

/** The entity store and the settings its controllers read. */
export interface EntityState {
  now: () => number;
  batchMaxLimit: number;
  /** The Mautic version played, and what it does differently (versions.ts). */
  line: MauticLine;
  /** Records checked out for editing (`<entity>:<id>` → who, since when), as a user opening one does. */
  checkedOut: Map<string, { user: string; at: number }>;
  /** The name Mautic gives the API user (`createdByUser`): `<client name> [<client id>]`. */
  apiUser: string;
  stores: Record<EntityName, Store>;
  /**
   * The contacts under their stored email's collation key (string emails only), so the upsert
   * and the unique check do not scan every contact. Kept by `setRecordFields` and `removeRecord`.
   */
  contactsByEmail: Map<string, Set<StoredRecord>>;
  /** Contact id → its links. */
  links: Map<number, ContactLinks>;
  lastDncId: number;
  /**
   * Custom fields (alias → field id) of contacts and of companies: every other key a record was
   * ever written with. Both take their ids from the one field table, after the defaults.
   */
  customFields: Map<string, number>;
  customCompanyFields: Map<string, number>;
}

/** An empty store. */
export function createEntityState(
  now: () => number,
  batchMaxLimit: number,
  line: MauticLine = mauticLine('5.1'),
): EntityState {
  const stores = Object.fromEntries(
    ENTITY_NAMES.map((name) => [name, { lastId: 0, records: new Map<number, StoredRecord>() }]),
  ) as Record<EntityName, Store>;
  return {
    now,
    batchMaxLimit,
    line,
    checkedOut: new Map(),
    apiUser: 'Mautic simulator [1]',
    stores,
    contactsByEmail: new Map(),
    links: new Map(),
    lastDncId: 0,
    customFields: new Map(),
    customCompanyFields: new Map(),
  };
}

// __proto__ too: a JSON body may carry it, and assigning it would swap a record's prototype.
export const RESERVED_FIELDS: ReadonlySet<string> = new Set([
  'id',
  'dateAdded',
  'dateModified',
  'overwriteWithBlank',
  '__proto__',
]);

/** A date as JMS serializes a DateTime. */
export function phpDate(ms: number): string {
  return `${new Date(ms).toISOString().slice(0, 19)}+00:00`;
}

/** A date as MySQL returns a DATETIME column. */
export function sqlDate(ms: number): string {
  return new Date(ms).toISOString().slice(0, 19).replace('T', ' ');
}

/** A new record with the next id; `user` is who created it (null: seeded). */
export function insert(
  state: EntityState,
  entity: EntityName,
  fields: Record<string, unknown>,
  addedAt: number,
  user: string | null,
): StoredRecord {
  const store = state.stores[entity];
  store.lastId += 1;
  const record: StoredRecord = {
    id: store.lastId,
    addedAt,
    modifiedAt: null,
    identifiedAt: null,
    createdByUser: user,
    modifiedByUser: null,
    fields: {},
  };
  store.records.set(record.id, record);
  setRecordFields(state, entity, record, fields);
  return record;
}

/** Saves an existing record again: Mautic sets `dateModified` and `modifiedBy` on each save. */
export function touch(state: EntityState, record: StoredRecord): void {
  record.modifiedAt = state.now();
  record.modifiedByUser = state.apiUser;
}

/**
 * Replaces a record's fields, keeping the email index, the custom field lists and a contact's
 * `dateIdentified` (Lead::checkDateIdentified: set once the contact is no longer anonymous).
 */
export function setRecordFields(
  state: EntityState,
  entity: EntityName,
  record: StoredRecord,
  fields: Record<string, unknown>,
): void {
  if (entity !== 'contacts' && entity !== 'companies') {
    record.fields = fields;
    return;
  }
  if (entity === 'contacts') unindexContact(state, record);
  record.fields = fields;
  const known = entity === 'contacts' ? CONTACT_ALIASES : COMPANY_ALIASES;
  const custom = entity === 'contacts' ? state.customFields : state.customCompanyFields;
  for (const key of Object.keys(fields)) {
    if (known.has(key) || custom.has(key) || (entity === 'contacts' && NON_FIELD_KEYS.has(key))) {
      continue;
    }
    custom.set(
      key,
      FIRST_CUSTOM_FIELD_ID + state.customFields.size + state.customCompanyFields.size,
    );
  }
  if (entity !== 'contacts') return;
  indexContact(state, record);
  const identity = ['firstname', 'lastname', 'company', 'email', ...SOCIAL_ALIASES];
  if (record.identifiedAt === null && identity.some((alias) => !phpEmpty(fields[alias]))) {
    // Callers save (`touch`) before they write, so this is the time of this save.
    record.identifiedAt = record.modifiedAt ?? record.addedAt;
  }
}

const CONTACT_ALIASES = new Set(DEFAULT_CONTACT_FIELDS.map((field) => field.alias));
const COMPANY_ALIASES = new Set(DEFAULT_COMPANY_FIELDS.map((field) => field.alias));

/** Deletes a record; a contact's links go with it (the foreign keys cascade). */
export function removeRecord(state: EntityState, entity: EntityName, record: StoredRecord): void {
  state.stores[entity].records.delete(record.id);
  if (entity !== 'contacts') return;
  unindexContact(state, record);
  state.links.delete(record.id);
}

/** The key of a contact in `contactsByEmail`; undefined when its email is not a string. */
function emailKey(record: StoredRecord): string | undefined {
  const stored = record.fields.email;
  return typeof stored === 'string' ? collationKey(stored) : undefined;
}

function indexContact(state: EntityState, record: StoredRecord): void {
  const key = emailKey(record);
  if (key === undefined) return;
  const holders = state.contactsByEmail.get(key);
  if (holders === undefined) state.contactsByEmail.set(key, new Set([record]));
  else holders.add(record);
}

function unindexContact(state: EntityState, record: StoredRecord): void {
  const key = emailKey(record);
  if (key === undefined) return;
  const holders = state.contactsByEmail.get(key);
  holders?.delete(record);
  if (holders?.size === 0) state.contactsByEmail.delete(key);
}

/**
 * The records whose unique field (entities.ts `unique`) equals `value` as MySQL compares it
 * (case and trailing spaces ignored), in id order.
 */
export function holdersOf(state: EntityState, entity: EntityName, field: string, value: string) {
  const key = collationKey(value);
  const found =
    entity === 'contacts' && field === 'email'
      ? [...(state.contactsByEmail.get(key) ?? [])]
      : [...state.stores[entity].records.values()].filter((record) => {
          const stored = record.fields[field];
          return typeof stored === 'string' && collationKey(stored) === key;
        });
  return found.sort((a, b) => a.id - b.id);
}

/** LeadModel::checkForDuplicateContact: the email as SQL compares it, most recently added wins. */
export function findContactByEmail(state: EntityState, email: string): StoredRecord | undefined {
  let best: StoredRecord | undefined;
  for (const record of holdersOf(state, 'contacts', 'email', email)) {
    const newer =
      best === undefined ||
      record.addedAt > best.addedAt ||
      (record.addedAt === best.addedAt && record.id > best.id);
    if (newer) best = record;
  }
  return best;
}

/**
 * Tags as LeadModel::modifyTags makes them: a name no tag has yet (exactly: the lookup is
 * case-insensitive but the match on its result is not) becomes a new tag.
 */
export function registerTags(state: EntityState, names: readonly string[]): void {
  const known = tagNames(state);
  for (const name of names) {
    if (known.has(name)) continue;
    insert(state, 'tags', { tag: name }, state.now(), state.apiUser);
    known.add(name);
  }
}

/** The names of every tag, exactly as stored. */
export function tagNames(state: EntityState): Set<string> {
  const names = new Set<string>();
  for (const record of state.stores.tags.records.values()) {
    if (typeof record.fields.tag === 'string') names.add(record.fields.tag);
  }
  return names;
}

/** An id as SQL `IN (…)` would match it: integers and numeric strings. */
export function findById(
  state: EntityState,
  entity: EntityName,
  raw: unknown,
): StoredRecord | undefined {
  const text = typeof raw === 'number' ? String(raw) : typeof raw === 'string' ? raw.trim() : '';
  const match = /^(\d+)(\.0*)?$/.exec(text);
  return match?.[1] === undefined ? undefined : state.stores[entity].records.get(Number(match[1]));
}

/** `getEntity($id)` of a model: the id cast with PHP's (int), as `find((int) $id)` does. */
export function getEntity(
  state: EntityState,
  entity: EntityName,
  raw: unknown,
): StoredRecord | undefined {
  return state.stores[entity].records.get(phpIntval(raw));
}

/** A contact's links, created empty on first use. */
export function linksOf(state: EntityState, contactId: number): ContactLinks {
  let links = state.links.get(contactId);
  if (links === undefined) {
    links = { segments: new Map(), campaigns: new Map(), companies: new Map(), doNotContact: [] };
    state.links.set(contactId, links);
  }
  return links;
}

/** DoNotContact::createDncRecord: a new entry, whatever the contact already has. */
export function addDncEntry(
  state: EntityState,
  contact: StoredRecord,
  entry: { channel: string; reason: number; comments: string; channelId?: number | null },
): void {
  state.lastDncId += 1;
  linksOf(state, contact.id).doNotContact.push({
    id: state.lastDncId,
    addedAt: state.now(),
    reason: entry.reason,
    comments: entry.comments,
    channel: entry.channel,
    channelId: entry.channelId ?? null,
  });
}

/** A contact's memberships and company links as tests read them, or undefined for no contact. */
export function contactMemberships(state: EntityState, contactId: number) {
  if (!state.stores.contacts.records.has(contactId)) return undefined;
  const links = state.links.get(contactId);
  const rows = (entity: 'segments' | 'campaigns') =>
    [...(links?.[entity] ?? new Map<number, Membership>()).entries()]
      .filter(([id]) => state.stores[entity].records.has(id))
      .sort(([a], [b]) => a - b)
      .map(([id, row]) => ({
        id,
        manuallyAdded: row.manuallyAdded,
        manuallyRemoved: row.manuallyRemoved,
      }));
  const companies = [...(links?.companies ?? new Map()).entries()]
    .filter(([id]) => state.stores.companies.records.has(id))
    .map(([id, link]) => ({ id, primary: link.primary }));
  return { segments: rows('segments'), campaigns: rows('campaigns'), companies };
}
