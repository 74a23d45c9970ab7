import { describeIssues, type QueuedEvent, queuedEventSchema } from '../events.ts';
import type { DeadLetter, QueuedMessage } from '../queue-ports.ts';
import { decideRequeue, type RetryPolicy } from '../retry-policy.ts';
import type { IncomingEvent } from './batch-plan.ts';
import type { MessageOutcome } from './failure-policy.ts';

/** The messages of one batch, read: the events to deliver, and the letters for unreadable ones. */
export interface ReadBatch<M extends QueuedMessage> {
  incoming: IncomingEvent[];
  /** Each message's event, by message id (only the readable ones). */
  events: ReadonlyMap<string, QueuedEvent>;
  /** Messages that are not a queued event, or on their last allowed receive: dead-lettered. */
  unreadable: Array<DeadLetter & { message: M }>;
}

/**
 * Reads each message body into a queued event. A body that is not JSON, or not an event, can
 * never be delivered, so it becomes a dead letter with reason `invalid_event`; a message on its
 * last allowed receive becomes one with reason `too_many_receives`.
 */
export function readMessages<M extends QueuedMessage>(
  messages: ReadonlyArray<M>,
  maxReceiveCount = Number.POSITIVE_INFINITY,
): ReadBatch<M> {
  const incoming: IncomingEvent[] = [];
  const events = new Map<string, QueuedEvent>();
  const unreadable: Array<DeadLetter & { message: M }> = [];
  for (const message of messages) {
    const parsed = parseBody(message.body);
    if (receiveCount(message) >= maxReceiveCount) {
      // The queue's last allowed receive: past it SQS would move the message without a reason.
      // Reaching it means receives were spent without the function settling them (crashes).
      unreadable.push({
        message,
        reason: 'too_many_receives',
        detail: `received ${receiveCount(message)} times without being settled`,
        ...('event' in parsed
          ? {
              eventId: parsed.event.eventId,
              entity: parsed.event.entity,
              action: parsed.event.action,
            }
          : {}),
      });
    } else if ('event' in parsed) {
      incoming.push({
        messageId: message.messageId,
        event: parsed.event,
        receives: receiveCount(message),
      });
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
  const result = queuedEventSchema().safeParse(value);
  return result.success ? { event: result.data } : { problem: describeIssues(result.error) };
}

/** What to do with each message of a batch once delivery has run. */
export interface Settlement<M extends QueuedMessage> {
  delivered: number;
  /** To the dead-letter queue, then acknowledged. */
  deadLetters: Array<DeadLetter & { message: M }>;
  /** Left to the queue (reported in `batchItemFailures`). */
  retry: M[];
  /** Of `retry`: how long to hide each message before its next receive, grouped by seconds. */
  delays: Array<{ seconds: number; messages: M[] }>;
  /** How many of `retry` for each reason, for the log. */
  retryReasons: Record<string, number>;
}

/**
 * Maps per-message delivery outcomes to dead letters, delays and retries (contract §2). A message
 * with no outcome (delivery stopped before it) is retried; nothing is acknowledged that was not
 * delivered or dead-lettered. Only the read events are its concern: the unreadable messages are
 * `readMessages`' letters, sent before delivery.
 *
 * When a retried message comes back, or whether its retry horizon has passed and it is
 * dead-lettered instead, is the retry policy's `decideRequeue`.
 */
export function settleBatch<M extends QueuedMessage>(
  messages: ReadonlyArray<M>,
  read: Pick<ReadBatch<M>, 'events'>,
  outcomes: ReadonlyMap<string, MessageOutcome>,
  options: { now: number; maxDelaySeconds: number; policy: RetryPolicy; random: () => number },
): Settlement<M> {
  const { now, policy } = options;
  const deadLetters: Array<DeadLetter & { message: M }> = [];
  const retry: M[] = [];
  const retryReasons: Record<string, number> = {};
  const bySeconds = new Map<number, M[]>();
  let delivered = 0;
  for (const message of messages) {
    const event = read.events.get(message.messageId);
    if (!event) continue;
    const outcome = outcomes.get(message.messageId);
    const about = { eventId: event.eventId, entity: event.entity, action: event.action };
    if (outcome?.kind === 'delivered') {
      delivered++;
    } else if (outcome?.kind === 'rejected') {
      deadLetters.push({
        message,
        reason: outcome.reason,
        detail: outcome.message,
        ...(outcome.status === undefined ? {} : { status: outcome.status }),
        ...about,
      });
    } else {
      const requeue = decideRequeue(
        outcome,
        { receives: receiveCount(message), firstReceivedAt: receiveTimestamp(message) ?? now },
        { now, policy, maxDelaySeconds: options.maxDelaySeconds, random: options.random },
      );
      if (requeue.kind === 'dead_letter') {
        const { kind: _, ...letter } = requeue;
        deadLetters.push({ message, ...letter, ...about });
        continue;
      }
      retry.push(message);
      retryReasons[requeue.reason] = (retryReasons[requeue.reason] ?? 0) + 1;
      bySeconds.set(requeue.seconds, [...(bySeconds.get(requeue.seconds) ?? []), message]);
    }
  }
  holdBackWithTheirEarlierEvents(bySeconds, outcomes);
  const delays = [...bySeconds].map(([seconds, delayed]) => ({ seconds, messages: delayed }));
  return { delivered, deadLetters, retry, delays, retryReasons };
}

/**
 * Gives a message held back behind an earlier event of its record (`earlier_event_pending`)
 * the longest delay of the batch, which is at least that of the event it waits for, so the two
 * come back together (the planner then keeps their order) or the earlier one first; never the
 * later one alone first, as their own jitter could make it.
 */
function holdBackWithTheirEarlierEvents<M extends QueuedMessage>(
  bySeconds: Map<number, M[]>,
  outcomes: ReadonlyMap<string, MessageOutcome>,
): void {
  const longest = Math.max(0, ...bySeconds.keys());
  const pending = (message: M) => {
    const outcome = outcomes.get(message.messageId);
    return outcome?.kind === 'retry' && outcome.reason === 'earlier_event_pending';
  };
  for (const [seconds, messages] of bySeconds) {
    if (seconds === longest || !messages.some(pending)) continue;
    bySeconds.set(
      seconds,
      messages.filter((message) => !pending(message)),
    );
    bySeconds.set(longest, [...(bySeconds.get(longest) ?? []), ...messages.filter(pending)]);
    if (bySeconds.get(seconds)?.length === 0) bySeconds.delete(seconds);
  }
}

/** How many times the queue has handed the message out, this receive included. */
export function receiveCount(message: QueuedMessage): number {
  const count = Number(message.attributes.ApproximateReceiveCount);
  return Number.isInteger(count) && count > 0 ? count : 1;
}

function receiveTimestamp(message: QueuedMessage): number | undefined {
  const at = Number(message.attributes.ApproximateFirstReceiveTimestamp);
  return Number.isFinite(at) && at > 0 ? at : undefined;
}
