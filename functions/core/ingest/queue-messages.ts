/**
 * An accepted event as the queue holds it: one message per event, its message group its record
 * (order per record, contract §2), its deduplication id unique per request handled.
 */
import { createHash } from 'node:crypto';
import { IngestRefusal } from '../errors.ts';
import { type QueuedEvent, recordKey } from '../events.ts';
import type { OutgoingMessage } from '../queue-ports.ts';

/** SQS's limit per message, less room for message attributes. */
export const MAX_MESSAGE_BYTES = 1024 * 1024 - 16 * 1024;

/**
 * Size per message: one message per event, 413 for one too large. `nonce` keeps two requests
 * handled in one millisecond apart where their event ids may be equal (POST /events, whose ids a
 * sender may repeat); a source's ids carry the request's own key or a generated id, and its
 * redrive must queue exactly what the endpoint queued (the same deduplication ids, so a re-run
 * after a crash queues nothing twice): none there.
 */
export function toMessages(queued: ReadonlyArray<QueuedEvent>, nonce = ''): OutgoingMessage[] {
  const messages = queued.map((event, index) => queueMessageFor(event, index, nonce));
  const tooLarge = messages.findIndex(
    (message) => Buffer.byteLength(message.body) > MAX_MESSAGE_BYTES,
  );
  if (tooLarge !== -1) {
    throw new IngestRefusal(
      413,
      'payload_too_large',
      `Event ${tooLarge} is larger than one queue message can hold.`,
    );
  }
  return messages;
}

/**
 * The queue message for an event (contract §2, order per record). Its message group is its
 * record (`recordKey`), hashed to fit SQS's 128 characters, so a FIFO queue hands a record's
 * events out in arrival order and none while one is in flight; a create that always makes a new
 * record has a group of its own, and `namesRecord` false: the bound per record (contract §2)
 * counts only the others. The deduplication id is unique per event of one request handled
 * (`index`, and `nonce`, new per request), so a send retried within the request queues it once,
 * and a request sent again is queued again, even within the same millisecond.
 */
export function queueMessageFor(event: QueuedEvent, index: number, nonce = ''): OutgoingMessage {
  const key = recordKey(event);
  const record = key ?? `event ${event.sender} ${event.eventId}`;
  return {
    eventId: event.eventId,
    namesRecord: key !== undefined,
    body: toSqsText(JSON.stringify(event)),
    groupId: createHash('sha256').update(`${event.entity} ${record}`).digest('base64url'),
    deduplicationId: createHash('sha256')
      .update(`${event.sender}\n${event.eventId}\n${event.receivedAt}\n${index}\n${nonce}`)
      .digest('hex'),
    event: {
      sender: event.sender,
      entity: event.entity,
      action: event.action,
      receivedAt: event.receivedAt,
    },
  };
}

/**
 * JSON text as an SQS message body holds it. JSON.stringify leaves U+FFFE and U+FFFF as they
 * are, and SQS refuses messages holding them; inside JSON they can only stand in strings, so
 * escaping them keeps the same value.
 */
export function toSqsText(json: string): string {
  return json.replace(/[\uFFFE\uFFFF]/g, (char) => `\\u${char.charCodeAt(0).toString(16)}`);
}
