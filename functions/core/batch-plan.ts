import type { Action, QueuedEvent } from './events.ts';

/** One queued event and the SQS message that carried it. */
export interface IncomingEvent {
  messageId: string;
  event: QueuedEvent;
}

/**
 * Which record an item writes, as far as the planner can tell, and so what it must not be
 * reordered with (see `mustFollow`). `key` is `email <address>` for a contact create, `id <n>`
 * for an edit or delete, and undefined for a create that always makes a new record.
 */
export interface RecordRef {
  entity: string;
  action: Action;
  key: string | undefined;
  /** A contact edit that sets `email`: Mautic may merge another contact into it (docs/mautic.md §5.1). */
  barrier: boolean;
}

/** One Mautic item and every message whose event it carries. */
export interface PlannedItem {
  messageIds: string[];
  /** The record's fields (create), or its id and fields (edit). Empty for delete. */
  payload: Record<string, unknown>;
  /** The Mautic record id (edit, delete). */
  id?: number;
  record: RecordRef;
  /**
   * When several events were merged into this item: each of them as an item of its own, in
   * arrival order, so that they can be sent one by one if Mautic refuses the merged item as
   * invalid (one bad event must not take the others with it, nor let them through unchecked).
   */
  parts?: PlannedItem[];
}

/**
 * Up to `batchSize` items of one (entity, action): one Mautic call. No two items of a chunk are
 * for the same record, and a chunk's phase runs only after every earlier phase of its entity.
 */
export interface Chunk {
  entity: string;
  action: Action;
  /** Position of the chunk's phase within its entity, from 0. */
  phase: number;
  items: PlannedItem[];
}

/**
 * Whether an event `later` must take effect after an event `earlier`, that is whether they may
 * be the same record (records of different entities never are). The planner and the delivery's order guard both use it.
 *
 * - A contact edit that sets `email` (a barrier) may merge any contact into another: it is
 *   ordered with everything.
 * - A create and an edit or delete may always be the same record: a contact create updates the
 *   contact with that email (upsert), whose id the planner cannot know, and any other create
 *   makes the next id, which an edit or delete may name.
 * - Two creates, or two edits/deletes, are the same record only with the same key.
 */
export function mustFollow(later: RecordRef, earlier: RecordRef): boolean {
  if (later.entity !== earlier.entity) return false;
  if (later.barrier || earlier.barrier) return true;
  if ((later.action === 'create') !== (earlier.action === 'create')) return true;
  return later.key !== undefined && later.key === earlier.key;
}

/**
 * Plans the Mautic calls for one batch of events so that Mautic ends up holding exactly what
 * it would hold had each event been sent alone, in arrival order (contract §2):
 *
 * - Events with the same `eventId` and the same content are one event: delivered once, the
 *   duplicates sharing its outcome.
 * - Each entity's events are cut into consecutive phases of one action: an event goes into the
 *   first phase of its action after every earlier event it `mustFollow`, so independent records
 *   share calls while a record's events keep their order across actions (a delete then a create
 *   of one contact leaves it existing).
 * - An event for the record of an item in that very phase is merged into it when `mergeEvents`
 *   says the merge gives the sequential result; otherwise it waits for a later phase, so the
 *   two go in separate calls, in arrival order.
 *
 * Every phase is cut into chunks of at most `batchSize` items. Chunks come grouped by entity in
 * order of first arrival, phases in order. Every message id appears in exactly one item.
 */
export function planBatches(events: ReadonlyArray<IncomingEvent>, batchSize: number): Chunk[] {
  if (!Number.isInteger(batchSize) || batchSize < 1) {
    throw new TypeError('Expected `batchSize` to be a positive integer.');
  }
  const planners = new Map<string, EntityPlanner>();
  for (const unique of uniqueEvents(events)) {
    const { entity } = unique.event;
    let planner = planners.get(entity);
    if (!planner) {
      planner = new EntityPlanner(entity);
      planners.set(entity, planner);
    }
    planner.add(unique);
  }
  return [...planners.values()].flatMap((planner) => planner.chunks(batchSize));
}

interface UniqueEvent {
  messageIds: string[];
  event: QueuedEvent;
}

