/**
 * What a failure leads to (contract §2), decided in one place from the failure's kind, the
 * entity, the action, the attempt and the time: call again, renew the token, split the call,
 * settle (delivered, dead-lettered with a reason, or back to the queue until a given time), or
 * stop calling for the rest of the run. Pure: the delivery run and the batch settlement carry
 * the decisions out; the delays themselves come from `retry-policy.ts`.
 */
import {
  describeError,
  MauticAuthError,
  MauticBatchLimitError,
  MauticError,
  MauticPermanentError,
  MauticRateLimitError,
  MauticResponseError,
  MauticTransientError,
} from '../errors.ts';
import type { Action } from '../events.ts';
import { IN_CALL_RETRY, type InCallRetry, inCallBackoffMs } from '../retry-policy.ts';

/** What became of one message. */
export type MessageOutcome =
  | {
      kind: 'delivered';
      status: number;
      id: number;
      /** The Mautic call that carried it (its `mautic_call` line's `callId`) and when it answered. */
      call?: { id: string; at: number };
      /** Merged into a later event's item: that event's message id (contract §1.6, coalesced). */
      into?: string;
      /** Nothing was sent, and why (an `addPoints` already applied for this event). */
      skipped?: string;
    }
  /** Refused for good: the message goes to the dead-letter queue with this reason. */
  | { kind: 'rejected'; reason: string; status?: number; message: string }
  /**
   * Try again later through the queue, not before `notBefore` (epoch ms) when set. `status` and
   * `message` tell the last failure, for the dead letter if the retry horizon runs out. `grid`
   * (ms): held by the circuit, it comes back on a point of the probe grid (`retry-policy.ts`).
   */
  | {
      kind: 'retry';
      reason: string;
      notBefore?: number;
      grid?: number;
      status?: number;
      message?: string;
    };

/** Why a run makes no call for now: a time Mautic named (no call before it), a refused token. */
export interface RunHalt {
  rateLimitedUntil?: number | undefined;
  unauthorized?: string | undefined;
}

/** Where a failed call stands when the policy decides. */
export interface CallSituation {
  entity: string;
  action: Action;
  /** Items in the failed call. */
  items: number;
  /** The call's attempt, from 1. */
  attempt: number;
  /** How far the token was renewed for this call: the cached one, re-read, or refused once. */
  token: 'cached' | 'reread' | 'refused';
  now: number;
  /** No call starts after this (the deadline less its margin). */
  callsUntil: number;
  /** What already halted the run, if anything (another chunk's 429). */
  halt: RunHalt;
  /** Draws in [0, 1) for the jitter. */
  random: () => number;
  /** The in-call retry settings, when not `IN_CALL_RETRY`'s. */
  retry?: InCallRetry | undefined;
  /** The call is a part of one that failed with a 5xx: one try, then narrow again or stop. */
  narrowing?: boolean;
}

/** What to do after a failed call. */
export type Decision =
  /** Call again at once with a token read past the cache, or a newer one from the refresher. */
  | { kind: 'renew_token'; token: 'reread' | 'refused' }
  /** Call again after a pause. */
  | { kind: 'call_again'; afterMs: number }
  /** Call again at the time Mautic named, inside this invocation; no call of the run before it. */
  | { kind: 'wait'; untilMs: number; halt: RunHalt }
  /**
   * A whole-call 5xx repeated: find the item at fault by halves (contract §2, one bad item).
   * `outcome`: what the items get if they are left to the queue after all.
   */
  | { kind: 'narrow'; outcome: MessageOutcome }
  /** Send the items again in calls of at most `size`; `learnedLimit` is Mautic's stated limit. */
  | { kind: 'split'; size: number; learnedLimit?: number }
  /**
   * Settle every item of the call with `outcome`. `halt`: no more calls in this run. `alert`: a
   * failure a person must look at, for an error log line.
   */
  | {
      kind: 'settle';
      outcome: MessageOutcome;
      halt?: RunHalt;
      alert?: { message: string; details: Record<string, unknown> };
    };

/** The items' outcome when the access token cannot be had before the deadline. */
export const NO_TOKEN: MessageOutcome = Object.freeze({ kind: 'retry', reason: 'no_token' });

/**
 * Decides what follows a failed Mautic call.
 *
 * - 401: re-read the token past the cache, then wait for a newer one from the refresher; a third
 *   401 leaves the items, and every later one of the run, to the queue.
 * - 429: the items, and every later one of the run, wait until the rate-limit window resets.
 * - "A max of N entities": split to N (at most half of the call), and remember N.
 * - A whole-call 400/422/413 is about the content: halve the call until the item at fault is
 *   refused alone. A 409 is a record a user has open for editing (Mautic 7): to the queue. Mautic's own 404 for a path it has no route for: the entity does not exist.
 *   Any other refusal (403, another 404, a redirect, 405) is configuration: to the queue, loudly.
 * - Anything else is transient: back off and call again while attempts and time remain.
 */
