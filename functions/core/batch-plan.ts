import type { Action, QueuedEvent } from './events.ts';

/** One queued event and the SQS message that carried it. */
export interface IncomingEvent {
  messageId: string;
  event: QueuedEvent;
}

/** One Mautic item and every message whose event it carries. */
export interface PlannedItem {
  messageIds: string[];
  /** The record's fields (create), or its id and fields (edit). Empty for delete. */
  payload: Record<string, unknown>;
  /** The Mautic record id (edit, delete). */
  id?: number;
}

/** Up to `batchSize` items of one (entity, action): one Mautic call. */
export interface Chunk {
  entity: string;
  action: Action;
  items: PlannedItem[];
}

const ACTION_ORDER: Readonly<Record<Action, number>> = { create: 0, edit: 1, delete: 2 };

/**
 * Plans the Mautic calls for one batch of events: groups them by (entity, action), coalesces
 * events for the same record in arrival order (a create of a contact by email, compared
 * case-insensitively; an edit or delete by id), merging their fields with the later value
 * winning, and cuts each group into chunks of at most `batchSize` items.
 *
 * Chunks come grouped by entity in order of first arrival, and within an entity as creates,
 * then edits, then deletes, so a record created and edited in one batch exists before it is
 * edited. Every message id appears in exactly one item.
 */
export function planBatches(events: ReadonlyArray<IncomingEvent>, batchSize: number): Chunk[] {
  if (!Number.isInteger(batchSize) || batchSize < 1) {
    throw new TypeError('Expected `batchSize` to be a positive integer.');
  }
  const groups = new Map<
    string,
    { entity: string; action: Action; items: Map<string, PlannedItem> }
  >();
  events.forEach(({ messageId, event }, index) => {
    const groupKey = `${event.entity} ${event.action}`;
    let group = groups.get(groupKey);
    if (!group) {
      group = { entity: event.entity, action: event.action, items: new Map() };
      groups.set(groupKey, group);
    }
    const recordKey = coalescingKey(event) ?? `message ${index}`;
    const item = group.items.get(recordKey);
    // Spread, not Object.assign: a `__proto__` key in the data must stay a plain field.
    const payload = {
      ...item?.payload,
      ...event.data,
      ...(event.action === 'edit' ? { id: event.id } : {}),
    };
    if (item) {
      item.messageIds.push(messageId);
      item.payload = event.action === 'delete' ? {} : payload;
    } else {
      group.items.set(recordKey, {
        messageIds: [messageId],
        payload: event.action === 'delete' ? {} : payload,
        ...(event.id === undefined || event.action === 'create' ? {} : { id: event.id }),
      });
    }
  });

  const entityOrder = [...new Set([...groups.values()].map((group) => group.entity))];
  const ordered = [...groups.values()].sort(
    (a, b) =>
      entityOrder.indexOf(a.entity) - entityOrder.indexOf(b.entity) ||
      ACTION_ORDER[a.action] - ACTION_ORDER[b.action],
  );
  return ordered.flatMap(({ entity, action, items }) => {
    const all = [...items.values()];
    const chunks: Chunk[] = [];
    for (let start = 0; start < all.length; start += batchSize) {
      chunks.push({ entity, action, items: all.slice(start, start + batchSize) });
    }
    return chunks;
  });
}

/** Which events are the same record; undefined when an event stands alone. */
function coalescingKey(event: QueuedEvent): string | undefined {
  if (event.action === 'create') {
    const email = event.entity === 'contacts' ? event.data?.email : undefined;
    return typeof email === 'string' ? `email ${email.trim().toLowerCase()}` : undefined;
  }
  return event.id === undefined ? undefined : `id ${event.id}`;
}
