/**
 * The outcomes the ingest writes (contract §1.6): `queued` for each event it queues, and for a
 * source's payload `ignored` (its filter refused it) or `dead_lettered` (it could not be mapped).
 */
import type { OutcomeRecord } from '../outcome-records.ts';
import { outcomeDetail, recordOutcomes, stateOf } from '../outcome-writes.ts';
import type { Clock, Logger, OutcomeStore } from '../ports.ts';
import type { OutgoingMessage } from '../queue-ports.ts';

/**
 * How long the ingest waits at most for its outcome writes beside the queue's: DynamoDB answers
 * in milliseconds, so only a store in trouble makes a 202 wait, and never longer than this.
 */
export const INGEST_OUTCOME_BUDGET_MS = 500;

/** The `queued` records of the messages the ingest is queueing (contract §1.6). */
export function queuedOutcomes(
  messages: ReadonlyArray<OutgoingMessage>,
  now: number,
): OutcomeRecord[] {
  return messages.flatMap(({ eventId, event }) =>
    event === undefined
      ? []
      : [{ ...stateOf({ eventId, ...event }, now, 0), slot: 'queued', status: 'queued' }],
  );
}

/**
 * The `ignored` record of a source's payload its filter refused, under the id its dead letter
 * would have had (`<source>:<idempotency key>`): nothing else of it is kept.
 */
export function ignoredOutcome(eventId: string, sender: string, now: number): OutcomeRecord {
  const at = new Date(now).toISOString();
  return {
    eventId,
    sender,
    slot: 'state',
    status: 'ignored',
    entity: null,
    action: null,
    acceptedAt: at,
    updatedAt: at,
    attempts: 0,
  };
}

/** The `dead_lettered` record of a source's payload kept as a `mapping_failed` dead letter. */
export function mappingFailedOutcome(
  letter: { id: string; detail: string },
  sender: string,
  now: number,
): OutcomeRecord {
  return {
    ...ignoredOutcome(letter.id, sender, now),
    status: 'dead_lettered',
    reason: 'mapping_failed',
    detail: outcomeDetail({ reason: 'mapping_failed', detail: letter.detail }),
    httpStatus: null,
  };
}

/** Writes the outcome the ingest made of a source's payload (ignored, or kept), best effort. */
export function recordSourceOutcome(
  deps: { outcomes?: OutcomeStore | undefined; logger?: Logger | undefined; clock: Clock },
  record: (now: number) => OutcomeRecord,
): Promise<void> {
  const now = deps.clock.now();
  return recordOutcomes(deps.outcomes, [record(now)], deps, now + INGEST_OUTCOME_BUDGET_MS);
}
