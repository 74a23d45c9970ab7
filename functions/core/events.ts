import { canonicalReference, lookupProblem } from './contact-reference.ts';
import { cleaningChanges, isMauticEmail } from './email-address.ts';
import { lazy } from './lazy.ts';
import { CONTACT_FIELD_PATTERN, ENTITY_PATTERN } from './mautic-names.ts';
import * as z from './zod.ts';

/** The writes of Mautic's batch API, for any entity. */
const RECORD_ACTIONS = ['create', 'edit', 'delete'] as const;

/**
 * The integrator actions on contacts (contract §5) and the fields each takes beside `entity`,
 * `action`, `id`/`match` and `eventId`; a field in `required` must be given.
 */
export const CONTACT_ACTIONS = {
  addToSegment: { fields: ['segmentId'], required: ['segmentId'] },
  removeFromSegment: { fields: ['segmentId'], required: ['segmentId'] },
  addToCampaign: { fields: ['campaignId'], required: ['campaignId'] },
  removeFromCampaign: { fields: ['campaignId'], required: ['campaignId'] },
  addDoNotContact: { fields: ['channel', 'reason', 'comments'], required: [] },
  // `reason` and `comments` are taken (contract §5) and mean nothing: the entry is lifted.
  removeDoNotContact: { fields: ['channel', 'reason', 'comments'], required: [] },
  addPoints: { fields: ['points'], required: ['points'] },
  linkCompany: { fields: ['companyId'], required: ['companyId'] },
  unlinkCompany: { fields: ['companyId'], required: ['companyId'] },
} as const satisfies Record<string, { fields: readonly string[]; required: readonly string[] }>;
export type ContactAction = keyof typeof CONTACT_ACTIONS;
const ACTIONS = [...RECORD_ACTIONS, ...(Object.keys(CONTACT_ACTIONS) as ContactAction[])] as [
  Action,
  ...Action[],
];
export type Action = (typeof RECORD_ACTIONS)[number] | ContactAction;

export function isContactAction(action: Action): action is ContactAction {
  return Object.hasOwn(CONTACT_ACTIONS, action);
}

/** Every action field, each with its own type; which action takes which is `CONTACT_ACTIONS`. */
const positiveId = () => z.int().check(z.positive());
const actionFieldSchemas = () => ({
  segmentId: positiveId(),
  campaignId: positiveId(),
  companyId: positiveId(),
  channel: z
    .string()
    .check(z.regex(/^[a-z][a-z0-9_]{0,63}$/, 'must be a Mautic channel name such as "email"')),
  reason: z.enum(['manual', 'unsubscribed', 'bounced']),
  comments: z.string().check(z.maxLength(255)),
  // Mautic's points column is a signed 32-bit integer.
  points: z.int().check(
    z.gte(-2_147_483_647),
    z.lte(2_147_483_647),
    z.refine((points) => points !== 0, 'must not be 0'),
  ),
});
type ActionField = keyof ReturnType<typeof actionFieldSchemas>;
const ACTION_FIELDS = Object.keys({
  segmentId: true,
  campaignId: true,
  companyId: true,
  channel: true,
  reason: true,
  comments: true,
  points: true,
} satisfies Record<ActionField, true>) as ActionField[];

/** The fields both forms of an event share; built with the schema that uses them. */
const eventFields = () => {
  const action = actionFieldSchemas();
  return {
    entity: z
      .string()
      .check(
        z.regex(
          ENTITY_PATTERN,
          'must be a Mautic API path name such as "contacts" (/^[a-z][a-zA-Z]{1,63}$/)',
        ),
      ),
    action: z.enum(ACTIONS),
    data: z.optional(z.record(z.string(), z.unknown())),
    id: z.optional(positiveId()),
    match: z.optional(z.record(z.string(), z.unknown())),
    segmentId: z.optional(action.segmentId),
    campaignId: z.optional(action.campaignId),
    companyId: z.optional(action.companyId),
    channel: z.optional(action.channel),
    reason: z.optional(action.reason),
    comments: z.optional(action.comments),
    points: z.optional(action.points),
  };
};

type EventShape = {
  entity: string;
  action: Action;
  data?: Record<string, unknown> | undefined;
  id?: number | undefined;
  match?: Record<string, unknown> | undefined;
} & { [field in (typeof ACTION_FIELDS)[number]]?: unknown };