export function decideAfterFailure(error: unknown, situation: CallSituation): Decision {
  if (error instanceof MauticAuthError) return afterUnauthorized(error, situation);
  if (error instanceof MauticBatchLimitError && error.limit < situation.items) {
    const limit = Math.max(1, Math.min(error.limit, Math.ceil(situation.items / 2)));
    return { kind: 'split', size: limit, learnedLimit: limit };
  }
  if (error instanceof MauticRateLimitError) return afterRateLimit(error, situation);
  if (error instanceof MauticPermanentError) return afterRefusal(error, situation);
  return afterTransient(error, situation);
}

function afterUnauthorized(error: MauticAuthError, situation: CallSituation): Decision {
  if (situation.token === 'cached') return { kind: 'renew_token', token: 'reread' };
  if (situation.token === 'reread') return { kind: 'renew_token', token: 'refused' };
  // Refused even after the refresher renewed it: further calls would only fail.
  const unauthorized = `unauthorized_${error.reason}`;
  return {
    kind: 'settle',
    outcome: { kind: 'retry', reason: unauthorized },
    halt: { unauthorized },
  };
}

function afterRateLimit(error: MauticRateLimitError, situation: CallSituation): Decision {
  const retry = situation.retry ?? IN_CALL_RETRY;
  const resetAt = error.resetAt ?? situation.now + retry.defaultRateLimitDelayMs;
  return comeBackAt(resetAt, { reason: 'rate_limited', status: 429, error }, situation);
}

/**
 * Mautic (or its front) named when to come back: no call of the run starts before then, nor
 * past `maxNamedPauseMs` from now (a reset in the wrong unit must not stop the container for
 * good). The call waits for it when it is near; else its items, and every later call's, go
 * back to the queue.
 */
function comeBackAt(
  at: number,
  why: { reason: string; status: number; error: unknown },
  situation: CallSituation,
): Decision {
  const cap = situation.now + (situation.retry ?? IN_CALL_RETRY).maxNamedPauseMs;
  const rateLimitedUntil = Math.min(Math.max(situation.halt.rateLimitedUntil ?? 0, at), cap);
  const halt = { rateLimitedUntil };
  if (waitable(rateLimitedUntil, situation.now, situation.callsUntil, situation.retry)) {
    return { kind: 'wait', untilMs: rateLimitedUntil, halt };
  }
  const { reason, status, error } = why;
  const message = describeError(error);
  return {
    kind: 'settle',
    outcome: { kind: 'retry', reason, notBefore: rateLimitedUntil, status, message },
    halt,
  };
}

/** Whether a call may wait until `at` inside the invocation: near, and before calls must stop. */
function waitable(at: number, now: number, callsUntil: number, retry?: InCallRetry): boolean {
  return at - now <= (retry ?? IN_CALL_RETRY).maxInRunWaitMs && at < callsUntil;
}

function afterRefusal(error: MauticPermanentError, situation: CallSituation): Decision {
  if (error.status === 409) {
    const message = describeError(error);
    return {
      kind: 'settle',
      outcome: { kind: 'retry', reason: 'mautic_locked', status: 409, message },
    };
  }
  if (error.status === 400 || error.status === 422 || error.status === 413) {
    if (situation.items > 1) return { kind: 'split', size: Math.ceil(situation.items / 2) };
    const outcome = { status: error.status, message: error.message };
    return {
      kind: 'settle',
      outcome: { kind: 'rejected', reason: 'mautic_refused_item', ...outcome },
    };
  }
  if (error.status === 404 && error.mauticMessage?.startsWith('Requested URL not found')) {
    return {
      kind: 'settle',
      outcome: {
        kind: 'rejected',
        reason: 'mautic_unknown_entity',
        status: 404,
        message: error.message,
      },
    };
  }
  return {
    kind: 'settle',
    outcome: { kind: 'retry', reason: `mautic_refused_${error.status}` },
    alert: {
      message: "Mautic refused the call; check the base URL and the API user's permissions",
      details: {
        entity: situation.entity,
        action: situation.action,
        status: error.status,
        error: describeError(error),
      },
    },
  };
}

function afterTransient(error: unknown, situation: CallSituation): Decision {
  const retry = situation.retry ?? IN_CALL_RETRY;
  const reason = transientReason(error);
  const status = error instanceof MauticError ? error.status : undefined;
  const message = describeError(error);
  const outcome: MessageOutcome = { kind: 'retry', reason, ...(status ? { status } : {}), message };
  if (error instanceof MauticTransientError && error.kind === 'server') {
    if (error.retryAt !== undefined) {
      return comeBackAt(error.retryAt, { reason, status: status ?? 503, error }, situation);
    }
    // The same call failed twice (or again while narrowing): an item may be what fails it.
    if (situation.narrowing || (situation.items > 1 && situation.attempt >= 2)) {
      return { kind: 'narrow', outcome };
    }
  }
  const backoff = inCallBackoffMs(retry, situation.attempt, situation.random());
  const aborted = error instanceof MauticTransientError && error.kind === 'aborted';
  const noTime = situation.now + backoff >= situation.callsUntil;
  if (!aborted && situation.attempt < retry.maxAttempts && !noTime) {
    return { kind: 'call_again', afterMs: backoff };
  }
  return { kind: 'settle', outcome };
}

