import { randomUUID } from 'node:crypto';
import { IngestRefusal, QueueUnavailableError } from '../errors.ts';
import { recordOutcomes } from '../outcome-writes.ts';
import type {
  Clock,
  IngestCredentials,
  Logger,
  OutcomeStore,
  RequestIdentity,
  RequestLedger,
} from '../ports.ts';
import type { EventQueue, OutgoingMessage } from '../queue-ports.ts';
import type { RecordCounter } from '../record-counter.ts';
import { INGEST_OUTCOME_BUDGET_MS, queuedOutcomes } from './ingest-outcomes.ts';
import {
  checkContentType,
  checkSize,
  envelope,
  eventsEndpoint,
  type IngestEndpoint,
  type IngestLimits,
  type IngestRequest,
  type IngestResponse,
  type Intake,
  refusalResponse,
} from './ingest-steps.ts';
import { toMessages } from './queue-messages.ts';
import { admitToRecords, checkRecordShare } from './record-backlog.ts';
import { loggingRefusals } from './unauthorized-log.ts';

export interface IngestDeps {
  credentials: () => Promise<IngestCredentials>;
  queue: EventQueue;
  clock: Clock;
  newId: () => string;
  limits: IngestLimits;
  /** Remembers accepted requests (contract §1, Idempotency); absent: no de-duplication. */
  ledger?: RequestLedger | undefined;
  /** Where each event's outcome is kept (contract §1.6); absent: none is. */
  outcomes?: OutcomeStore | undefined;
  /** Counts each record's events per minute (contract §2); absent: records are not bounded. */
  recordCounter?: RecordCounter | undefined;
  logger?: Logger | undefined;
}

/**
 * Accepts one POST /events request (contract §1): `acceptWith` the events endpoint's steps.
 */
export function acceptEvents(request: IngestRequest, deps: IngestDeps): Promise<IngestResponse> {
  return acceptWith(loggingRefusals(eventsEndpoint(deps), deps), request, deps);
}

/**
 * Runs an ingest endpoint's pipeline, in the contract's order (§1.5): size, content type, the
 * endpoint's authenticate and events steps, envelopes, size per message, events per record, then
 * one enqueue per request identity, counted against its records' bounds (contract §2). Bad input
 * never reaches the de-duplication store, and only a 202 is remembered. It never answers 5xx for
 * bad input: every input problem has its 4xx. An events step that gives an `Intake` has made the
 * messages (or what to do instead) itself.
 */
export async function acceptWith(
  endpoint: IngestEndpoint,
  request: IngestRequest,
  deps: IngestDeps,
): Promise<IngestResponse> {
  try {
    checkSize(request.body, deps.limits);
    checkContentType(request.headers);
    const sender = await endpoint.authenticate(request);
    const carried = await endpoint.events(request, sender);
    const intake: Intake = Array.isArray(carried)
      ? {
          kind: 'queue',
          messages: toMessages(
            envelope(carried, sender, deps.clock.now(), deps.newId),
            randomUUID(),
          ),
          identity: sender.identity,
        }
      : carried;
    if (intake.kind === 'answer') return intake.response;
    if (intake.kind === 'queue') checkRecordShare(intake.messages, deps.limits);
    const work: Work =
      intake.kind === 'queue'
        ? (progress) => enqueue(request, intake.messages, deps, progress)
        : async () => ({ response: await intake.settle() });
    return await once(request, intake.identity, work, deps);
  } catch (error) {
    if (error instanceof IngestRefusal) return refusalResponse(error);
    throw error;
  }
}

/**
 * What an accepted request does (queueing, or what an endpoint does instead), given the
 * `progress` an earlier try of it left: its answer, and what it did even if the answer is not a
 * 202 (`progress`, kept by the ledger for the next try).
 */
type Work = (
  progress: string | undefined,
) => Promise<{ response: IngestResponse; progress?: string | undefined }>;

/**
 * Does `work` once per request id: an id seen before gets the first answer (409 while the first
 * is in hand, 422 for another body, 503 when the store cannot say); otherwise `work` answers
 * (202, or 503 when the queue did not take it all), with what an earlier try did.
 */
async function once(
  request: IngestRequest,
  identityOf: () => RequestIdentity | undefined,
  work: Work,
  deps: IngestDeps,
): Promise<IngestResponse> {
  const { ledger } = deps;
  const identity = ledger && identityOf();
  if (ledger === undefined || identity === undefined) return (await work(undefined)).response;
  const outcome = await ledger.once(
    identity,
    async (earlier) => {
      const { response, progress } = await work(earlier);
      return {
        response,
        status: response.status,
        body: JSON.stringify(response.body),
        remember: response.status === 202,
        progress,
      };
    },
    { remainingTimeMs: request.remainingTimeMs, requestId: request.requestId },
  );
  switch (outcome.kind) {
    case 'accepted':
      return outcome.result.response;
    case 'replayed':
      return { status: 202, body: JSON.parse(outcome.body) };
    case 'in_progress':
      throw new IngestRefusal(
        409,
        'request_in_progress',
        'A request with this id is being handled; retry it later.',
      );
    case 'reused':
      throw new IngestRefusal(
        422,
        'idempotency_key_reused',
        'This request id was already used with another body.',
      );
    case 'unavailable':
      throw new IngestRefusal(
        503,
        'queue_unavailable',
        'The request could not be checked for duplicates; retry the whole request.',
      );
  }
}

