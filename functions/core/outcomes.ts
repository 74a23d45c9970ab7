import type { IncomingEvent } from './batch-plan.ts';
import type { MessageOutcome } from './delivery.ts';
import { describeIssues, type QueuedEvent, queuedEventSchema } from './events.ts';
import type { DeadLetter, QueuedMessage } from './ports.ts';

/** The messages of one batch, read: the events to deliver, and the letters for unreadable ones. */
export interface ReadBatch<M extends QueuedMessage> {
  incoming: IncomingEvent[];
  /** Each message's event, by message id (only the readable ones). */
  events: ReadonlyMap<string, QueuedEvent>;
  /** Messages that are not a queued event: refused for good at once. */
  unreadable: Array<DeadLetter & { message: M }>;
}

/**
 * Reads each message body into a queued event. A body that is not JSON, or not an event, can
 * never be delivered, so it becomes a dead letter with reason `invalid_event`.
 */
export function readMessages<M extends QueuedMessage>(messages: ReadonlyArray<M>): ReadBatch<M> {
  const incoming: IncomingEvent[] = [];
  const events = new Map<string, QueuedEvent>();
  const unreadable: Array<DeadLetter & { message: M }> = [];
  for (const message of messages) {
    const parsed = parseBody(message.body);
    if ('event' in parsed) {
      incoming.push({ messageId: message.messageId, event: parsed.event });
      events.set(message.messageId, parsed.event);
    } else {
      unreadable.push({ message, reason: 'invalid_event', detail: parsed.problem });
    }
  }
  return { incoming, events, unreadable };
}

function parseBody(body: string): { event: QueuedEvent } | { problem: string } {
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch {
    return { problem: 'The message body is not JSON' };
  }
  const result = queuedEventSchema.safeParse(value);
  return result.success ? { event: result.data } : { problem: describeIssues(result.error) };
}

/** What to do with each message of a batch once delivery has run. */
export interface Settlement<M extends QueuedMessage> {
  delivered: number;
  /** To the dead-letter queue, then acknowledged. */
  deadLetters: Array<DeadLetter & { message: M }>;
  /** Left to the queue (reported in `batchItemFailures`). */
  retry: M[];
  /** Of `retry`: messages to hide for longer than the queue's own timeout, grouped by seconds. */
  delays: Array<{ seconds: number; messages: M[] }>;
  /** How many of `retry` for each reason, for the log. */
  retryReasons: Record<string, number>;
}

/**
 * Maps per-message delivery outcomes to dead letters, delays and retries (contract §2). A message
 * with no outcome (delivery stopped before it) is retried; nothing is acknowledged that was not
 * delivered or dead-lettered.
 *
 * A rate-limited message is hidden until Mautic's window resets (`notBefore`), capped at
 * `maxDelaySeconds`; a reset under a second away needs no delay, since a visibility of 0 would
 * bring it straight back.
 */
export function settleBatch<M extends QueuedMessage>(
  messages: ReadonlyArray<M>,
  read: ReadBatch<M>,
  outcomes: ReadonlyMap<string, MessageOutcome>,
  options: { now: number; maxDelaySeconds: number },
): Settlement<M> {
  const deadLetters = [...read.unreadable];
  const retry: M[] = [];
  const retryReasons: Record<string, number> = {};
  const bySeconds = new Map<number, M[]>();
  let delivered = 0;
  for (const message of messages) {
    const event = read.events.get(message.messageId);
    if (!event) continue;
    const outcome = outcomes.get(message.messageId);
    if (outcome?.kind === 'delivered') {
      delivered++;
    } else if (outcome?.kind === 'rejected') {
      deadLetters.push({
        message,
        reason: outcome.reason,
        detail: outcome.message,
        ...(outcome.status === undefined ? {} : { status: outcome.status }),
        eventId: event.eventId,
        entity: event.entity,
        action: event.action,
      });
    } else {
      retry.push(message);
      const reason = outcome?.reason ?? 'no_outcome';
      retryReasons[reason] = (retryReasons[reason] ?? 0) + 1;
      if (outcome?.notBefore === undefined) continue;
      const wait = Math.ceil((outcome.notBefore - options.now) / 1000);
      if (wait < 1) continue;
      const seconds = Math.min(options.maxDelaySeconds, wait);
      bySeconds.set(seconds, [...(bySeconds.get(seconds) ?? []), message]);
    }
  }
  const delays = [...bySeconds].map(([seconds, delayed]) => ({ seconds, messages: delayed }));
  return { delivered, deadLetters, retry, delays, retryReasons };
}
