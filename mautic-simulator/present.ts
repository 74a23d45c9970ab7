/**
 * Records as Mautic's API serializes them. A contact has the shape recorded from Mautic 5.1.1
 * (real-mautic-5.1.1/contact_single_new.json): `fields` grouped by field group, each field with
 * its definition, and `fields.all` holding every field (null when unset) with the id as a string.
 */
import { DEFAULT_CONTACT_FIELDS, type FieldDefinition } from './contact-fields.ts';
import { EncodedJson } from './php.ts';
import { type EntityName, type EntityState, phpDate, type StoredRecord } from './store.ts';

interface EntityDefinition {
  multi: string;
  one: string;
  /** CustomFieldsApiControllerTrait: blanks and zeros do not overwrite on POST and PATCH. */
  customFields: boolean;
  /** Raw-SQL lists: `total` is a string and the list an object keyed by id (§5.4). */
  rawSqlList: boolean;
}

export const ENTITIES: Record<EntityName, EntityDefinition> = {
  contacts: { multi: 'contacts', one: 'contact', customFields: true, rawSqlList: true },
  companies: { multi: 'companies', one: 'company', customFields: true, rawSqlList: true },
  segments: { multi: 'lists', one: 'list', customFields: false, rawSqlList: false },
  campaigns: { multi: 'campaigns', one: 'campaign', customFields: false, rawSqlList: false },
};

/** The keys `minimal=1` drops: the `leadDetails` group's own properties (Lead::loadApiMetadata). */
const DETAIL_KEYS = [
  'lastActive',
  'owner',
  'ipAddresses',
  'tags',
  'utmtags',
  'stage',
  'dateIdentified',
  'preferredProfileImage',
  'doNotContact',
  'frequencyRules',
] as const;

function formEntity(record: StoredRecord) {
  return {
    isPublished: true,
    dateAdded: phpDate(record.addedAt),
    dateModified: phpDate(record.modifiedAt),
    createdBy: null,
    createdByUser: null,
    modifiedBy: null,
    modifiedByUser: null,
  };
}

/** One record as its entity's API shows it; `minimal` is the contact list's `minimal=1`. */
export function present(
  state: EntityState,
  entity: EntityName,
  record: StoredRecord,
  minimal = false,
): Record<string, unknown> {
  if (entity === 'contacts') return presentContact(state, record, minimal);
  const common = { id: record.id, ...formEntity(record) };
  if (entity === 'companies') {
    return { ...common, fields: { all: { id: record.id, ...record.fields } } };
  }
  return { ...common, ...record.fields };
}

/** A contact's points as its integer column holds them. */
export function contactPoints(record: StoredRecord): number {
  return Math.trunc(Number(record.fields.points)) || 0;
}

function presentContact(state: EntityState, record: StoredRecord, minimal: boolean) {
  const hasEmail = typeof record.fields.email === 'string' && record.fields.email !== '';
  const tags = Array.isArray(record.fields.tags) ? record.fields.tags : [];
  const details = {
    lastActive: null,
    owner: null,
    ipAddresses: [],
    tags: tags.map((tag) => ({ tag })),
    utmtags: null,
    stage: null,
    dateIdentified: hasEmail ? phpDate(record.addedAt) : null,
    preferredProfileImage: null,
    doNotContact: (state.links.get(record.id)?.doNotContact ?? []).map((entry) => ({
      id: entry.id,
      dateAdded: phpDate(entry.addedAt),
      reason: entry.reason,
      comments: entry.comments,
      channel: entry.channel,
      channelId: entry.channelId,
    })),
    frequencyRules: [],
  };
  const contact: Record<string, unknown> = {
    ...formEntity(record),
    id: record.id,
    points: contactPoints(record),
    color: null,
    fields: contactFields(state, record),
  };
  if (!minimal) for (const key of DETAIL_KEYS) contact[key] = details[key];
  return contact;
}

/** The contact fields of one store as its contacts show them. */
interface FieldLayout {
  /** How many custom fields the store had: it only ever adds them. */
  customCount: number;
  /** Every contact field: the defaults, then the custom ones in the order they appeared. */
  definitions: FieldDefinition[];
  /**
   * Each field's entry in `fields.<group>` when the contact has no value for it, encoded once:
   * most of a contact's fields are unset, and their definitions are most of its 5 KB.
   */
  unsetEntries: EncodedJson[];
}

const layouts = new WeakMap<EntityState, FieldLayout>();

function fieldLayout(state: EntityState): FieldLayout {
  const cached = layouts.get(state);
  if (cached?.customCount === state.customFields.size) return cached;
  const custom = [...state.customFields.entries()].map(([alias, id]) => ({
    id,
    group: 'core' as const,
    label: alias,
    alias,
    type: 'text',
    properties: [],
  }));
  const definitions = [...DEFAULT_CONTACT_FIELDS, ...custom];
  const layout = {
    customCount: state.customFields.size,
    definitions,
    unsetEntries: definitions.map((definition) => new EncodedJson(fieldEntry(definition, null))),
  };
  layouts.set(state, layout);
  return layout;
}

function fieldEntry(definition: FieldDefinition, value: unknown) {
  return { ...definition, value, normalizedValue: value ?? '' };
}

function contactFields(state: EntityState, record: StoredRecord) {
  const groups: Record<FieldDefinition['group'], Record<string, unknown>> = {
    core: {},
    social: {},
    personal: {},
    professional: {},
  };
  const all: Record<string, unknown> = { id: String(record.id) };
  const { definitions, unsetEntries } = fieldLayout(state);
  definitions.forEach((definition, index) => {
    const stored = record.fields[definition.alias];
    const value = definition.alias === 'points' ? contactPoints(record) : (stored ?? null);
    groups[definition.group][definition.alias] =
      value === null ? unsetEntries[index] : fieldEntry(definition, value);
    all[definition.alias] = value;
  });
  // PHP's empty groups are arrays, which JSON shows as [].
  const group = (fields: Record<string, unknown>) =>
    Object.keys(fields).length === 0 ? [] : fields;
  return {
    core: group(groups.core),
    social: group(groups.social),
    personal: group(groups.personal),
    professional: group(groups.professional),
    all,
  };
}

/** A segment's alias: the stored one, else the one ListModel derives from its name. */
export function segmentAlias(record: StoredRecord): string {
  const stored = record.fields.alias;
  const source =
    typeof stored === 'string' && stored !== '' ? stored : String(record.fields.name ?? '');
  return source
    .trim()
    .replace(/ /g, '-')
    .replace(/[^0-9a-z-]+/gi, '')
    .toLowerCase();
}

/** Whether a segment or campaign is published: `isPublished` unset or PHP-truthy. */
export function isPublished(record: StoredRecord): boolean {
  const flag = record.fields.isPublished;
  return !(flag === false || flag === 0 || flag === '0' || flag === '' || flag === null);
}
