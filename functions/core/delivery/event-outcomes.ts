/**
 * The outcomes the batch function writes for each batch it settles (contract §1.6): delivered,
 * coalesced, skipped, retrying or dead-lettered. Written best effort (`recordOutcomes`); every
 * `detail` is the relay's own words (`outcomeDetail`).
 */
import type { QueuedEvent } from '../events.ts';
import type { OutcomeRecord } from '../outcome-records.ts';
import { type EventFacts, outcomeDetail, stateOf } from '../outcome-writes.ts';
import type { DeadLetter, QueuedMessage } from '../queue-ports.ts';
import type { MessageOutcome } from './failure-policy.ts';
import { type ReadBatch, receiveCount, type Settlement } from './outcomes.ts';

/** How long the batch function waits at most for one batch's outcome writes. */
export const BATCH_OUTCOME_BUDGET_MS = 2_000;

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
