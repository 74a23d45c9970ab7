/**
 * The queues' interfaces, beside `ports.ts`: what the ingest queues, what the batch function
 * receives, dead-letters and delays, and where a source's unmappable payload goes. Implemented
 * by the SQS adapters, the local stand-ins and test fakes; it imports only data types.
 */
import type { QueuedEvent } from './events.ts';

/** One queue message: a queued event, serialised, with its FIFO group and deduplication id. */
export interface OutgoingMessage {
  eventId: string;
  body: string;
  /** The record's message group: the queue hands a group's messages out in order, one at a time. */
  groupId: string;
  /** Unique per message of one request: a send SQS is asked to repeat queues it once. */
  deduplicationId: string;
  namesRecord?: boolean | undefined;
  /** What its `queued` outcome says (contract §1.6), read without parsing `body` again. */
  event?: Pick<QueuedEvent, 'sender' | 'entity' | 'action' | 'receivedAt'>;
}

/** Where accepted events go; it resolves only when every message is durably queued. */
export interface EventQueue {
  /**
   * Throws a `QueueUnavailableError` when a message could not be queued, once no send is in
   * flight; `queued` has by then been told of each message the queue took, so that a retry of
   * the request can send only the rest.
   */
  enqueue(
    messages: ReadonlyArray<OutgoingMessage>,
    queued?: (message: OutgoingMessage) => void,
  ): Promise<void>;
}

/** The parts of a received SQS message that delivery hands on (Lambda's SQSRecord fits). */
export interface QueuedMessage {
  messageId: string;
  receiptHandle: string;
  body: string;
  attributes: {
    ApproximateFirstReceiveTimestamp?: string | undefined;
    ApproximateReceiveCount?: string | undefined;
    /** The record's message group (FIFO queue). */
    MessageGroupId?: string | undefined;
  };
  messageAttributes: Record<
    string,
    { dataType: string; stringValue?: string | undefined; binaryValue?: string | undefined }
  >;
}

/** A message refused for good, and why. */
export interface DeadLetter {
  message: QueuedMessage;
  reason: string;
  detail: string;
  status?: number;
  /** The event's id, entity and action, when the message was a readable event. */
  eventId?: string;
  entity?: string;
  action?: string;
}

/**
 * The batch function's queues. `until` (epoch ms) bounds a settling call: none starts or lasts
 * past it, and what it did not do counts as failed.
 */
export interface DeliveryQueues {
  /** Sends each letter to the dead-letter queue; resolves the message ids that could not be sent. */
  deadLetter(letters: ReadonlyArray<DeadLetter>, until?: number): Promise<string[]>;
  /** Hides each message for its `seconds` more; resolves the message ids whose delay failed. */
  delay(
    delays: ReadonlyArray<{ message: QueuedMessage; seconds: number }>,
    until?: number,
  ): Promise<string[]>;
  /**
   * Receives up to `max` more messages of the events queue, 10 per call, each a long poll (short
   * only with `pollSeconds` 0, where none fits), until `max` are held, a whole poll brought none
   * or `until` (epoch ms) passed: no call starts after it. Resolves what it received.
   */
  receive(
    max: number,
    until: number,
    /** How long to hide what it receives (SQS visibility); the queue's own when absent. */
    holdSeconds?: number,
    pollSeconds?: 0 | 1,
  ): Promise<QueuedMessage[]>;
  /** Deletes messages this function received itself; resolves the message ids not deleted. */
  remove(messages: ReadonlyArray<QueuedMessage>, until?: number): Promise<string[]>;
}

/**
 * A source's payload the ingest could not map (contract §6), kept whole on the dead-letter queue
 * so that a redrive can map it again with the source's current mapping.
 */
export interface SourceDeadLetter {
  /** The letter's id, answered as `deadLettered` and shown as its `eventId`. */
  id: string;
  source: string;
  /** The message body: its versioned envelope (functions/core/sources/source-endpoint.ts). */
  body: string;
  reason: 'mapping_failed';
  /** What failed, and where: the error and the JSON pointer of the first bad field. */
  detail: string;
  /** When the ingest received the payload (ISO 8601). */
  receivedAt: string;
}

/** Where the ingest keeps what it could not map. */
export interface SourceDeadLetterQueue {
  /** Resolves once the letter is durably queued; throws a `QueueUnavailableError` otherwise. */
  deadLetter(letter: SourceDeadLetter): Promise<void>;
}
