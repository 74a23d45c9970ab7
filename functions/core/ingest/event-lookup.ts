/**
 * `GET /events/{eventId}` and `GET /events?ids=…` (contract §1.6): what became of events, for
 * the sender that sent them. Authenticated exactly as `POST /events` is (a Standard Webhooks
 * signature, over the empty body here, or an API key), and read by the authenticated sender's
 * name, the envelope's `sender`: another sender's event is simply not found, so it answers as an
 * unknown one does.
 */
import { describeError, IngestRefusal } from '../errors.ts';
import { eventIdSchema } from '../events.ts';
import type { Clock, IngestCredentials, Logger, OutcomeStore } from '../ports.ts';
import {
  eventsEndpoint,
  type IngestLimits,
  type IngestRequest,
  type IngestResponse,
  refusalResponse,
} from './ingest-steps.ts';
import { currentOutcomes, outcomeAnswer } from './outcome-view.ts';
import { loggingRefusals } from './unauthorized-log.ts';

/** The most ids one `?ids=` lookup may name (contract §1.6). */
const MAX_LOOKUP_IDS = 100;

export interface LookupDeps {
  credentials: () => Promise<IngestCredentials>;
  clock: Clock;
  limits: IngestLimits;
  /** Absent: the relay keeps no outcomes (OUTCOME_RETENTION_SECONDS 0): `404 outcomes_disabled`. */
  outcomes?: OutcomeStore | undefined;
  logger?: Logger | undefined;
}

/** What a lookup asks for: one event by its path, or the `ids` of the query as sent. */
export type Lookup = { kind: 'one'; eventId: string } | { kind: 'some'; ids: string | undefined };

/**
 * Answers one lookup, its checks in this order: authentication (401), the ids (400
 * `invalid_ids` for `?ids=` naming none or more than 100), whether outcomes are kept (404
 * `outcomes_disabled`), the store (503 `outcomes_unavailable`); then 200 with each event's
 * current outcome, or 404 `unknown_event` for one that is not this sender's, unknown, or past
 * the retention. An id that could be no event's (too long, a control character) is unknown.
 */
export async function lookUpEvents(
  request: IngestRequest,
  lookup: Lookup,
  deps: LookupDeps,
): Promise<IngestResponse> {
  try {
    const sender = await loggingRefusals(eventsEndpoint(deps), deps).authenticate(request);
    const asked = lookup.kind === 'one' ? [lookup.eventId] : idsOf(lookup.ids);
    if (deps.outcomes === undefined) {
      throw new IngestRefusal(
        404,
        'outcomes_disabled',
        'This relay keeps no outcomes of events (OUTCOME_RETENTION_SECONDS is 0).',
      );
    }
    const ids = asked.filter((id) => eventIdSchema().safeParse(id).success);
    const keys = ids.map((eventId) => ({ eventId, sender: sender.name }));
    const found = new Map(
      currentOutcomes(keys.length === 0 ? [] : await read(deps.outcomes, keys, request, deps)).map(
        (record) => [record.eventId, outcomeAnswer(record)],
      ),
    );
    if (lookup.kind === 'some') {
      return { status: 200, body: { events: ids.flatMap((id) => found.get(id) ?? []) } };
    }
    const answer = found.get(lookup.eventId);
    if (answer === undefined) {
      throw new IngestRefusal(
        404,
        'unknown_event',
        'No event of this id from this sender is known (or its outcome is no longer kept).',
      );
    }
    return { status: 200, body: answer };
  } catch (error) {
    if (error instanceof IngestRefusal) return refusalResponse(error);
    throw error;
  }
}

/** The ids of `?ids=`, each once, in the order given: 1 to MAX_LOOKUP_IDS of them, or 400. */
function idsOf(query: string | undefined): string[] {
  const ids = [...new Set((query ?? '').split(','))].filter((id) => id !== '');
  if (ids.length === 0 || ids.length > MAX_LOOKUP_IDS) {
    throw new IngestRefusal(
      400,
      'invalid_ids',
      `ids must list 1 to ${MAX_LOOKUP_IDS} event ids, comma-separated.`,
    );
  }
  return ids;
}

/** The store's records of these events; a store that cannot answer is a 503, logged. */
async function read(
  store: OutcomeStore,
  keys: ReadonlyArray<{ eventId: string; sender: string }>,
  request: IngestRequest,
  deps: Pick<LookupDeps, 'logger'>,
) {
  try {
    return await store.read(keys);
  } catch (error) {
    deps.logger?.error('The outcome store could not be read', {
      event: 'outcome_read_failed',
      requestId: request.requestId,
      error: describeError(error),
    });
    throw new IngestRefusal(
      503,
      'outcomes_unavailable',
      'The outcomes could not be read now; send the request again later.',
    );
  }
}