/** Folds events that repeat an earlier one (same `eventId`, same content) into it. */
function uniqueEvents(events: ReadonlyArray<IncomingEvent>): UniqueEvent[] {
  const byId = new Map<string, UniqueEvent[]>();
  const unique: UniqueEvent[] = [];
  for (const { messageId, event } of events) {
    const content = contentOf(event);
    const same = byId.get(event.eventId)?.find((seen) => contentOf(seen.event) === content);
    if (same) {
      same.messageIds.push(messageId);
      continue;
    }
    const entry = { messageIds: [messageId], event };
    unique.push(entry);
    byId.set(event.eventId, [...(byId.get(event.eventId) ?? []), entry]);
  }
  return unique;
}

function contentOf(event: QueuedEvent): string {
  return JSON.stringify([event.entity, event.action, event.id, event.data]);
}

interface Slot {
  item: PlannedItem;
  merge: MergeState;
  singles: PlannedItem[];
}

interface Phase {
  action: Action;
  /** A barrier's phase takes nothing else. */
  closed: boolean;
  slots: Slot[];
  byKey: Map<string, Slot>;
}

/** The phases of one entity, built one event at a time in arrival order. */
class EntityPlanner {
  readonly #entity: string;
  readonly #phases: Phase[] = [];
  // The last phase holding an event of each kind, so that an event's earliest phase is O(1).
  #lastCreate = -1;
  #lastOther = -1;
  #lastAny = -1;
  #lastBarrier = -1;
  readonly #lastByKey = new Map<string, number>();

  constructor(entity: string) {
    this.#entity = entity;
  }

  add({ messageIds, event }: UniqueEvent): void {
    const record = recordOf(event);
    const merge = mergeStateOf(event);
    // What a barrier does to other contacts is not a field write: it takes no other event.
    if (record.barrier) merge.mergeable = false;
    const single: PlannedItem = {
      messageIds: [...messageIds],
      payload: payloadOf(event, { ...event.data }),
      ...(event.action === 'create' || event.id === undefined ? {} : { id: event.id }),
      record,
    };
    // The last phase holding an event this one must follow.
    const after = Math.max(
      this.#lastBarrier,
      record.barrier ? this.#lastAny : -1,
      record.action === 'create' ? this.#lastOther : this.#lastCreate,
      record.key === undefined ? -1 : (this.#lastByKey.get(record.key) ?? -1),
    );

    const phase = this.#phases[after];
    const slot = record.key === undefined ? undefined : phase?.byKey.get(record.key);
    if (phase && slot && phase.action === event.action && mergeEvents(slot.merge, merge)) {
      slot.item.messageIds.push(...messageIds);
      slot.singles.push(single);
      slot.item.payload = payloadOf(event, slot.merge.fields);
      slot.item.parts = slot.singles;
      this.#placed(record, after);
      return;
    }

    let index = record.barrier
      ? -1
      : this.#phases.findIndex((p, i) => i > after && p.action === event.action && !p.closed);
    if (index === -1) {
      this.#phases.push({
        action: event.action,
        closed: record.barrier,
        slots: [],
        byKey: new Map(),
      });
      index = this.#phases.length - 1;
    }
    const target = this.#phases[index] as Phase;
    const item: PlannedItem = { ...single, messageIds: [...messageIds] };
    const entry: Slot = { item, merge, singles: [single] };
    target.slots.push(entry);
    if (record.key !== undefined) target.byKey.set(record.key, entry);
    this.#placed(record, index);
  }

  #placed(record: RecordRef, phase: number): void {
    this.#lastAny = Math.max(this.#lastAny, phase);
    if (record.barrier) this.#lastBarrier = Math.max(this.#lastBarrier, phase);
    if (record.action === 'create') this.#lastCreate = Math.max(this.#lastCreate, phase);
    else this.#lastOther = Math.max(this.#lastOther, phase);
    if (record.key !== undefined) {
      this.#lastByKey.set(record.key, Math.max(this.#lastByKey.get(record.key) ?? -1, phase));
    }
  }

  chunks(batchSize: number): Chunk[] {
    return this.#phases.flatMap((phase, index) => {
      const items = phase.slots.map((slot) => slot.item);
      const chunks: Chunk[] = [];
      for (let start = 0; start < items.length; start += batchSize) {
        chunks.push({
          entity: this.#entity,
          action: phase.action,
          phase: index,
          items: items.slice(start, start + batchSize),
        });
      }
      return chunks;
    });
  }
}

