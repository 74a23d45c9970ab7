/**
 * One busy record never stalls the others (contract §2). SQS FIFO looks for message groups with
 * a message to hand out among the first 120,000 messages of a queue only, so one record with a
 * large backlog (a sender in a loop) could hold back every other record. The ingest therefore
 * bounds the events a record may have accepted in the last minute, `MAX_RECORD_EVENTS_PER_MINUTE`,
 * counted per record in the de-duplication table (`RecordCounter`), so that every ingest
 * container enforces the one bound.
 *
 * **The window** is a sliding minute estimated from two fixed ones, as many rate limiters do:
 * this minute's count plus the last minute's, weighted by the share of it still inside the last
 * 60 seconds. A fixed minute alone would let a record take twice the bound within a second around
 * a minute's turn and then refuse it for the rest of that minute, its sender's retries all coming
 * back at the next turn; the estimate holds a steady sender to the bound, evenly. It takes the
 * last minute's events as spread evenly: any 60 seconds hold at most twice the bound (each fixed
 * minute holds at most the bound), and a sender that keeps trying gets the bound per minute.
 *
 * **Counting** adds every record of a request first (all at once, bounded), then checks: the
 * request passes only if each of its records stays within the bound, its own events counted;
 * else what it added is given back and nothing of it is queued. Adding before checking means two
 * requests racing for a record's last room cannot both pass (each sees the other's events). The
 * cost of that is over-counting, never under-counting: a refused request counts until its
 * give-back, and may refuse another request meanwhile; a give-back that fails leaves its events
 * counted until the minute is over (logged). Events that name no record (a create that always
 * makes a new one) are not counted.
 */
import { IngestRefusal, StoreUnavailableError } from '../errors.ts';
import type { Clock, Logger } from '../ports.ts';
import type { OutgoingMessage } from '../queue-ports.ts';
import type { MinuteCounts, RecordCounter } from '../record-counter.ts';
import {
  type IngestLimits,
  type IngestRequest,
  type IngestResponse,
  refusalResponse,
} from './ingest-steps.ts';

/** The bound's window. */
const MINUTE_MS = 60_000;
/** Records counted at once: two store calls each, within the AWS SDK's 50 sockets. */
const RECORDS_AT_ONCE = 25;

/** What the bound needs of the ingest's deps. */
export interface RecordBacklogDeps {
  clock: Clock;
  limits: Pick<IngestLimits, 'maxRecordEventsPerMinute'>;
  /** Where the counts are kept; absent: no bound. */
  recordCounter?: RecordCounter | undefined;
  logger?: Logger | undefined;
}

/** The outcome: queue (and give back what then was not queued), or answer this. */
export type Admission =
  | { kind: 'admitted'; giveBack(unqueued: ReadonlyArray<OutgoingMessage>): Promise<void> }
  | { kind: 'refused'; response: IngestResponse };

/** A request's events per record (its message group); events that name no record left out. */
export function eventsPerRecord(messages: ReadonlyArray<OutgoingMessage>): Map<string, number> {
  const counts = new Map<string, number>();
  for (const message of messages) {
    if (message.namesRecord) counts.set(message.groupId, (counts.get(message.groupId) ?? 0) + 1);
  }
  return counts;
}

/**
 * 422 for a request holding more events of one record than the bound takes in a minute: it
 * could never be accepted, and a 429 would have its sender retry it for ever.
 */
export function checkRecordShare(
  messages: ReadonlyArray<OutgoingMessage>,
  limits: Pick<IngestLimits, 'maxRecordEventsPerMinute'>,
): void {
  const limit = limits.maxRecordEventsPerMinute ?? 0;
  if (limit === 0) return;
  const most = Math.max(0, ...eventsPerRecord(messages).values());
  if (most <= limit) return;
  throw new IngestRefusal(422, 'invalid_event', 'The request could not be accepted.', [
    {
      path: '',
      message: `holds ${most} events of one record; a record takes at most ${limit} a minute (MAX_RECORD_EVENTS_PER_MINUTE)`,
    },
  ]);
}

/** A record's events of the last 60 s, estimated: this minute's, and the last one's share. */
export function eventsInLastMinute(counts: MinuteCounts, now: number): number {
  const elapsed = (now % MINUTE_MS) / MINUTE_MS;
  return counts.current + counts.previous * (1 - elapsed);
}

/**
 * Whole seconds, at least 1, until `events` more fit in a record's bound if nothing else comes:
 * later this minute, as the last minute's events leave the window, or in the next minute, as
 * this minute's do. `counts` are the record's without those events.
 */
export function secondsUntilRoom(
  counts: MinuteCounts,
  events: number,
  limit: number,
  now: number,
): number {
  const room = limit - events;
  if (eventsInLastMinute(counts, now) <= room) return 1;
  const minuteStart = now - (now % MINUTE_MS);
  const at =
    counts.current <= room
      ? // This minute, once previous × (1 − elapsed) ≤ room − current (previous > 0 here).
        minuteStart + MINUTE_MS * (1 - (room - counts.current) / counts.previous)
      : // The next minute, once current × (1 − elapsed) ≤ room.
        minuteStart + MINUTE_MS * (2 - Math.max(0, room) / counts.current);
  return Math.max(1, Math.ceil((at - now) / 1000));
}

