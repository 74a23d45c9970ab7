/**
 * Records as Mautic's API serializes them. A contact and a company have the shapes recorded
 * from Mautic 5.1.1 (real-mautic-5.1.1/): a contact is a form entity with its grouped `fields`
 * and its details, a company `{id, score, fields}`; field-groups.ts shows `fields` as a created
 * or as a loaded record. Other entities are their stored fields beside the form entity's keys.
 */
import { contactPoints, groupedFields, type RecordView } from './field-groups.ts';
import { type EntityName, type EntityState, phpDate, type StoredRecord } from './store.ts';

export { contactPoints, type RecordView } from './field-groups.ts';

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
    dateModified: record.modifiedAt === null ? null : phpDate(record.modifiedAt),
    createdBy: null,
    createdByUser: record.createdByUser,
    modifiedBy: null,
    modifiedByUser: record.modifiedByUser,
  };
}

/**
 * One record as its entity's API shows it: `view` says whether this call created it or read it
 * (see field-groups.ts), `minimal` is the contact list's `minimal=1`.
 */
export function present(
  state: EntityState,
  entity: EntityName,
  record: StoredRecord,
  options: { view?: RecordView; minimal?: boolean } = {},
): Record<string, unknown> {
  const view = options.view ?? 'loaded';
  if (entity === 'contacts') return presentContact(state, record, view, options.minimal === true);
  if (entity === 'companies') {
    return { id: record.id, score: 0, fields: groupedFields(state, 'company', record, view) };
  }
  // Tag is no form entity: Mautic shows its id, name and description only.
  if (entity === 'tags') return { id: record.id, description: null, ...record.fields };
  return { id: record.id, ...formEntity(record), ...record.fields };
}

function presentContact(
  state: EntityState,
  record: StoredRecord,
  view: RecordView,
  minimal: boolean,
) {
  const tags = Array.isArray(record.fields.tags) ? record.fields.tags : [];
  const details = {
    lastActive: null,
    owner: null,
    ipAddresses: [],
    tags: tags.map((tag) => ({ tag })),
    // A created contact's collection was never loaded (null); a loaded one's is empty.
    utmtags: view === 'created' ? null : [],
    stage: null,
    dateIdentified: record.identifiedAt === null ? null : phpDate(record.identifiedAt),
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
    fields: groupedFields(state, 'lead', record, view),
  };
  if (!minimal) for (const key of DETAIL_KEYS) contact[key] = details[key];
  return contact;
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
