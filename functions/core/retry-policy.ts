import { ConfigError } from './errors.ts';

/**
 * Every delay of the relay in one place: the backoff inside one invocation, the visibility delay
 * between receives, the retry horizon and the `maxReceiveCount` derived from it, the pauses of
 * the token wait and of a refused SendMessageBatch. What a failure leads to is decided in
 * `failure-policy.ts`; this module only says how long.
 */

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

/** Retries of one Mautic call inside an invocation, for transient failures. */
export interface InCallRetry {
  maxAttempts: number;
  baseBackoffMs: number;
  maxBackoffMs: number;
  defaultRateLimitDelayMs: number;
  /**
   * Longest wait inside the invocation for a time Mautic named (a rate limit's reset, a
   * `Retry-After`); a later one sends the events back to the queue until then.
   */
  maxInRunWaitMs: number;
  /**
   * The furthest a time Mautic names may hold the container's calls (`MAX_DELAY_SECONDS`, the
   * longest delay after a 429): a reset sent in milliseconds, or a year ahead, is cut to it.
   */
  maxNamedPauseMs: number;
}

export const IN_CALL_RETRY: Readonly<InCallRetry> = Object.freeze({
  /** Attempts per call. */
  maxAttempts: 3,
  /** First backoff step; it doubles per attempt, capped at `maxBackoffMs`, with jitter. */
  baseBackoffMs: 200,
  maxBackoffMs: 5_000,
  /** Delay after a 429 whose answer carried no `X-RateLimit-Reset`. */
  defaultRateLimitDelayMs: 60_000,
  maxInRunWaitMs: 15_000,
  /** MAX_DELAY_SECONDS' default (functions/shared/config.ts), which the batch function passes. */
  maxNamedPauseMs: 3_600_000,
});

/**
 * Waiting for a token from the refresher: pauses between polls of the token secret (doubling
 * from `startMs` to `maxMs`), and how long a caller that names no deadline waits.
 */
export const TOKEN_POLL = Object.freeze({ startMs: 250, maxMs: 2_000, defaultWaitMs: 10_000 });

/** The pause before the next poll of the token secret: the last one doubled, at most `maxMs`. */
export function nextPollPauseMs(pause: number, maxMs: number = TOKEN_POLL.maxMs): number {
  return Math.min(pause * 2, maxMs);
}

/** Pauses before each new try of SendMessageBatch entries SQS refused; then the request fails. */
export const ENQUEUE_RETRY_DELAYS_MS: ReadonlyArray<number> = Object.freeze([50, 200, 800]);

/**
 * SQS refuses a visibility timeout that ends more than 12 hours after the message was received;
 * the invocation itself may have taken up to 15 minutes of that.
 */
export const MAX_VISIBILITY_DELAY_SECONDS = 12 * 3600 - 15 * 60;

/** SQS's largest maxReceiveCount. */
const MAX_RECEIVE_COUNT_LIMIT = 1000;

/**
 * The longest retry horizon: SQS keeps a message at most 14 days from when it was sent, and a
 * day is left for events that wait in a backlog before their first receive.
 */
export const MAX_RETRY_HORIZON_SECONDS = 13 * 86_400;

/**
 * How long the events queue keeps a message: a day beyond the retry horizon, so a backlog
 * cannot outlive it, within SQS's 4-day default and 14-day limit.
 */
export function queueRetentionSeconds(horizonSeconds: number): number {
  return Math.min(14 * 86_400, Math.max(4 * 86_400, horizonSeconds + 86_400));
}

/**
 * The relay's one jitter scheme ("equal jitter"): the delay is drawn from the upper half of the
 * step, never below half of it. AWS's "full jitter" may draw a delay near zero again and again;
 * between receives every early return spends a receive, so no `maxReceiveCount` could be derived
 * that is sure to outlast the horizon. With a floor of half a step it can. `random` is in [0, 1).
 */
export function jittered(step: number, random: number): number {
  return step / 2 + (random * step) / 2;
}

/** The exponential step after `attempts` tries: `base × 2^(attempts-1)`, at most `max`. */
function exponentialStep(base: number, max: number, attempts: number): number {
  return Math.min(max, base * 2 ** Math.max(0, attempts - 1));
}

/** The pause before the next try of a Mautic call inside the invocation, in ms. */
export function inCallBackoffMs(
  options: { baseBackoffMs: number; maxBackoffMs: number },
  attempt: number,
  random: number,
): number {
  return Math.floor(
    jittered(exponentialStep(options.baseBackoffMs, options.maxBackoffMs, attempt), random),
  );
}

/** The delay before the next receive, in whole seconds (SQS visibility), after `receives` receives. */
export function retryDelaySeconds(policy: RetryPolicy, receives: number, random: number): number {
  const step = exponentialStep(policy.baseSeconds, policy.maxDelaySeconds, receives);
  return Math.max(1, Math.ceil(jittered(step, random)));
}

/**
 * The fewest receives that can fit in the horizon when every delay is as short as the jitter
 * allows, plus the receive after the horizon (the one that dead-letters) and one to spare: the
 * smallest `maxReceiveCount` that never cuts a retry short.
 */
export function receivesForHorizon(
  policy: Pick<RetryPolicy, 'baseSeconds' | 'maxDelaySeconds' | 'horizonSeconds'>,
): number {
  return receivesWithin(policy, 1, policy.horizonSeconds) + 2;
}

