/**
 * Deadlines foreseen, not hit (contract §2): how long a Mautic call may take and how many items
 * it may carry, from Mautic's observed time per item (`mautic-item-time.ts`) and the time the
 * invocation has left. A call is started only when it is expected to end in time, with room to
 * spare; a batch that could not is made smaller before it is sent, and the rest goes back to
 * the queue unsent (it never left, so nothing about it is in doubt). Its timeout is a guard
 * against a Mautic that stopped answering, far beyond the time it has been taking.
 */

import type { MessageOutcome } from './failure-policy.ts';

/**
 * A call's timeout while nothing has been observed yet: generous for a real Mautic at 200
 * items (Mautic 5.1.1 on 2 cores takes 4–7 s for a 200-contact create). A shipped batch function
 * (60 s) has more than this left for its first call.
 */
export const DEFAULT_CALL_TIMEOUT_MS = 30_000;

/** Once observed, a call may take this many times its expected time before it is given up… */
const TIMEOUT_FACTOR = 4;

/** …and never less than this: a call's own part (Mautic's kernel, the token) is not per item. */
const MIN_CALL_TIMEOUT_MS = 10_000;

/**
 * A call starts only if it would end in time at this many times its expected duration: a real
 * Mautic's time for equal calls varies by about half (4–7 s for 200 contacts).
 */
const FIT_FACTOR = 1.5;

/**
 * The timeout of one Mautic call of `items` items: four times its expected time (at least 10 s),
 * 30 s before anything was observed, at most `capMs` (the `MAUTIC_TIMEOUT_MS` setting). The
 * invocation's own deadline still stops every call (the delivery's signal).
 */
export function callTimeoutMs(
  items: number,
  msPerItem: number | undefined,
  capMs: number | undefined,
): number {
  const derived =
    msPerItem === undefined
      ? DEFAULT_CALL_TIMEOUT_MS
      : Math.max(MIN_CALL_TIMEOUT_MS, Math.ceil(TIMEOUT_FACTOR * msPerItem * items));
  return Math.min(derived, capMs ?? Number.POSITIVE_INFINITY);
}

/**
 * How many of `items` a call may carry that must end within `leftMs`: all of them while nothing
 * was observed (the first batch of a container has the invocation's time ahead of it), else as
 * many as end in time at `FIT_FACTOR` times the observed pace; 0 when not one does.
 */
export function itemsThatFit(leftMs: number, msPerItem: number | undefined, items: number): number {
  if (msPerItem === undefined || msPerItem <= 0) return items;
  return Math.max(0, Math.min(items, Math.floor(leftMs / (FIT_FACTOR * msPerItem))));
}

/**
 * Whether a next batch of `batchSize` would still be delivered within `leftMs`: it starts when
 * the current one of `current` items is delivered or its gathering (`gatherMs`) is over, and both
 * take `FIT_FACTOR` times the observed pace. Never while nothing was observed (the time a batch
 * takes is then unknown).
 */
export function nextBatchFits(
  leftMs: number,
  msPerItem: number | undefined,
  batch: { current: number; batchSize: number; gatherMs: number },
): boolean {
  if (msPerItem === undefined) return false;
  const nextStartsIn = Math.max(FIT_FACTOR * msPerItem * batch.current, batch.gatherMs);
  return nextStartsIn + FIT_FACTOR * msPerItem * batch.batchSize <= leftMs;
}

/**
 * The outcome of items a call could not carry in the time left: back to the queue at once
 * (visible again for the next invocation), never sent, so neither doubted nor delayed.
 */
export function notSent(now: number): MessageOutcome {
  return { kind: 'retry', reason: 'no_time_left', notBefore: now };
}