/**
 * Counts a request's events against their records' bounds (contract §2): `admitted` when every
 * record stays within `MAX_RECORD_EVENTS_PER_MINUTE`, else `refused` with nothing left counted:
 * `429 record_backlog` with `Retry-After`, or `503 queue_unavailable` when the counters could
 * not be used. The bound is needed, not best-effort: under a sender's loop it is that record's
 * counter, one key, that DynamoDB throttles first, and letting requests through unchecked then
 * would let exactly that sender through; a table down refuses the request ledger's claim (503)
 * anyway.
 */
export async function admitToRecords(
  messages: ReadonlyArray<OutgoingMessage>,
  request: IngestRequest,
  deps: RecordBacklogDeps,
): Promise<Admission> {
  const limit = deps.limits.maxRecordEventsPerMinute ?? 0;
  const counter = deps.recordCounter;
  const perRecord = eventsPerRecord(messages);
  if (counter === undefined || limit === 0 || perRecord.size === 0) {
    return { kind: 'admitted', giveBack: async () => {} };
  }
  const now = deps.clock.now();
  const minute = Math.floor(now / MINUTE_MS);
  const tallies = await eachAtMost([...perRecord], RECORDS_AT_ONCE, async ([record, events]) => {
    try {
      const counts = await counter.add(record, events, minute, { requestId: request.requestId });
      return { record, events, counts, failed: undefined };
    } catch (error) {
      return { record, events, counts: undefined, failed: { error } };
    }
  });
  const added = tallies.flatMap((tally): Tally[] => (tally.counts ? [tally] : []));
  const over = added.filter(({ counts }) => eventsInLastMinute(counts, now) > limit);
  const failure = tallies.find((tally) => tally.failed)?.failed;
  const giveBack = (counts: Map<string, number>) => giveBackEvents(counts, minute, request, deps);
  if (failure === undefined && over.length === 0) {
    return { kind: 'admitted', giveBack: (unqueued) => giveBack(eventsPerRecord(unqueued)) };
  }
  await giveBack(new Map(added.map(({ record, events }) => [record, events])));
  if (over.length > 0) return { kind: 'refused', response: backlog(over, limit, request, deps) };
  if (!(failure?.error instanceof StoreUnavailableError)) throw failure?.error;
  const refusal = new IngestRefusal(
    503,
    'queue_unavailable',
    'The request could not be counted against its records; retry the whole request.',
  );
  return { kind: 'refused', response: refusalResponse(refusal) };
}

/** One record of a request, counted: its events in the request, and its minutes' counts. */
interface Tally {
  record: string;
  events: number;
  counts: MinuteCounts;
}

/**
 * The 429 for records past their bound, with the seconds until the one that waits longest has
 * room for its events; logged with the records' message groups (hashes, never a reference).
 */
function backlog(
  over: ReadonlyArray<Tally>,
  limit: number,
  request: IngestRequest,
  deps: RecordBacklogDeps,
): IngestResponse {
  const now = deps.clock.now();
  const retryAfterSeconds = Math.max(
    ...over.map(({ events, counts }) =>
      secondsUntilRoom({ ...counts, current: counts.current - events }, events, limit, now),
    ),
  );
  deps.logger?.warn('Refused a request (429): a record of it is past its events per minute', {
    event: 'record_backlog',
    requestId: request.requestId,
    records: over.map(({ record }) => record),
    limit,
    retryAfterSeconds,
  });
  const refusal = new IngestRefusal(
    429,
    'record_backlog',
    `A record of this request has had ${limit} events accepted in the last minute (MAX_RECORD_EVENTS_PER_MINUTE); nothing was queued. Send the request again after Retry-After.`,
    undefined,
    { retryAfterSeconds },
  );
  return refusalResponse(refusal);
}

/** Gives back what a request counted and did not queue; what cannot be, stays counted (logged). */
async function giveBackEvents(
  perRecord: ReadonlyMap<string, number>,
  minute: number,
  request: IngestRequest,
  deps: RecordBacklogDeps,
): Promise<void> {
  const counter = deps.recordCounter;
  if (counter === undefined || perRecord.size === 0) return;
  const kept = await eachAtMost([...perRecord], RECORDS_AT_ONCE, async ([record, events]) => {
    try {
      await counter.giveBack(record, events, minute);
      return 0;
    } catch {
      return events;
    }
  });
  const events = kept.reduce((sum, count) => sum + count, 0);
  if (events === 0) return;
  deps.logger?.warn('Events not queued stay counted against their records for this minute', {
    event: 'record_count_kept',
    requestId: request.requestId,
    events,
  });
}

/** `run` on each item, at most `atOnce` at a time; `run` must not throw. */
async function eachAtMost<T, R>(
  items: ReadonlyArray<T>,
  atOnce: number,
  run: (item: T) => Promise<R>,
): Promise<R[]> {
  const results: R[] = [];
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const index = next++;
      results[index] = await run(items[index] as T);
    }
  };
  await Promise.all(Array.from({ length: Math.min(atOnce, items.length) }, worker));
  return results;
}
