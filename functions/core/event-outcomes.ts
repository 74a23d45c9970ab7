/**
 * Each event's outcome as delivery happens (contract §1.6): the records the ingest and the batch
 * function write to the outcome store, and the writing itself, which is best effort. An outcome
 * holds ids, statuses and times, never a field's value, an address or a payload: every `detail`
 * is the relay's own words (`outcomeDetail`), never Mautic's message or a dead letter's detail
 * as they are.
 */
import type { QueuedEvent } from './events.ts';
import type { MessageOutcome } from './failure-policy.ts';
import type { OutcomeRecord } from './outcome-records.ts';
import { type ReadBatch, receiveCount, type Settlement } from './outcomes.ts';
import type {
  Clock,
  DeadLetter,
  Logger,
  MetricsSink,
  OutcomeStore,
  OutgoingMessage,
  QueuedMessage,
} from './ports.ts';

/**
 * How long the ingest waits at most for its outcome writes beside the queue's: DynamoDB answers
 * in milliseconds, so only a store in trouble makes a 202 wait, and never longer than this.
 */
export const INGEST_OUTCOME_BUDGET_MS = 500;

/** How long the batch function waits at most for one batch's outcome writes. */
export const BATCH_OUTCOME_BUDGET_MS = 2_000;

/** The facts of an event every record of it carries. */
type EventFacts = Pick<QueuedEvent, 'eventId' | 'sender' | 'entity' | 'action' | 'receivedAt'>;

function stateOf(event: EventFacts, now: number, attempts: number) {
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

/**
 * The batch function's records for one batch, once it is settled and before the queues are
 * told: `delivered`, `coalesced` or `skipped`, `retrying` with the next try's time, or
 * `dead_lettered` with the reason. One record per event and sender: a duplicate of an event in
 * the batch shares its outcome.
 */
export function batchOutcomes<M extends QueuedMessage>(
  messages: ReadonlyArray<M>,
  read: ReadBatch<M>,
  outcomes: ReadonlyMap<string, MessageOutcome>,
  settled: Pick<Settlement<M>, 'deadLetters' | 'delays'>,
  now: number,
): OutcomeRecord[] {
  const records = new Map<string, OutcomeRecord>();
  const keep = (record: OutcomeRecord) =>
    records.set(JSON.stringify([record.eventId, record.sender]), record);
  for (const letter of read.unreadable) {
    const event = envelopeOf(letter.message.body);
    if (event) keep(deadLettered(stateOf(event, now, receiveCount(letter.message)), letter));
  }
  const letters = new Map(settled.deadLetters.map((letter) => [letter.message.messageId, letter]));
  const delays = new Map(
    settled.delays.flatMap(({ seconds, messages: delayed }) =>
      delayed.map((message) => [message.messageId, seconds] as const),
    ),
  );
  for (const message of messages) {
    const event = read.events.get(message.messageId);
    if (event === undefined) continue;
    const base = stateOf(event, now, receiveCount(message));
    const letter = letters.get(message.messageId);
    const outcome = outcomes.get(message.messageId);
    const seconds = delays.get(message.messageId);
    if (letter) keep(deadLettered(base, letter));
    else if (outcome?.kind === 'delivered') keep(delivered(base, outcome, read.events));
    else if (seconds !== undefined) keep(retrying(base, outcome, now + seconds * 1000));
  }
  return [...records.values()];
}

type Base = ReturnType<typeof stateOf>;

function deadLettered(base: Base, letter: DeadLetter): OutcomeRecord {
  return {
    ...base,
    status: 'dead_lettered',
    reason: letter.reason,
    detail: outcomeDetail(letter),
    httpStatus: letter.status ?? null,
  };
}

function delivered(
  base: Base,
  outcome: MessageOutcome & { kind: 'delivered' },
  events: ReadonlyMap<string, QueuedEvent>,
): OutcomeRecord {
  const into = outcome.into === undefined ? undefined : events.get(outcome.into)?.eventId;
  if (into !== undefined && into !== base.eventId) return { ...base, status: 'coalesced', into };
  if (outcome.skipped !== undefined) return { ...base, status: 'skipped', detail: outcome.skipped };
  return {
    ...base,
    status: 'delivered',
    // 0 stands for no record: a delete by `match` that matched no contact.
    mauticIds: outcome.id > 0 ? [outcome.id] : [],
    httpStatus: outcome.status,
    deliveredAt: outcome.call ? new Date(outcome.call.at).toISOString() : base.updatedAt,
    ...(outcome.call ? { callId: outcome.call.id } : {}),
  };
}

function retrying(base: Base, outcome: MessageOutcome | undefined, next: number): OutcomeRecord {
  const failure = outcome?.kind === 'retry' ? outcome : undefined;
  return {
    ...base,
    status: 'retrying',
    lastFailure: { class: failure?.reason ?? 'no_outcome', httpStatus: failure?.status ?? null },
    nextAttemptAt: new Date(next).toISOString(),
  };
}

/** The envelope facts of a message body the batch could not take as an event, if it has them. */
function envelopeOf(body: string): EventFacts | undefined {
  try {
    const { eventId, sender, entity, action, receivedAt } = JSON.parse(body);
    const texts = [eventId, sender, entity, action, receivedAt];
    return texts.every((text) => typeof text === 'string')
      ? { eventId, sender, entity, action, receivedAt }
      : undefined;
  } catch {
    return undefined;
  }
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

/** Writes the outcome the ingest made of a source's payload (ignored, or kept), best effort. */
export function recordSourceOutcome(
  deps: { outcomes?: OutcomeStore | undefined; logger?: Logger | undefined; clock: Clock },
  record: (now: number) => OutcomeRecord,
): Promise<void> {
  const now = deps.clock.now();
  return recordOutcomes(deps.outcomes, [record(now)], deps, now + INGEST_OUTCOME_BUDGET_MS);
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