/** The rules that tie fields together (contract §1's event table, §5). */
function checkEvent(event: EventShape, ctx: z.core.$RefinementCtx): void {
  const issue = (path: string[], message: string) =>
    ctx.addIssue({ code: 'custom', path, message });
  checkActionFields(event, issue);
  checkReference(event, issue);
  if (event.entity !== 'contacts' || event.data === undefined) return;
  const email = event.data.email;
  // A blank email on an edit is what Mautic's validator skips (it clears the field only under
  // overwriteWithBlank); a create needs one.
  const blank = email === undefined || email === null || email === '';
  if (blank && event.action !== 'create') return;
  if (email === undefined) {
    if (event.action === 'create') issue(['data', 'email'], 'is required to create a contact');
  } else if (typeof email !== 'string' || !isMauticEmail(email.trim())) {
    issue(['data', 'email'], 'must be a valid email address');
  }
}

type Issue = (path: string[], message: string) => void;

/** `data` for create and edit only; each action's own fields, and no other action's. */
function checkActionFields(event: EventShape, issue: Issue): void {
  const { action } = event;
  const own: readonly string[] = isContactAction(action) ? CONTACT_ACTIONS[action].fields : [];
  if (isContactAction(action)) {
    if (event.entity !== 'contacts') {
      issue(['action'], `is an action on contacts; the entity must be "contacts"`);
    }
    if (event.data !== undefined) issue(['data'], `is not taken by ${action}`);
    for (const field of CONTACT_ACTIONS[action].required) {
      if (event[field] === undefined) issue([field], `is required for ${action}`);
    }
  } else if ((action === 'create' || action === 'edit') && event.data === undefined) {
    issue(['data'], `is required for ${action}`);
  }
  for (const field of ACTION_FIELDS) {
    if (event[field] !== undefined && !own.includes(field)) {
      issue([field], `is not taken by ${action}`);
    }
  }
}

/** How the event names its record: a create by its data; anything else by `id` or (contacts) `match`. */
function checkReference(event: EventShape, issue: Issue): void {
  const { action, match } = event;
  if (action === 'create') {
    if (match !== undefined) issue(['match'], 'is not taken by create');
    return;
  }
  if (event.entity !== 'contacts') {
    if (match !== undefined) issue(['match'], 'names contacts only; name other records by id');
    else if (event.id === undefined) issue(['id'], `is required for ${action}`);
    return;
  }
  if ((event.id === undefined) === (match === undefined)) {
    issue(['match'], `give exactly one of id and match to name the contact of ${action}`);
    return;
  }
  if (match === undefined) return;
  const keys = Object.keys(match);
  const [field] = keys;
  if (keys.length !== 1 || field === undefined) {
    issue(['match'], 'must have exactly one key: email, or a field in CONTACT_MATCH_FIELDS');
    return;
  }
  const value = match[field];
  if (!CONTACT_FIELD_PATTERN.test(field)) {
    issue(['match', field], 'is not a contact field alias (/^[a-z][a-z0-9_]{0,63}$/)');
  } else if (typeof value !== 'string' || value.trim() === '' || value.length > 255) {
    issue(['match', field], 'must be a non-empty string of at most 255 characters');
  } else if (field === 'email' && !isMauticEmail(value.trim())) {
    issue(['match', 'email'], 'must be a valid email address');
  }
}

/**
 * What the ingest refuses beyond the queued form's rules (contract §1, §5): an email Mautic's
 * cleaning would change (a create with it upserts on the cleaned address, while a `match` with
 * it would look up another contact, or none), and a `match` value Mautic's lookup cannot carry.
 * Queued events are read without it: one queued before is keyed and looked up in the form
 * Mautic stores (`canonicalReference`).
 */
function checkStoredForms(event: EventShape, ctx: z.core.$RefinementCtx): void {
  const issue = (path: string[], message: string) =>
    ctx.addIssue({ code: 'custom', path, message });
  const cleaned =
    "must be an address as Mautic stores it: cleaning would change it (only ASCII letters, digits and !#$%&'*+-=?^_`{|}~@.[] are kept)";
  const email = event.entity === 'contacts' ? event.data?.email : undefined;
  if (typeof email === 'string' && isMauticEmail(email) && cleaningChanges(email)) {
    issue(['data', 'email'], cleaned);
  }
  const match = event.entity === 'contacts' ? contactMatch(event) : undefined;
  if (match === undefined || Object.keys(event.match ?? {}).length !== 1) return;
  if (match.field === 'email') {
    if (isMauticEmail(match.value) && cleaningChanges(match.value)) {
      issue(['match', 'email'], cleaned);
    }
    return;
  }
  const problem = lookupProblem(match.value);
  if (problem !== undefined) issue(['match', match.field], problem);
}

