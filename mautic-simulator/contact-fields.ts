/**
 * The contact fields of a fresh Mautic 5.1.1, as its API lists them (recorded in
 * real-mautic-5.1.1/contact_single_new.json), and which keys of a contact item are not fields.
 * In Mautic every field is a column of the `leads` table; the simulator has no field manager, so
 * any other key a contact is written with becomes a custom field (group `core`, type `text`).
 */

/** One field's definition, as a record's `fields.<group>.<alias>` shows it. */
export interface FieldDefinition {
  id: number;
  group: 'core' | 'social' | 'personal' | 'professional';
  label: string;
  alias: string;
  type: string;
  properties: unknown;
  /** `is_fixed`: a field Mautic ships and an admin cannot delete. */
  fixed: boolean;
  defaultValue: string | null;
}

type Row = [alias: string, label: string, type?: string, properties?: unknown];

const CORE: Row[] = [
  ['title', 'Title', 'lookup', { list: ['Mr', 'Mrs', 'Miss'] }],
  ['firstname', 'First Name'],
  ['lastname', 'Last Name'],
  ['company', 'Primary company'],
  ['position', 'Position'],
  ['email', 'Email', 'email'],
  ['mobile', 'Mobile', 'tel'],
  ['phone', 'Phone', 'tel'],
  ['points', 'Points', 'number'],
  ['fax', 'Fax', 'tel'],
  ['address1', 'Address Line 1'],
  ['address2', 'Address Line 2'],
  ['city', 'City'],
  ['state', 'State', 'region'],
  ['zipcode', 'Zip Code'],
  ['country', 'Country', 'country'],
  ['preferred_locale', 'Preferred Locale', 'locale'],
  ['timezone', 'Preferred Timezone', 'timezone'],
  ['last_active', 'Date Last Active', 'datetime'],
  ['attribution_date', 'Attribution Date', 'datetime'],
  ['attribution', 'Attribution', 'number', { roundmode: 4, scale: 2 }],
  ['website', 'Website', 'url'],
];
const SOCIAL: Row[] = [
  ['facebook', 'Facebook'],
  ['foursquare', 'Foursquare'],
  ['instagram', 'Instagram'],
  ['linkedin', 'mautic.lead.field.linkedin'],
  ['skype', 'Skype'],
  ['twitter', 'Twitter'],
];

/** The default fields that are not `is_fixed`. */
const UNFIXED = new Set([
  'fax',
  'website',
  'facebook',
  'foursquare',
  'instagram',
  'linkedin',
  'skype',
  'twitter',
]);

/** The default contact fields in id order (1–28), the order of a contact Mautic just created. */
export const DEFAULT_CONTACT_FIELDS: readonly FieldDefinition[] = [
  ...CORE.map((row) => ({ row, group: 'core' as const })),
  ...SOCIAL.map((row) => ({ row, group: 'social' as const })),
].map(({ row: [alias, label, type = 'text', properties = []], group }, index) => ({
  id: index + 1,
  group,
  label,
  alias,
  type,
  properties,
  fixed: !UNFIXED.has(alias),
  defaultValue: alias === 'points' ? '0' : null,
}));

/**
 * The order of a contact's fields when Mautic loads it from the database (an edit's, a delete's
 * and a read's answer), recorded in real-mautic-5.1.1/contacts_batch_edit.json.
 */
export const LOADED_CONTACT_ORDER: readonly string[] = [
  'points',
  'last_active',
  'title',
  'firstname',
  'lastname',
  'company',
  'position',
  'email',
  'phone',
  'mobile',
  'address1',
  'address2',
  'city',
  'state',
  'zipcode',
  'timezone',
  'country',
  'fax',
  'preferred_locale',
  'attribution_date',
  'attribution',
  'website',
  ...SOCIAL.map(([alias]) => alias),
];

/** Company fields take ids 29–43 in the same table, so custom contact fields start after them. */
export const FIRST_CUSTOM_FIELD_ID = 44;

/** The social fields: the catch-all search looks in them too, and they identify a contact. */
export const SOCIAL_ALIASES: readonly string[] = SOCIAL.map(([alias]) => alias);

/** The fields the UI search box's catch-all term looks in (LeadRepository::addCatchAllWhereClause). */
export const CATCH_ALL_ALIASES: readonly string[] = [
  'firstname',
  'lastname',
  'email',
  'company',
  'city',
  'state',
  'zipcode',
  'country',
  ...SOCIAL_ALIASES,
];

/**
 * Keys of a contact item that LeadApiController handles outside the form (§5.2): they are no
 * fields, so they are neither in `fields` nor columns a lookup can name.
 */
export const NON_FIELD_KEYS: ReadonlySet<string> = new Set([
  'tags',
  'owner',
  'stage',
  'companies',
  'ipAddress',
  'lastActive',
  'frequencyRules',
  'doNotContact',
  'utmtags',
]);

/** Columns of the `leads` table besides the fields, which a `where` may name. */
export const CORE_COLUMNS: ReadonlySet<string> = new Set([
  'id',
  'owner_id',
  'stage_id',
  'is_published',
  'date_added',
  'created_by',
  'created_by_user',
  'date_modified',
  'modified_by',
  'modified_by_user',
  'checked_out',
  'checked_out_by',
  'checked_out_by_user',
  'internal',
  'social_cache',
  'date_identified',
  'preferred_profile_image',
]);
