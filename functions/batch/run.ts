import type { DeliveryOptions } from '../core/delivery/delivery-calls.ts';
import type { Clock } from '../core/ports.ts';

/** The batch function's settings: the delivery's, and its own around it. */
export type BatchOptions = DeliveryOptions & {
  /** Longest visibility delay after a 429 (SQS allows 12 hours). */
  maxDelaySeconds: number;
  /** How long the function gathers more messages itself, after a full hand, before delivering. */
  batchWindowMs: number;
  /**
   * The most messages the event source hands at once (the mapping's batch size: 10 from a FIFO
   * queue, fewer with a smaller `batchSize`). A smaller hand says the queue had no more, and is
   * delivered at once. Unset, any hand may be part of a backlog, and is gathered to.
   */
  handOver?: number;
  /**
   * How much longer than the invocation's time left its own messages stay hidden, so that a
   * crash gives them back soon. @default 30 s
   */
  holdMarginSeconds?: number;
};

/** One invocation's time: its deadline, how close to it calls may go, until when it goes on. */
export interface Run {
  deadline: number;
  /** The settings, with the deadline margin bounded by the time left. */
  options: BatchOptions;
  /** Aborts the calls still in flight at half the margin. */
  signal: AbortSignal;
  /** No further batch is gathered after this: the first half of the invocation. */
  goOnUntil: number;
}

export function startRun(
  remainingMs: number,
  { clock, options }: { clock: Clock; options: BatchOptions },
): Run {
  const deadline = clock.now() + remainingMs;
  // A short timeout cannot give up the whole margin: keep at most a quarter of it in reserve.
  const bounded = {
    ...options,
    deadlineMarginMs: Math.min(options.deadlineMarginMs, Math.floor(remainingMs / 4)),
  };
  // Calls in flight are aborted at half the margin, leaving time to dead-letter and answer.
  const signal = AbortSignal.timeout(
    Math.max(1, Math.floor(remainingMs - bounded.deadlineMarginMs / 2)),
  );
  return { deadline, options: bounded, signal, goOnUntil: clock.now() + remainingMs / 2 };
}

/**
 * Settling ends this long before the deadline at the latest, so that the handler answers in
 * time: an answer after it fails the whole batch, delivered messages included. The delivery
 * stops calling Mautic `deadlineMarginMs` before the deadline, leaving settling the rest.
 */
const ANSWER_RESERVE_MS = 300;

export const settleUntil = ({ deadline }: Run) => deadline - ANSWER_RESERVE_MS;
