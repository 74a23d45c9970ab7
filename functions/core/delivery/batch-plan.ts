import { createHash } from 'node:crypto';
import { canonicalReference } from '../contact-reference.ts';
import {
  type Action,
  type ContactMatch,
  contactMatch,
  isContactAction,
  type QueuedEvent,
  recordKey,
} from '../events.ts';
import type { ActionFields } from '../ports.ts';
import { type MergeState, mergeEvents, mergeStateOf } from './event-merge.ts';

/** One queued event and the SQS message that carried it. */
export interface IncomingEvent {
  messageId: string;
  event: QueuedEvent;
  /** The message's receive count (SQS's ApproximateReceiveCount): 1 on its first delivery. */
  receives?: number;
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
  /**
   * A contact edit that sets `email` (Mautic may merge another contact into it, docs/mautic.md
   * §5.1) or a field that a `match` of the batch names: which contact a reference names may
   * change with it.
   */
  barrier: boolean;
}

/** One Mautic item and every message whose event it carries. */
export interface PlannedItem {
  messageIds: string[];
  /** The event ids of those messages, each once, in arrival order: for the call's log line. */
  eventIds?: string[];
  /** The record's fields (create), or its id and fields (edit). Empty for delete. */
  payload: Record<string, unknown>;
  /** The Mautic record id (edit, delete, actions): given, or resolved from `match`. */
  id?: number;
  /** How the event names its contact when not by id (contract §5): resolved before the call. */
  match?: ContactMatch;
  /** An integrator action's own fields (contract §5). */
  fields?: ActionFields;
  /** The key under which a non-idempotent action is claimed in the ledger (`addPoints`). */
  ledgerKey?: string;
  /** A message of the item was received before: an earlier try may have reached Mautic. */
  redelivered?: boolean;
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
  // A contact named by id and one named by `match`, or by two match fields, may be one contact.
  if (later.action !== 'create' && keyKind(later.key) !== keyKind(earlier.key)) return true;
  return later.key !== undefined && later.key === earlier.key;
}

/** How a key names its record: `id`, `email` or another match field. */
function keyKind(key: string | undefined): string {
  return key?.slice(0, key.indexOf(' ')) ?? '';
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
  const matchFields = new Set(events.flatMap(({ event }) => contactMatch(event)?.field ?? []));
  for (const unique of uniqueEvents(events)) {
    const { entity } = unique.event;
    let planner = planners.get(entity);
    if (!planner) {
      planner = new EntityPlanner(entity, matchFields);
      planners.set(entity, planner);
    }
    planner.add(unique);
  }
  return [...planners.values()].flatMap((planner) => planner.chunks(batchSize));
}

interface UniqueEvent {
  messageIds: string[];
  event: QueuedEvent;
  /** One of its messages was received before. */
  redelivered: boolean;
}

/** Folds events that repeat an earlier one (same `eventId`, same content) into it. */
function uniqueEvents(events: ReadonlyArray<IncomingEvent>): UniqueEvent[] {
  const byId = new Map<string, UniqueEvent[]>();
  const unique: UniqueEvent[] = [];
  for (const { messageId, event, receives = 1 } of events) {
    const content = contentOf(event);
    const same = byId.get(event.eventId)?.find((seen) => contentOf(seen.event) === content);
    if (same) {
      same.messageIds.push(messageId);
      same.redelivered ||= receives > 1;
      continue;
    }
    const entry = { messageIds: [messageId], event, redelivered: receives > 1 };
    unique.push(entry);
    byId.set(event.eventId, [...(byId.get(event.eventId) ?? []), entry]);
  }
  return unique;
}