/**
 * A character an event id may not hold (contract §1.4): a control character (U+0000–U+001F,
 * U+007F–U+009F), an unpaired surrogate, U+FFFE or U+FFFF. The id reaches stores that refuse
 * or alter them: a dead letter's `relay.eventId` attribute (SQS takes only XML 1.0's
 * characters, and refuses the whole letter for one it does not), and the hashed keys of the
 * message group and the action ledger (UTF-8, where every unpaired surrogate becomes U+FFFD, so
 * two ids would be one). Message group and deduplication ids are hashes: no character of the id
 * reaches them as it is.
 */
const NOT_IN_EVENT_ID = /[\p{Cc}\p{Cs}\uFFFE\uFFFF]/u;

/**
 * An event id as the ingest accepts it, the sender's or one it makes (contract §1.4). This
 * schema and the two below are built at their first use (lazy.ts): a function builds only the
 * ones it uses, and none at INIT.
 */
export const eventIdSchema = lazy(() =>
  z.string().check(
    z.minLength(1),
    z.maxLength(128),
    z.refine(
      (id) => !NOT_IN_EVENT_ID.test(id),
      'must not hold a control character, an unpaired surrogate, U+FFFE or U+FFFF',
    ),
  ),
);

/** One event as a sender posts it (contract §1, §5). */
export const relayEventSchema = lazy(() =>
  z
    .strictObject({ ...eventFields(), eventId: z.optional(eventIdSchema()) })
    .check(z.superRefine(checkEvent), z.superRefine(checkStoredForms)),
);
export type RelayEvent = z.infer<ReturnType<typeof relayEventSchema>>;

/**
 * One queued event: the body of one SQS message, written by ingest and read by the batch
 * function. `v` versions the envelope so a later format can be told apart. Its `eventId` is not
 * held to `eventIdSchema`: the batch function still reads what an ingest before that rule
 * queued (the ingest checks its own, `envelope` in ingest-steps.ts).
 */
export const queuedEventSchema = lazy(() =>
  z
    .object({
      v: z.literal(1),
      eventId: z.string().check(z.minLength(1), z.maxLength(128)),
      receivedAt: z.iso.datetime(),
      sender: z.string().check(z.minLength(1), z.maxLength(128)),
      ...eventFields(),
    })
    .check(z.superRefine(checkEvent)),
);
export type QueuedEvent = z.infer<ReturnType<typeof queuedEventSchema>>;

/** A short, value-free description of why a value failed a schema: paths and messages only. */
export function describeIssues(error: z.core.$ZodError): string {
  return error.issues
    .slice(0, 5)
    .map((issue) => `${issue.path.length > 0 ? issue.path.join('.') : '(event)'}: ${issue.message}`)
    .join('; ');
}

/** A contact reference by field (contract §5): the field and the value as the sender gave it. */
export interface ContactMatch {
  field: string;
  value: string;
}

/** The event's `match`, when it names its contact that way (validated: one key, a string). */
export function contactMatch(event: Pick<QueuedEvent, 'match'>): ContactMatch | undefined {
  const entry = event.match === undefined ? undefined : Object.entries(event.match)[0];
  return entry && typeof entry[1] === 'string' ? { field: entry[0], value: entry[1] } : undefined;
}

/** A reference as it is compared, grouped and looked up: its canonical form (contact-reference.ts). */
export function matchKey({ field, value }: ContactMatch): string {
  return `${field} ${canonicalReference(field, value)}`;
}

/**
 * The reference by which an event names its record, as far as the relay can tell without asking
 * Mautic: `email <address>` for a contact create (Mautic upserts contacts by email) and for a
 * contact named by `match.email`, `<field> <value>` for one named by another match field, `id <n>`
 * for a record named by id, and undefined for a create that always makes a new record. Events of
 * one entity with the same reference keep their arrival order: across batches through the
 * queue's message group (`queueMessageFor`), within a batch through the planner.
 */
export function recordKey(
  event: Pick<QueuedEvent, 'entity' | 'action' | 'data' | 'id' | 'match'>,
): string | undefined {
  if (event.action === 'create') {
    const email = event.entity === 'contacts' ? event.data?.email : undefined;
    return typeof email === 'string' ? matchKey({ field: 'email', value: email }) : undefined;
  }
  const match = contactMatch(event);
  if (match) return matchKey(match);
  return event.id === undefined ? undefined : `id ${event.id}`;
}