/**
 * Queues the messages an earlier try of the request did not (`progress`): 202 with every event's
 * id, or 503 when the queue did not take them all, with what is queued by now as the progress
 * for the ledger to keep; 429 (or 503) with nothing queued when its records' bounds refuse it,
 * and what the queue did not take given back to them.
 *
 * Why the ingest keeps this, and not delivery: SQS de-duplicates a FIFO message only within 5
 * minutes (and the deduplication ids hold the try's `receivedAt`, so not even then), while the
 * request ledger promises once for DEDUP_WINDOW_SECONDS; delivery could only de-duplicate by
 * `eventId` with a durable store read on every event, and an API-key request's generated ids
 * differ from one try to the next. The ledger holds the request's claim while this runs, so no
 * other try of it can read or write the progress meanwhile.
 *
 * The progress is, per position in the request, the id of the event queued there (null: not
 * queued). The body is the same as the earlier try's (the ledger hands progress only then), so
 * the positions are the same events (for a source, unless its mapping was replaced in between);
 * a retry's 202 names what was queued, the earlier try's ids included. An invocation that dies after queueing and before the ledger saved the progress
 * leaves none: its retry queues the whole request again (at least once, as in §2).
 */
async function enqueue(
  request: IngestRequest,
  messages: OutgoingMessage[],
  deps: IngestDeps,
  progress: string | undefined,
): Promise<{ response: IngestResponse; progress?: string }> {
  const queuedIds = queuedBefore(progress, messages.length);
  const rest = messages.filter((_, index) => queuedIds[index] === null);
  // Counted once its id is claimed, so that a replay gets its first answer, not a 429.
  const admission = await admitToRecords(rest, request, deps);
  if (admission.kind === 'refused') return { response: admission.response };
  // Beside the sends, not before them: a `queued` that lands after the batch function's
  // `delivered` never hides it (outcome-view.ts), and a slow store holds the 202 back no
  // longer than the budget. A request answered 503 may leave `queued` for events its retry
  // queues.
  const now = deps.clock.now();
  const recorded = recordOutcomes(
    deps.outcomes,
    queuedOutcomes(rest, now),
    deps,
    now + INGEST_OUTCOME_BUDGET_MS,
  );
  const [answer] = await Promise.all([
    queueRest(request, { messages, rest, queuedIds }, admission, deps),
    recorded,
  ]);
  return answer;
}

/** Queues `rest`, noting in `queuedIds` what the queue took: 202, or 503 with the progress. */
async function queueRest(
  request: IngestRequest,
  { messages, rest, queuedIds }: QueueingState,
  admission: { giveBack(messages: OutgoingMessage[]): Promise<void> },
  deps: IngestDeps,
): Promise<{ response: IngestResponse; progress?: string }> {
  const position = new Map(messages.map((message, index) => [message, index]));
  try {
    if (rest.length > 0) {
      await deps.queue.enqueue(rest, (message) => {
        const index = position.get(message);
        if (index !== undefined) queuedIds[index] = message.eventId;
      });
    }
  } catch (error) {
    await admission.giveBack(
      rest.filter((message) => queuedIds[position.get(message) ?? -1] === null),
    );
    const queued = queuedIds.filter((id) => id !== null).length;
    const response = queueUnavailable(error, request, deps, {
      log: 'The events could not be queued',
      answer: 'The events could not be queued; retry the whole request.',
      details: { events: messages.length, queued },
    });
    return queued === 0 ? { response } : { response, progress: JSON.stringify(queuedIds) };
  }
  const eventIds = messages.map((message, index) => queuedIds[index] ?? message.eventId);
  return { response: { status: 202, body: { accepted: messages.length, eventIds } } };
}

/** A request's messages, those not queued by an earlier try, and the ids queued per position. */
interface QueueingState {
  messages: OutgoingMessage[];
  rest: OutgoingMessage[];
  queuedIds: Array<string | null>;
}

/**
 * What an earlier try queued, per position: its event id, or null. Anything but a list of
 * `count` such entries counts as nothing queued: a source whose mapping was replaced between
 * the tries can make another number of events of the same body.
 */
function queuedBefore(progress: string | undefined, count: number): Array<string | null> {
  const none = Array.from({ length: count }, (): string | null => null);
  if (progress === undefined) return none;
  let parsed: unknown;
  try {
    parsed = JSON.parse(progress);
  } catch {
    return none;
  }
  const fits =
    Array.isArray(parsed) &&
    parsed.length === count &&
    parsed.every((id) => id === null || typeof id === 'string');
  return fits ? (parsed as Array<string | null>) : none;
}

/**
 * A queue that did not take what a request needs queued: one error log line (`queue_unavailable`,
 * with the SQS code, never a body) and a 503 for the sender to send the whole request again. Any
 * other error is not the queue's and is thrown on.
 */
export function queueUnavailable(
  error: unknown,
  request: IngestRequest,
  deps: Pick<IngestDeps, 'logger'>,
  what: { log: string; answer: string; details: Record<string, unknown> },
): IngestResponse {
  if (!(error instanceof QueueUnavailableError)) throw error;
  deps.logger?.error(what.log, {
    event: 'queue_unavailable',
    requestId: request.requestId,
    ...what.details,
    error: error.reason.error,
    code: error.reason.code,
  });
  return refusalResponse(new IngestRefusal(503, 'queue_unavailable', what.answer));
}