function contentOf(event: QueuedEvent): string {
  const { v: _v, eventId: _id, receivedAt: _at, sender: _sender, ...content } = event;
  return JSON.stringify(Object.entries(content).sort(([a], [b]) => (a < b ? -1 : 1)));
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
  /** The last phase naming a record each way (`keyKind`): other ways may name the same one. */
  readonly #lastByKind = new Map<string, number>();
  readonly #lastByKey = new Map<string, number>();
  readonly #matchFields: ReadonlySet<string>;

  constructor(entity: string, matchFields: ReadonlySet<string>) {
    this.#entity = entity;
    this.#matchFields = matchFields;
  }

  add({ messageIds, event, redelivered }: UniqueEvent): void {
    const record = recordOf(event, this.#matchFields);
    const merge = mergeStateOf(event);
    // What a barrier does to other contacts is not a field write: it takes no other event.
    if (record.barrier) merge.mergeable = false;
    const single = singleItem(messageIds, event, record);
    if (redelivered) single.redelivered = true;
    // The last phase holding an event this one must follow.
    const after = Math.max(
      this.#lastBarrier,
      record.barrier ? this.#lastAny : -1,
      record.action === 'create' ? this.#lastOther : this.#lastCreate,
      record.action === 'create' ? -1 : this.#lastOfOtherKinds(record.key),
      record.key === undefined ? -1 : (this.#lastByKey.get(record.key) ?? -1),
    );

    const phase = this.#phases[after];
    const slot = record.key === undefined ? undefined : phase?.byKey.get(record.key);
    if (phase && slot && phase.action === event.action && mergeEvents(slot.merge, merge)) {
      slot.item.messageIds.push(...messageIds);
      if (!slot.item.eventIds?.includes(event.eventId)) slot.item.eventIds?.push(event.eventId);
      if (redelivered) slot.item.redelivered = true;
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
    const item: PlannedItem = { ...single, messageIds: [...messageIds], eventIds: [event.eventId] };
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
    if (record.action !== 'create') {
      const kind = keyKind(record.key);
      this.#lastByKind.set(kind, Math.max(this.#lastByKind.get(kind) ?? -1, phase));
    }
    if (record.key !== undefined) {
      this.#lastByKey.set(record.key, Math.max(this.#lastByKey.get(record.key) ?? -1, phase));
    }
  }

  #lastOfOtherKinds(key: string | undefined): number {
    const kind = keyKind(key);
    let last = -1;
    for (const [other, phase] of this.#lastByKind) if (other !== kind) last = Math.max(last, phase);
    return last;
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

function recordOf(event: QueuedEvent, matchFields: ReadonlySet<string>): RecordRef {
  const key = recordKey(event);
  if (event.action === 'create')
    return { entity: event.entity, action: 'create', key, barrier: false };
  return {
    entity: event.entity,
    action: event.action,
    key,
    barrier:
      event.entity === 'contacts' && event.action === 'edit' && movesReferences(event, matchFields),
  };
}

/**
 * Whether a contact edit may change which contact a reference names: it writes `email` or a
 * field a `match` of the batch names, other than its own reference's field with the same value.
 */
function movesReferences(event: QueuedEvent, matchFields: ReadonlySet<string>): boolean {
  const own = contactMatch(event);
  return Object.entries(event.data ?? {}).some(
    ([field, value]) =>
      (field === 'email' || matchFields.has(field)) &&
      !(
        own?.field === field &&
        typeof value === 'string' &&
        canonicalReference(field, value) === canonicalReference(field, own.value)
      ),
  );
}

/** The event as an item of its own. */
function singleItem(messageIds: string[], event: QueuedEvent, record: RecordRef): PlannedItem {
  const match = contactMatch(event);
  const { segmentId, campaignId, companyId, points } = event;
  return {
    messageIds: [...messageIds],
    eventIds: [event.eventId],
    payload: payloadOf(event, { ...event.data }),
    ...(event.action === 'create' || event.id === undefined ? {} : { id: event.id }),
    ...(match ? { match } : {}),
    ...(isContactAction(event.action)
      ? { fields: { segmentId, campaignId, companyId, points, ...dncOf(event) } }
      : {}),
    ...(event.action === 'addPoints' ? { ledgerKey: ledgerKeyOf(event) } : {}),
    record,
  };
}

/** Do Not Contact as Mautic's contact item takes it (reference §11.5): reason 0 lifts it. */
function dncOf(event: QueuedEvent): ActionFields {
  if (event.action !== 'addDoNotContact' && event.action !== 'removeDoNotContact') return {};
  const reason = event.action === 'removeDoNotContact' ? 0 : DNC_REASONS[event.reason ?? 'manual'];
  return {
    doNotContact: {
      channel: event.channel ?? 'email',
      reason,
      ...(event.comments === undefined ? {} : { comments: event.comments }),
    },
  };
}

const DNC_REASONS = { unsubscribed: 1, bounced: 2, manual: 3 } as const;

/** The event's ledger key: its sender and id, hashed so neither can be read back or collide. */
function ledgerKeyOf(event: QueuedEvent): string {
  const digest = createHash('sha256').update(JSON.stringify([event.sender, event.eventId]));
  return `${event.action} ${digest.digest('hex')}`;
}

function payloadOf(event: QueuedEvent, fields: Record<string, unknown>): Record<string, unknown> {
  if (event.action !== 'create' && event.action !== 'edit') return {};
  // Spread, not Object.assign: a `__proto__` key in the data must stay a plain field.
  return {
    ...fields,
    ...(event.action === 'edit' && event.id !== undefined ? { id: event.id } : {}),
  };
}