function transientReason(error: unknown): string {
  if (error instanceof MauticTransientError) return `mautic_${error.kind}`;
  if (error instanceof MauticResponseError) return 'mautic_bad_response';
  if (error instanceof MauticBatchLimitError) return 'mautic_batch_limit';
  return 'unexpected_error';
}

/** The failures the policy knows; any other is logged as an error before it is decided. */
const KNOWN_FAILURES = [
  MauticAuthError,
  MauticRateLimitError,
  MauticPermanentError,
  MauticBatchLimitError,
  MauticTransientError,
  MauticResponseError,
];

export function isUnexpected(error: unknown): boolean {
  return !KNOWN_FAILURES.some((known) => error instanceof known);
}

/**
 * The outcome of an item that must follow items left to the queue (order per record): back to
 * the queue too, untried, not before what it waits for (e.g. a rate-limited event), and with the
 * failure it waits behind, for the dead letter should the horizon run out.
 */
export function heldBehind(
  blockers: ReadonlyArray<MessageOutcome & { kind: 'retry' }>,
): MessageOutcome {
  const notBefore = Math.max(0, ...blockers.map((blocker) => blocker.notBefore ?? 0));
  const first = blockers[0];
  const why = first ? `${first.reason}${first.message ? `: ${first.message}` : ''}` : 'unknown';
  const grid = blockers.find((blocker) => blocker.grid !== undefined)?.grid;
  return {
    kind: 'retry',
    reason: 'earlier_event_pending',
    ...(notBefore > 0 ? { notBefore } : {}),
    ...(grid === undefined ? {} : { grid }),
    message: `An earlier event of the same record went back to the queue (${why})`,
  };
}

/** A lookup Mautic refused: the events go back to the queue, with Mautic's status and message. */
export function lookupRefused(refusal?: {
  status?: number | undefined;
  message: string;
}): MessageOutcome {
  return {
    kind: 'retry',
    reason: 'lookup_refused',
    ...(refusal?.status === undefined ? {} : { status: refusal.status }),
    ...(refusal ? { message: refusal.message } : {}),
  };
}

/**
 * Why no call may start now, if none may: a time Mautic named is ahead (`wait` for it when it is
 * near, else back to the queue until then), a refused token halted the run, the time for calls
 * is up, or the invocation is being aborted.
 */
export function noCallNow(
  halt: RunHalt,
  now: number,
  callsUntil: number,
  aborted: boolean,
  retry?: InCallRetry,
): MessageOutcome | { kind: 'wait'; untilMs: number } | undefined {
  if (halt.rateLimitedUntil !== undefined && halt.rateLimitedUntil > now) {
    if (waitable(halt.rateLimitedUntil, now, callsUntil, retry)) {
      return { kind: 'wait', untilMs: halt.rateLimitedUntil };
    }
    return { kind: 'retry', reason: 'rate_limited', notBefore: halt.rateLimitedUntil };
  }
  if (halt.unauthorized !== undefined) return { kind: 'retry', reason: halt.unauthorized };
  if (now > callsUntil || aborted) return { kind: 'retry', reason: 'deadline' };
  return undefined;
}

/**
 * Narrows a call that failed with a 5xx twice down to the items at fault, level by level: each
 * failing part's halves are tried once (`tryOnce` resolves the failure when the part failed with
 * a 5xx again, else it has delivered or settled the part), until the items at fault are left to
 * the queue alone and the rest are delivered (contract §2, one bad item). A level of four parts
 * or more that all fail says Mautic fails every call, not an item: all go back to the queue
 * untried further (an outage costs six calls, not one per item). So does Mautic's circuit once
 * open (`outage` answers the outcome of the parts left): an outage is not a poison item.
 */
export async function narrowDown<T>(
  items: T[],
  outcome: MessageOutcome,
  how: {
    tryOnce: (part: T[]) => Promise<MessageOutcome | undefined>;
    settle: (items: T[], outcome: MessageOutcome) => void;
    outage?: () => MessageOutcome | undefined;
  },
): Promise<void> {
  let failing = [{ items, outcome }];
  while (failing.length > 0) {
    for (const single of failing.filter((part) => part.items.length === 1))
      how.settle(single.items, single.outcome);
    const parts = failing
      .filter((part) => part.items.length > 1)
      .flatMap(({ items: part }) => {
        const middle = Math.ceil(part.length / 2);
        return [part.slice(0, middle), part.slice(middle)];
      });
    const failed: Array<{ items: T[]; outcome: MessageOutcome }> = [];
    for (const part of parts) {
      const held = how.outage?.();
      if (held !== undefined) {
        how.settle(part, held);
        continue;
      }
      const failure = await how.tryOnce(part);
      if (failure !== undefined) failed.push({ items: part, outcome: failure });
    }
    if (parts.length >= 4 && failed.length === parts.length) {
      for (const part of failed) how.settle(part.items, part.outcome);
      return;
    }
    failing = failed;
  }
}
