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
  refusalResponse,
  type Sender,
  toMessages,
} from './ingest-steps.ts';
import type {
  Clock,
  EventQueue,
  IngestCredentials,
  Logger,
  OutgoingMessage,
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
 * remembered. It never answers 5xx for bad input: every input problem has its 4xx.
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
    const events = endpoint.events(request);
    const messages = toMessages(envelope(events, sender, deps.clock.now(), deps.newId));
    return await enqueueOnce(request, sender, messages, deps);
  } catch (error) {
    if (error instanceof IngestRefusal) return refusalResponse(error);
    throw error;
  }
}

/**
 * Enqueue once: a request id seen before gets the first answer (409 while the first is in hand,
 * 422 for another body, 503 when the store cannot say); otherwise the messages are queued (202,
 * or 503 when the queue did not take them all).
 */
async function enqueueOnce(
  request: IngestRequest,
  sender: Sender,
  messages: OutgoingMessage[],
  deps: IngestDeps,
): Promise<IngestResponse> {
  const { ledger } = deps;
  const identity = ledger && sender.identity();
  if (ledger === undefined || identity === undefined) return enqueue(request, messages, deps);
  const outcome = await ledger.once(
    identity,
    async () => {
      const response = await enqueue(request, messages, deps);
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
    if (!(error instanceof QueueUnavailableError)) throw error;
    deps.logger?.error('The events could not be queued', {
      event: 'queue_unavailable',
      requestId: request.requestId,
      events: messages.length,
      error: error.reason.error,
      code: error.reason.code,
    });
    return refusalResponse(
      new IngestRefusal(
        503,
        'queue_unavailable',
        'The events could not be queued; retry the whole request.',
      ),
    );
  }
  return {
    status: 202,
    body: { accepted: messages.length, eventIds: messages.map((message) => message.eventId) },
  };
}
