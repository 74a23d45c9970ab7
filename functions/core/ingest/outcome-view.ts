/**
 * Outcome records as senders and operators read them (contract §1.6): the current record of
 * each event, and its answer. The ingest's `GET /events` and the `events` commands share it.
 */
import type { OutcomeRecord, OutcomeStatus } from '../outcome-records.ts';

/**
 * Each event's current record, per sender: of its `queued` and `state` records the state one,
 * unless the queued one is of a later acceptance (the same event id accepted again, its new
 * try not delivered yet). Which writer wrote last does not matter: a `queued` that reaches the
 * store after the batch function's `delivered` never hides it.
 */
export function currentOutcomes(records: ReadonlyArray<OutcomeRecord>): OutcomeRecord[] {
  const byEvent = new Map<string, OutcomeRecord>();
  for (const record of records) {
    const key = JSON.stringify([record.eventId, record.sender]);
    const other = byEvent.get(key);
    byEvent.set(key, other === undefined ? record : current(other, record));
  }
  return [...byEvent.values()];
}

function current(a: OutcomeRecord, b: OutcomeRecord): OutcomeRecord {
  if (a.slot === b.slot) return a.updatedAt >= b.updatedAt ? a : b;
  const [queued, state] = a.slot === 'queued' ? [a, b] : [b, a];
  return queued.acceptedAt > state.acceptedAt ? queued : state;
}

/** Each status's own fields, beside the common ones (contract §1.6). */
const STATUS_FIELDS: Record<OutcomeStatus, ReadonlyArray<keyof OutcomeRecord>> = {
  queued: [],
  retrying: ['lastFailure', 'nextAttemptAt'],
  delivered: ['mauticIds', 'httpStatus', 'deliveredAt', 'callId'],
  dead_lettered: ['reason', 'detail', 'httpStatus'],
  ignored: [],
  skipped: ['detail'],
  coalesced: ['into'],
};

/**
 * An event's answer, as contract §1.6 writes it: `eventId`, `entity`, `action`, `status`,
 * `acceptedAt`, `updatedAt`, `attempts`, then its status's own fields. Never the store's keys.
 */
export function outcomeAnswer(record: OutcomeRecord): Record<string, unknown> {
  const answer: Record<string, unknown> = {
    eventId: record.eventId,
    entity: record.entity,
    action: record.action,
    status: record.status,
    acceptedAt: record.acceptedAt,
    updatedAt: record.updatedAt,
    attempts: record.attempts,
  };
  for (const field of STATUS_FIELDS[record.status]) {
    if (record[field] !== undefined) answer[field] = record[field];
  }
  return answer;
}
