import { IngestRefusal, QueueUnavailableError } from './errors.ts';
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
  toMessages,
} from './ingest-steps.ts';
import type {
  Clock,
  EventQueue,
  IngestCredentials,
  Logger,
  OutgoingMessage,
  RequestIdentity,
  RequestLedger,
} from './ports.ts';

export interface IngestDeps {
  credentials: () => Promise<IngestCredentials>;
  queue: EventQueue;
  clock: Clock;
  newId: () => string;
  limits: IngestLimits;
  /** Remembers accepted requests (contract §1, Idempotency); absent: no de-duplication. */
  ledger?: RequestLedger | undefined;
  logger?: Logger | undefined;
}

/**
 * Accepts one POST /events request (contract §1): `acceptWith` the events endpoint's steps.
 */
export function acceptEvents(request: IngestRequest, deps: IngestDeps): Promise<IngestResponse> {
  return acceptWith(eventsEndpoint(deps), request, deps);
}

/**
 * Runs an ingest endpoint's pipeline, in the contract's order (§1.5): size, content type, the
 * endpoint's authenticate and events steps, envelopes, size per message, then one enqueue per
 * request identity. Bad input never reaches the de-duplication store, and only a 202 is
 * remembered. It never answers 5xx for bad input: every input problem has its 4xx. An events
 * step that gives an `Intake` has made the messages (or what to do instead) itself.
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
          messages: toMessages(envelope(carried, sender, deps.clock.now(), deps.newId)),
          identity: sender.identity,
        }
      : carried;
    if (intake.kind === 'answer') return intake.response;
    const work =
      intake.kind === 'queue' ? () => enqueue(request, intake.messages, deps) : intake.settle;
    return await once(request, intake.identity, work, deps);
  } catch (error) {
    if (error instanceof IngestRefusal) return refusalResponse(error);
    throw error;
  }
}

/**
 * Does `work` (queueing, or what an endpoint does instead) once per request id: an id seen
 * before gets the first answer (409 while the first is in hand, 422 for another body, 503 when
 * the store cannot say); otherwise `work` answers (202, or 503 when the queue did not take it all).
 */
async function once(
  request: IngestRequest,
  identityOf: () => RequestIdentity | undefined,
  work: () => Promise<IngestResponse>,
  deps: IngestDeps,
): Promise<IngestResponse> {
  const { ledger } = deps;
  const identity = ledger && identityOf();
  if (ledger === undefined || identity === undefined) return work();
  const outcome = await ledger.once(
    identity,
    async () => {
      const response = await work();
      return {
        response,
        status: response.status,
        body: JSON.stringify(response.body),
        remember: response.status === 202,
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

/** Queues the messages: 202 with their event ids, or 503 when the queue did not take them all. */
async function enqueue(
  request: IngestRequest,
  messages: OutgoingMessage[],
  deps: IngestDeps,
): Promise<IngestResponse> {
  try {
    await deps.queue.enqueue(messages);
  } catch (error) {
    return queueUnavailable(error, request, deps, {
      log: 'The events could not be queued',
      answer: 'The events could not be queued; retry the whole request.',
      details: { events: messages.length },
    });
  }
  return {
    status: 202,
    body: { accepted: messages.length, eventIds: messages.map((message) => message.eventId) },
  };
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
