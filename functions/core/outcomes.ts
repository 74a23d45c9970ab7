import type { IncomingEvent } from './batch-plan.ts';
import type { MessageOutcome } from './delivery.ts';
import { describeIssues, type QueuedEvent, queuedEventSchema } from './events.ts';
import type { DeadLetter, QueuedMessage } from './ports.ts';

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

/**
 * How long failures that are not the event's own are retried (contract §2): between receives a
 * message is hidden for `baseSeconds × 2^(receives-1)`, capped at `maxDelaySeconds`, with jitter;
 * it is dead-lettered once `horizonSeconds` have passed since its first receive. The queue's
 * `maxReceiveCount` is a backstop only: on that receive the function dead-letters the message
 * itself, with a reason, before the queue would move it bare.
 */
export interface RetryPolicy {
  baseSeconds: number;
  maxDelaySeconds: number;
  horizonSeconds: number;
  maxReceiveCount: number;
}

/**
 * The delay before the next receive, in whole seconds (SQS visibility), after `receives` receives.
 *
 * Jitter spreads the returns of messages that failed together, but only over the upper half of
 * each step ("equal jitter", not AWS's "full jitter"): full jitter may draw a delay near zero
 * again and again, and every early return spends a receive, so no `maxReceiveCount` could be
 * derived that is sure to outlast the horizon. With a floor of half a step it can.
 */
export function retryDelaySeconds(policy: RetryPolicy, receives: number, random: number): number {
  const step = stepSeconds(policy, receives);
  return Math.max(1, Math.ceil(step / 2 + (random * step) / 2));
}

function stepSeconds(policy: RetryPolicy, receives: number): number {
  return Math.min(policy.maxDelaySeconds, policy.baseSeconds * 2 ** Math.max(0, receives - 1));
}

/**
 * The fewest receives that can fit in the horizon when every delay is as short as the jitter
 * allows, plus the receive after the horizon (the one that dead-letters) and one to spare: the
 * smallest `maxReceiveCount` that never cuts a retry short.
 */
export function receivesForHorizon(
  policy: Pick<RetryPolicy, 'baseSeconds' | 'maxDelaySeconds' | 'horizonSeconds'>,
): number {
  let receives = 1;
  let elapsed = 0;
  while (elapsed < policy.horizonSeconds) {
    elapsed += Math.max(1, Math.ceil(stepSeconds({ ...policy, maxReceiveCount: 0 }, receives) / 2));
    receives++;
    // Past SQS's limit of 1000 there is no point in counting further.
    if (receives > 1000) break;
  }
  return receives + 1;
}

/**
 * SQS refuses a visibility timeout that ends more than 12 hours after the message was received;
 * the invocation itself may have taken up to 15 minutes of that.
 */
const MAX_VISIBILITY_DELAY_SECONDS = 12 * 3600 - 15 * 60;

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
 * delivered or dead-lettered.
 *
 * A retried message is hidden for the policy's backoff, or until Mautic's rate-limit window
 * resets (`notBefore`, capped at `maxDelaySeconds`) when that is later. A message whose retry
 * horizon has passed is dead-lettered with `retry_horizon_exceeded` and its last failure instead.
 */
export function settleBatch<M extends QueuedMessage>(
  messages: ReadonlyArray<M>,
  read: ReadBatch<M>,
  outcomes: ReadonlyMap<string, MessageOutcome>,
  options: { now: number; maxDelaySeconds: number; policy: RetryPolicy; random: () => number },
): Settlement<M> {
  const { now, policy } = options;
  const deadLetters = [...read.unreadable];
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
      const reason = outcome?.reason ?? 'no_outcome';
      const firstReceived = receiveTimestamp(message) ?? now;
      if (now - firstReceived >= policy.horizonSeconds * 1000) {
        deadLetters.push({
          message,
          reason: 'retry_horizon_exceeded',
          detail: `retried for ${Math.round((now - firstReceived) / 1000)} s; last failure: ${outcome?.message ?? reason}`,
          ...(outcome?.status === undefined ? {} : { status: outcome.status }),
          ...about,
        });
        continue;
      }
      retry.push(message);
      retryReasons[reason] = (retryReasons[reason] ?? 0) + 1;
      let seconds = retryDelaySeconds(policy, receiveCount(message), options.random());
      if (outcome?.notBefore !== undefined) {
        const reset = Math.ceil((outcome.notBefore - now) / 1000);
        seconds = Math.max(seconds, Math.min(options.maxDelaySeconds, reset));
      }
      seconds = Math.min(seconds, MAX_VISIBILITY_DELAY_SECONDS);
      bySeconds.set(seconds, [...(bySeconds.get(seconds) ?? []), message]);
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
 * later one alone first, as their own jitter could make it (issue 11).
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

function receiveCount(message: QueuedMessage): number {
  const count = Number(message.attributes.ApproximateReceiveCount);
  return Number.isInteger(count) && count > 0 ? count : 1;
}

function receiveTimestamp(message: QueuedMessage): number | undefined {
  const at = Number(message.attributes.ApproximateFirstReceiveTimestamp);
  return Number.isFinite(at) && at > 0 ? at : undefined;
}