function recordOf(event: QueuedEvent): RecordRef {
  if (event.action === 'create') {
    const email = event.entity === 'contacts' ? event.data?.email : undefined;
    return {
      entity: event.entity,
      action: 'create',
      key: typeof email === 'string' ? `email ${email.trim().toLowerCase()}` : undefined,
      barrier: false,
    };
  }
  return {
    entity: event.entity,
    action: event.action,
    key: event.id === undefined ? undefined : `id ${event.id}`,
    barrier:
      event.entity === 'contacts' &&
      event.action === 'edit' &&
      event.data !== undefined &&
      Object.hasOwn(event.data, 'email'),
  };
}

function payloadOf(event: QueuedEvent, fields: Record<string, unknown>): Record<string, unknown> {
  if (event.action === 'delete') return {};
  // Spread, not Object.assign: a `__proto__` key in the data must stay a plain field.
  return { ...fields, ...(event.action === 'edit' ? { id: event.id } : {}) };
}

// ---------------------------------------------------------------------------------------------
// Merging the events of one record (contract §2, docs/mautic.md §5.2)

/**
 * Contact keys Mautic handles outside its form as operations (add a do-not-contact entry, link
 * a company, record an IP, …), or whose effect depends on more than the value (`company` links
 * a company by name). Two of them in a row are not one of them with the later value, so an
 * event carrying one is never merged.
 */
const CONTACT_OPERATION_KEYS = new Set([
  'company',
  'companies',
  'doNotContact',
  'frequencyRules',
  'ipAddress',
  'lastActive',
  'utmtags',
]);
/** Contact keys that set a reference by id: merged only when the id is a positive integer. */
const CONTACT_REFERENCE_KEYS = new Set(['owner', 'stage']);
const NOT_FIELDS = new Set(['id', 'overwriteWithBlank']);

/** What an item accumulates as events are merged into it. */
interface MergeState {
  entity: string;
  action: Action;
  /** False when the event(s) can take no other event (see `mergeStateOf`). */
  mergeable: boolean;
  /** The item's `overwriteWithBlank`, as Mautic reads it (PHP `!empty`). */
  overwriteWithBlank: boolean;
  /** The fields to send, `overwriteWithBlank: true` included when set. */
  fields: Record<string, unknown>;
}

function mergeStateOf(event: QueuedEvent): MergeState {
  const data = event.data ?? {};
  const overwriteWithBlank = phpTruthy(data.overwriteWithBlank);
  return {
    entity: event.entity,
    action: event.action,
    mergeable: event.action === 'delete' || isMergeable(event.entity, data),
    overwriteWithBlank,
    fields: { ...data },
  };
}

/**
 * Whether an event's data has only keys whose sequential effect the merge can reproduce: plain
 * fields with scalar values, and for contacts `tags` as an array of strings and `owner`/`stage`
 * as positive ids. Anything else (a list, an object, an operation key) and the event is sent in
 * an item of its own: when unsure, do not merge.
 */
function isMergeable(entity: string, data: Record<string, unknown>): boolean {
  const contact = entity === 'contacts';
  return Object.entries(data).every(([key, value]) => {
    if (NOT_FIELDS.has(key)) return key === 'id' || isScalar(value);
    if (contact && key === 'tags') {
      return Array.isArray(value) && value.every((tag) => typeof tag === 'string');
    }
    if (contact && CONTACT_OPERATION_KEYS.has(key)) return false;
    if (contact && CONTACT_REFERENCE_KEYS.has(key)) {
      return (
        (typeof value === 'number' && Number.isSafeInteger(value) && value > 0) ||
        (typeof value === 'string' && /^[1-9]\d{0,15}$/.test(value))
      );
    }
    return isScalar(value);
  });
}

/**
 * Merges `next` (a later event of the same record and action) into `into` when the merged item
 * gives what the two give one after the other, and says whether it did. Mautic refuses an item
 * as a whole when one of its values is invalid, so a merge must neither hide an invalid value
 * (the delivery sends a refused merged item again event by event) nor let part of an event
 * through that alone would have been refused. And the rules must hold whether or not the Mautic
 * version writes zeros (5.x drops numeric zeros on POST/PATCH even with `overwriteWithBlank`;
 * later versions keep them). Hence:
 *
 * - Events that set different fields merge (their union is what the two give in turn).
 * - Events that set some of the same fields merge only when the later one sets every field the
 *   item sets, with values that are not blank or zero, and the item carries no tags: then the
 *   later event decides every field, whatever became of the earlier ones.
 * - A blank or zero value (`""`, `null`, `false`, `0`, `"0"`, `"0.5"`, white space) never meets
 *   another value of the same field: whether it is skipped or written depends on the rules.
 * - `overwriteWithBlank` covers the whole item: events that differ in it merge only when
 *   neither carries a blank or zero value.
 * - Contact `tags` are operations: the lists are joined (an exact repeat dropped), unless a tag
 *   would appear both added and removed or spelled two ways, which Mautic does not apply in
 *   order within one item. The email of contact creates is their identity, not a field here.
 * - Deletes of one id always merge: deleting twice is deleting once.
 */
