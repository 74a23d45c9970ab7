/**
 * What the ingest and the batch function share of writing each event's outcome (contract §1.6):
 * the facts every record of an event carries, a dead letter's detail as an outcome may say it,
 * and the writing itself, which is best effort. An outcome holds ids, statuses and times, never
 * a field's value, an address or a payload: every `detail` is the relay's own words
 * (`outcomeDetail`), never Mautic's message or a dead letter's detail as they are.
 */
import type { QueuedEvent } from './events.ts';
import type { OutcomeRecord } from './outcome-records.ts';
import type { Clock, Logger, MetricsSink, OutcomeStore } from './ports.ts';

/** The facts of an event every record of it carries. */
export type EventFacts = Pick<
  QueuedEvent,
  'eventId' | 'sender' | 'entity' | 'action' | 'receivedAt'
>;

export function stateOf(event: EventFacts, now: number, attempts: number) {
  return {
    eventId: event.eventId,
    sender: event.sender,
    slot: 'state' as const,
    entity: event.entity,
    action: event.action,
    acceptedAt: event.receivedAt,
    updatedAt: new Date(now).toISOString(),
    attempts,
  };
}

/** Names a Mautic record by kind and id, as the relay words a 404 of an action (mautic-contacts.ts). */
const NOT_FOUND =
  /^Mautic found no (?:contact|segment|campaign|company) \d+(?:(?: or no| to add to) (?:contact|segment|campaign|company) \d+)?/;

/**
 * A dead letter's detail as an outcome may carry it: the relay's own words, ids and statuses
 * only. Mautic's messages, and the relay's details that quote them or a value (a `duplicate`
 * names the value another record has), are left out: said by reason instead.
 */
export function outcomeDetail(letter: { reason: string; detail: string; status?: number }): string {
  const { reason, detail, status } = letter;
  const http = status === undefined ? '' : ` (HTTP ${status})`;
  const firstClause = detail.split(';')[0] ?? '';
  switch (reason) {
    case 'no_match':
    case 'ambiguous_match':
    case 'too_many_receives':
    case 'invalid_event':
      // Made by the relay from field names, contact ids, counts and schema paths.
      return detail;
    case 'mapping_failed':
      // A JSONata error quotes values in double quotes: blanked, as its dead letter's are.
      return detail.replace(/"(?:[^"\\]|\\.)*"/g, '"…"');
    case 'duplicate': {
      const field = /^(\w+): This field must be unique/.exec(detail)?.[1] ?? 'unique field';
      return `Another record has the same ${field}, a unique field${http}`;
    }
    case 'ambiguous_result':
      return `${firstClause}; its answer could not tell, so it is not sent again`;
    case 'retry_horizon_exceeded':
      return `${firstClause}; the last failure${http || ' had no HTTP status'}`;
    case 'mautic_unknown_entity':
      return `Mautic has no API for this entity${http}`;
    default: {
      const notFound = NOT_FOUND.exec(detail)?.[0];
      if (notFound)
        return detail.includes('does not say which')
          ? `${notFound} (its answer does not say which)`
          : notFound;
      return `Mautic refused it${http}`;
    }
  }
}

/**
 * Writes outcome records, best effort: a store that fails or is slow never fails delivery or a
 * 202 (the records are observability, not state the relay acts on). What was not written is
 * logged (`outcome_write_failed`) and counted (`OutcomeWritesFailed`, where metrics are kept).
 */
export async function recordOutcomes(
  store: OutcomeStore | undefined,
  records: ReadonlyArray<OutcomeRecord>,
  observe: { logger?: Logger | undefined; metrics?: MetricsSink | undefined; clock: Clock },
  until: number,
): Promise<void> {
  if (store === undefined || records.length === 0) return;
  let timer: ReturnType<typeof setTimeout> | undefined;
  // The store bounds its calls by `until`; this bounds a store that does not.
  const late = new Promise<number>((resolve) => {
    timer = setTimeout(() => resolve(records.length), Math.max(0, until - observe.clock.now()));
  });
  let failed: number;
  try {
    failed = await Promise.race([store.write(records, until), late]);
  } catch {
    failed = records.length;
  } finally {
    clearTimeout(timer);
  }
  if (failed === 0) return;
  observe.logger?.warn('Some outcomes could not be written; delivery goes on without them', {
    event: 'outcome_write_failed',
    count: failed,
    of: records.length,
  });
  observe.metrics?.addMetric('OutcomeWritesFailed', 'Count', failed);
}