/** The most receives after receive `from` that `seconds` can hold with the shortest delays. */
function receivesWithin(
  policy: Pick<RetryPolicy, 'baseSeconds' | 'maxDelaySeconds'>,
  from: number,
  seconds: number,
): number {
  let count = 0;
  for (let elapsed = 0; elapsed < seconds; count++) {
    const step = exponentialStep(policy.baseSeconds, policy.maxDelaySeconds, from + count);
    elapsed += Math.max(1, Math.ceil(jittered(step, 0)));
    // Past SQS's limit of 1000 there is no point in counting further.
    if (count > MAX_RECEIVE_COUNT_LIMIT) break;
  }
  return count;
}

/**
 * Receives kept beyond what the backoff needs, by default: a time Mautic names (a rate limit's
 * reset, a `Retry-After`) may bring a message back sooner than the backoff would.
 */
export const NAMED_TIME_RECEIVES = 100;

/**
 * The retry policy from its three settings and an optional `maxReceiveCount`, which by default
 * is the smallest that cannot cut a retry short (`receivesForHorizon`). Throws a `ConfigError`
 * when the settings need more receives than SQS allows, or a given count is too small.
 */
export function retryPolicy(settings: {
  baseSeconds: number;
  maxDelaySeconds: number;
  horizonSeconds: number;
  maxReceiveCount?: number | undefined;
}): RetryPolicy {
  const needed = receivesForHorizon(settings);
  if (needed > MAX_RECEIVE_COUNT_LIMIT) {
    throw new ConfigError(
      `Invalid configuration: the retry horizon of ${settings.horizonSeconds} s needs ${needed} receives with delays of at most ${settings.maxDelaySeconds} s, more than SQS's ${MAX_RECEIVE_COUNT_LIMIT}: raise RETRY_MAX_DELAY_SECONDS or lower RETRY_HORIZON_SECONDS`,
    );
  }
  if (settings.maxReceiveCount !== undefined && settings.maxReceiveCount < needed) {
    throw new ConfigError(
      `Invalid configuration: MAX_RECEIVE_COUNT must be at least ${needed} for these retry settings, or unset to derive it`,
    );
  }
  return {
    baseSeconds: settings.baseSeconds,
    maxDelaySeconds: settings.maxDelaySeconds,
    horizonSeconds: settings.horizonSeconds,
    maxReceiveCount:
      settings.maxReceiveCount ?? Math.min(MAX_RECEIVE_COUNT_LIMIT, needed + NAMED_TIME_RECEIVES),
  };
}

/** What becomes of a message the delivery left to the queue, at the end of the invocation. */
export type Requeue =
  | { kind: 'dead_letter'; reason: 'retry_horizon_exceeded'; detail: string; status?: number }
  | { kind: 'delay'; seconds: number; reason: string };

/**
 * Decides when a message left to the queue comes back (contract §2): after the policy's backoff
 * for its receive count, or when Mautic's rate-limit window resets (`notBefore`, capped at
 * `maxDelaySeconds`) if that is later — never past SQS's visibility limit. Once the retry horizon
 * has passed since its first receive it is dead-lettered instead, with its last failure.
 */
export function decideRequeue(
  /** The message's retry outcome (`failure-policy.ts`'s `MessageOutcome` of kind `retry`). */
  outcome: { reason: string; notBefore?: number; status?: number; message?: string } | undefined,
  message: { receives: number; firstReceivedAt: number },
  options: { now: number; policy: RetryPolicy; maxDelaySeconds: number; random: () => number },
): Requeue {
  const { now, policy } = options;
  const reason = outcome?.reason ?? 'no_outcome';
  const elapsed = now - message.firstReceivedAt;
  if (elapsed >= policy.horizonSeconds * 1000) {
    return {
      kind: 'dead_letter',
      reason: 'retry_horizon_exceeded',
      detail: `retried for ${Math.round(elapsed / 1000)} s; last failure: ${outcome?.message ?? reason}`,
      ...(outcome?.status === undefined ? {} : { status: outcome.status }),
    };
  }
  const backoff = retryDelaySeconds(policy, message.receives, options.random());
  let seconds = backoff;
  // A named time already past (a window that reset, a server's clock behind ours) names no
  // delay: the backoff's, never none, which would bring the event straight back to Mautic.
  if (outcome?.notBefore !== undefined && outcome.notBefore > now) {
    // Mautic said when to come back (a rate limit's reset, a Retry-After): then, neither earlier
    // nor later on the exponential schedule (contract §2) — while the receives left still carry
    // the rest of the horizon on the backoff; past that, the backoff's delay if it is longer, so
    // that a long run of short named times never ends a retry early (`too_many_receives`).
    const named = Math.max(
      0,
      Math.min(options.maxDelaySeconds, Math.ceil((outcome.notBefore - now) / 1000)),
    );
    const back = message.receives + 1;
    const left = Math.max(0, policy.horizonSeconds - elapsed / 1000 - named);
    const affordable = back + receivesWithin(policy, back, left) + 1 <= policy.maxReceiveCount;
    seconds = affordable ? named : Math.max(named, backoff);
  }
  return { kind: 'delay', seconds: Math.min(seconds, MAX_VISIBILITY_DELAY_SECONDS), reason };
}
