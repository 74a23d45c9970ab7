/**
 * The entities the simulator's standard routes serve: the 24 of the relay's default `ENTITIES`
 * (docs/mautic.md §7), each with the keys its API controller answers under, how it writes an
 * item's values, and the fields its entity's validator requires (read in Mautic 5.1.1's
 * `loadValidatorMetadata`, messages from its `validators.ini`). Conditional rules (a callback's
 * checks, validation groups) and form-type constraints are not modelled: README.md says where.
 */

export const ENTITY_NAMES = [
  'contacts',
  'companies',
  'segments',
  'notes',
  'devices',
  'tags',
  'assets',
  'campaigns',
  'categories',
  'messages',
  'dynamiccontents',
  'emails',
  'forms',
  'notifications',
  'pages',
  'points',
  'reports',
  'smses',
  'stages',
  'users',
  'roles',
  'hooks',
  'focus',
  'tweets',
] as const;

export type EntityName = (typeof ENTITY_NAMES)[number];

/** How an entity's API binds an item's values (docs/mautic.md §5.2). */
export type WriteStyle =
  /** LeadApiController: blanks and numeric zeros skipped on POST and PATCH, `tags` operations. */
  | 'contact'
  /** Every other controller: a sent value is written, blank or zero; PUT clears what is unsent. */
  | 'plain';

export interface EntityDefinition {
  /** The answer's key for a list (`entityNameMulti`) and for one record (`entityNameOne`). */
  multi: string;
  one: string;
  write: WriteStyle;
  /** Raw-SQL lists: `total` is a string and the list an object keyed by id (§5.4). */
  rawSqlList: boolean;
  /** NotBlank constraints of the entity: field → violation message, in the order checked. */
  required: ReadonlyArray<readonly [field: string, message: string]>;
  /**
   * A contact field flagged "unique identifier" (Mautic's defaults: `email` for contacts,
   * `companyname` for companies): UniqueCustomField refuses a value another record holds (422).
   */
  unique?: string;
}

const NAME = 'A name is required.';
const TITLE = 'A title is required.';

const plain = (
  multi: string,
  one: string,
  required: ReadonlyArray<readonly [string, string]> = [],
): EntityDefinition => ({ multi, one, write: 'plain', rawSqlList: false, required });

export const ENTITIES: Record<EntityName, EntityDefinition> = {
  contacts: {
    multi: 'contacts',
    one: 'contact',
    write: 'contact',
    rawSqlList: true,
    required: [],
    unique: 'email',
  },
  companies: {
    multi: 'companies',
    one: 'company',
    write: 'plain',
    rawSqlList: true,
    // A field flagged required gets NotBlank with mautic.lead.customfield.notblank.
    required: [['companyname', 'This field is required.']],
    unique: 'companyname',
  },
  // Kept from the simulator's first version; LeadList's own NotBlank says "A name is required.".
  segments: plain('lists', 'list', [['name', 'A value is required.']]),
  notes: plain('notes', 'note', [['text', 'Note text cannot be empty']]),
  devices: plain('devices', 'device'),
  tags: plain('tags', 'tag'),
  assets: plain('assets', 'asset', [['title', 'Assset Title is required.']]),
  campaigns: plain('campaigns', 'campaign', [['name', NAME]]),
  categories: plain('categories', 'category', [
    ['title', TITLE],
    ['bundle', 'A value is required.'],
  ]),
  messages: plain('messages', 'message', [['name', NAME]]),
  dynamiccontents: plain('dynamicContents', 'dynamicContent', [['name', NAME]]),
  emails: plain('emails', 'email', [
    ['name', NAME],
    ['subject', 'A subject is required.'],
  ]),
  forms: plain('forms', 'form', [['name', NAME]]),
  notifications: plain('notifications', 'notification', [
    ['name', NAME],
    ['heading', TITLE],
    ['message', 'A message is required.'],
  ]),
  pages: plain('pages', 'page', [['title', TITLE]]),
  points: plain('points', 'point', [
    ['name', NAME],
    ['type', 'A point action must be selected.'],
    ['delta', 'A point change (delta) must be selected.'],
  ]),
  reports: plain('reports', 'report', [['name', NAME]]),
  smses: plain('smses', 'sms', [['name', NAME]]),
  stages: plain('stages', 'stage', [['name', NAME]]),
  users: plain('users', 'user', [
    ['username', 'Username is required.'],
    ['firstName', 'First name is required.'],
    ['lastName', 'Last name is required.'],
    ['email', 'The email entered is invalid.'],
    ['role', 'A role must be chosen for this user.'],
  ]),
  roles: plain('roles', 'role', [['name', NAME]]),
  hooks: plain('hooks', 'hook', [
    ['name', NAME],
    ['webhookUrl', 'A valid URL is required.'],
  ]),
  focus: plain('focus', 'focus', [
    ['name', NAME],
    ['type', 'Use the builder to select what the focus should be.'],
    ['style', 'Use the builder to select what style should be used.'],
  ]),
  tweets: plain('tweets', 'tweet'),
};

/** The entity a path segment names, if the simulator serves it. */
export function entityNamed(name: string | undefined): EntityName | undefined {
  return ENTITY_NAMES.find((candidate) => candidate === name);
}