function mergeEvents(into: MergeState, next: MergeState): boolean {
  if (!into.mergeable || !next.mergeable) return false;
  if (into.entity !== next.entity || into.action !== next.action) return false;
  if (into.action === 'delete') return true;
  const contact = into.entity === 'contacts';
  const identity = contact && into.action === 'create' ? 'email' : undefined;
  if (
    into.overwriteWithBlank !== next.overwriteWithBlank &&
    (hasBlank(into.fields, contact) || hasBlank(next.fields, contact))
  ) {
    return false;
  }
  const fieldsOf = (fields: Record<string, unknown>) =>
    Object.keys(fields).filter(
      (key) => !NOT_FIELDS.has(key) && key !== identity && !(contact && key === 'tags'),
    );
  const earlier = fieldsOf(into.fields);
  const later = new Set(fieldsOf(next.fields));
  if (earlier.some((key) => later.has(key))) {
    const tagged = Array.isArray(into.fields.tags) && into.fields.tags.length > 0;
    if (tagged || !earlier.every((key) => later.has(key))) return false;
    if (earlier.some((key) => isBlankOrZero(next.fields[key]))) return false;
  }
  const merged: Record<string, unknown> = { ...into.fields };
  for (const [key, value] of Object.entries(next.fields)) {
    if (NOT_FIELDS.has(key)) continue;
    if (contact && key === 'tags') {
      const tags = mergeTags(merged.tags, value);
      if (tags === undefined) return false;
      merged.tags = tags;
      continue;
    }
    // defineProperty, not assignment: a `__proto__` key must stay a plain field.
    Object.defineProperty(merged, key, {
      value,
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  const overwriteWithBlank = into.overwriteWithBlank || next.overwriteWithBlank;
  delete merged.overwriteWithBlank;
  delete merged.id;
  if (overwriteWithBlank) merged.overwriteWithBlank = true;
  into.fields = merged;
  into.overwriteWithBlank = overwriteWithBlank;
  return true;
}

function mergeTags(earlier: unknown, later: unknown): string[] | undefined {
  const tags = Array.isArray(earlier) ? [...(earlier as string[])] : [];
  for (const tag of later as string[]) if (!tags.includes(tag)) tags.push(tag);
  const names = new Set<string>();
  for (const tag of tags) {
    const trimmed = tag.trim();
    const name = (trimmed.startsWith('-') ? trimmed.slice(1) : trimmed).trim().toLowerCase();
    if (names.has(name)) return undefined;
    names.add(name);
  }
  return tags;
}

function hasBlank(fields: Record<string, unknown>, contact: boolean): boolean {
  return Object.entries(fields).some(
    ([key, value]) => !NOT_FIELDS.has(key) && !(contact && key === 'tags') && isBlankOrZero(value),
  );
}

/**
 * A value that Mautic may skip rather than write (blank, or numeric with integer part 0), on
 * the cautious side: PHP's `empty()` values, white space, and every numeric zero.
 */
function isBlankOrZero(value: unknown): boolean {
  if (value === null || value === undefined || value === false) return true;
  if (typeof value === 'number') return !Number.isFinite(value) || Math.trunc(value) === 0;
  if (typeof value !== 'string') return false;
  const text = value.trim();
  if (text === '') return true;
  const number = Number(text);
  return /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/.test(text) && Math.trunc(number) === 0;
}

function isScalar(value: unknown): boolean {
  return value === null || ['string', 'number', 'boolean'].includes(typeof value);
}

/** PHP's `!empty()` of a scalar. */
function phpTruthy(value: unknown): boolean {
  return !(
    value === undefined ||
    value === null ||
    value === false ||
    value === 0 ||
    value === '' ||
    value === '0'
  );
}
