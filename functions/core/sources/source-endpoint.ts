/**
 * `POST /sources/{name}` (contract §6): the ingest's pipeline (`acceptWith`) with a source's own
 * steps. Its authenticate step is the source's verification scheme; its events step runs the
 * verified body through the source's filter, idempotency key and mapping, and checks the mapped
 * events with the same code as `/events` (§1, §5). Size, content type, envelopes, the request
 * ledger and the queue are the pipeline's, so every guarantee of §1 holds here too.
 *
 * A mapping that fails never bounces the sender: providers retry a refused webhook for days and
 * then switch the endpoint off. The verified payload is kept as a `mapping_failed` dead letter
 * instead, for a redrive to map again once the mapping is fixed, and the answer is a 202 naming
 * the letter. A dead letter is this envelope, as JSON (`v` is its version):
 *
 *   { "v": 1, "source": "<name>", "eventId": "<the letter's id>", "receivedAt": "<ISO 8601>",
 *     "headers": { <the headers the mapping may read> }, "body": <the body as parsed> }
 *
 * `source` and `body` tell it from a queued event (which has `sender`, `entity` and `action`);
 * `headers` never holds a signature or credential header (`CompiledSource.mappingHeaders`).
 *
 * What a source makes of a payload (`mapSourcePayload`) is the one code the endpoint, `sources
 * test` and the redrive of such a letter run (infra/cli/source-letters.ts).
 */
import { createHash } from 'node:crypto';
import { IngestRefusal } from '../errors.ts';
import { eventIdSchema, type RelayEvent } from '../events.ts';
import { acceptWith, type IngestDeps, queueUnavailable } from '../ingest/ingest.ts';
import {
  ignoredOutcome,
  mappingFailedOutcome,
  recordSourceOutcome,
} from '../ingest/ingest-outcomes.ts';
import {
  envelope,
  type IngestEndpoint,
  type IngestLimits,
  type IngestRequest,
  type IngestResponse,
  type Intake,
  parseBody,
  type Sender,
  validateEvents,
} from '../ingest/ingest-steps.ts';
import { MAX_MESSAGE_BYTES, toMessages, toSqsText } from '../ingest/queue-messages.ts';
import { checkRecordShare } from '../ingest/record-backlog.ts';
import type { RequestIdentity } from '../ports.ts';
import type { OutgoingMessage, SourceDeadLetterQueue } from '../queue-ports.ts';
import {
  evaluationFailure,
  type MappingFailure,
  mappingFailureText,
  withoutPayloadValues,
} from './mapping-failures.ts';
import {
  type CompiledSource,
  eventPointer,
  SOURCE_NAME_PATTERN,
  type SourceRegistry,
} from './sources.ts';

/** What the sources endpoint needs beside the ingest's own deps. */
export interface SourceIngestDeps extends IngestDeps {
  /** The sources as configured now, asked once per request; absent: none (every name is 404). */
  sources?: SourceRegistry | undefined;
  /** Where a payload that could not be mapped is kept: needed as soon as a source is configured. */
  sourceDeadLetters?: SourceDeadLetterQueue | undefined;
}

/** §1: an event id has at most 128 characters. */
const MAX_EVENT_ID_LENGTH = 128;
/** The most bytes a letter's id (at most 128 characters) takes in JSON: every one escaped. */
const LONGEST_ID_JSON_BYTES = 2 + 6 * MAX_EVENT_ID_LENGTH;

/** Accepts one `POST /sources/{name}` request: `acceptWith` the source's steps. */
export function acceptSource(
  name: string,
  request: IngestRequest,
  deps: SourceIngestDeps,
): Promise<IngestResponse> {
  return acceptWith(sourceEndpoint(name, deps), request, deps);
}

function sourceEndpoint(name: string, deps: SourceIngestDeps): IngestEndpoint {
  // Looked up once: a reload during the request does not change the source it runs.
  const source = SOURCE_NAME_PATTERN.test(name) ? deps.sources?.get(name) : undefined;
  if (source === undefined) {
    const unknown = (): never => {
      throw new IngestRefusal(404, 'unknown_source', 'No source of this name is configured.');
    };
    return { authenticate: async () => unknown(), events: unknown };
  }
  const deadLetters = deps.sourceDeadLetters;
  // The composition root refuses to start so (functions/ingest/compose.ts).
  if (deadLetters === undefined)
    throw new Error('A source is configured without a dead-letter queue');
  return {
    authenticate: async (request) => {
      if (source.secretUnreadable === true) {
        throw new IngestRefusal(
          503,
          'source_unavailable',
          'The source cannot be checked now; send the request again later.',
        );
      }
      // One answer whatever failed: which header, secret or timestamp is never said to the
      // sender; the operator's log says which check refused.
      const now = deps.clock.now();
      if (!source.authenticate(request.body, request.headers, now)) {
        deps.logger?.warn('Refused a source request (401): its verification failed', {
          event: 'unauthorized',
          source: source.name,
          requestId: request.requestId,
          check: source.refusedCheck(request.headers, now),
        });
        throw new IngestRefusal(401, 'unauthorized', 'Authentication failed.');
      }
      // The request's identity is the source's idempotency key, known once the body is read.
      return sourceSender(source.name);
    },
    events: (request) => sourceIntake(source, request, { ...deps, deadLetters }),
  };
}

type Deps = IngestDeps & { deadLetters: SourceDeadLetterQueue };

/**
 * The source's steps on a verified request, in order: the body parsed (400 when it is not
 * JSON), its dead letter sized (413 when it could not be kept), then `mapSourcePayload`. A
 * false filter answers 202 `ignored` and does nothing more; a failure is kept as a dead letter
 * under the request's identity; `[]` queues nothing.
 */
async function sourceIntake(
  source: CompiledSource,
  request: IngestRequest,
  deps: Deps,
): Promise<Intake> {
  const body = parseBody(request.body);
  const keep = deadLetterOf(source, body, request, deps);
  const mapping = await mapSourcePayload(source, body, request.headers, {
    limits: deps.limits,
    receivedAt: deps.clock.now(),
    newId: deps.newId,
  });
  if (mapping.kind === 'ignored') {
    // Kept under the id its dead letter would have had; without an idempotency key no one
    // could name it, so nothing is kept.
    const id = mapping.idBase;
    const { name } = sourceSender(source.name);
    if (id !== undefined) await recordSourceOutcome(deps, (now) => ignoredOutcome(id, name, now));
    return { kind: 'answer', response: accepted({ ignored: true }) };
  }
  const { key } = mapping;
  const identity = (): RequestIdentity | undefined =>
    key === undefined
      ? undefined
      : {
          // Apart from /events' ids and from every other source's.
          key: `source:${source.name}:${key}`,
          bodyHash: createHash('sha256').update(request.body).digest('base64'),
        };
  if (mapping.kind === 'failed') {
    return { kind: 'settle', identity, settle: () => keep(mapping.idBase, mapping.failure) };
  }
  // `[]` means nothing to do: nothing is queued, so nothing needs remembering.
  if (mapping.messages.length === 0) return { kind: 'answer', response: accepted() };
  return { kind: 'queue', messages: mapping.messages, identity };
}

/** What `mapSourcePayload` needs beside the source and the payload. */
export interface MappingContext {
  /** The ingest's checks of events (§1, §5: ENTITIES, CONTACT_MATCH_FIELDS, MAX_EVENTS…). */
  limits: IngestLimits;
  /** When the payload came (epoch ms): its events' `receivedAt`. */
  receivedAt: number;
  newId: () => string;
  /** The base of the events' ids when it is known already (a redrive: the letter's id). */
  idBase?: string | undefined;
}

/**
 * What a source makes of a verified payload: `ignored` when its filter is false; else `failed`
 * (why, and `idBase`, the id its dead letter has) or `mapped` (the events as the mapping yielded
 * them, checked, and their queue messages; none for `[]`). `key` is the payload's idempotency
 * key, undefined when it has none.
 */
export type PayloadMapping =
  /** `idBase`: the id its dead letter would have, when the payload has an idempotency key. */
  | { kind: 'ignored'; idBase?: string }
  | { kind: 'failed'; key: string | undefined; idBase: string; failure: MappingFailure }
  | {
      kind: 'mapped';
      key: string | undefined;
      idBase: string;
      events: unknown[];
      messages: OutgoingMessage[];
    };

/**
 * A source's filter, idempotency key and mapping on a payload, and the ingest's checks of the
 * events, as the endpoint runs them: the one code that the endpoint, `sources test` and a
 * redrive of a `mapping_failed` dead letter share, so that each says what the others do. A
 * filter or key that fails is a failure too, but the key is still asked for after a failed
 * filter: the dead letter's id comes from it.
 */
export async function mapSourcePayload(
  source: CompiledSource,
  body: unknown,
  headers: Readonly<Record<string, string | undefined>>,
  context: MappingContext,
): Promise<PayloadMapping> {
  let failure: MappingFailure | undefined;
  let wanted = true;
  try {
    wanted = Boolean(await source.filter(body, headers));
  } catch (error) {
    failure = evaluationFailure(error);
  }
  let key: string | undefined;
  try {
    key = await source.idempotencyKey(body, headers);
  } catch (error) {
    const why = evaluationFailure(error);
    if (wanted) failure ??= why;
  }
  if (!wanted) {
    if (key === undefined) return { kind: 'ignored' };
    return { kind: 'ignored', idBase: idBaseOf(source.name, key, context.limits.maxEvents) };
  }
  const idBase =
    context.idBase ?? idBaseOf(source.name, key ?? context.newId(), context.limits.maxEvents);
  const mapped = failure
    ? { failure }
    : await mapToMessages(source, body, headers, idBase, context);
  if ('failure' in mapped) return { kind: 'failed', key, idBase, failure: mapped.failure };
  return { kind: 'mapped', key, idBase, ...mapped };
}

function accepted(extra: Record<string, unknown> = {}): IngestResponse {
  return { status: 202, body: { accepted: 0, eventIds: [], ...extra } };
}

/** The sender a source's events are queued under: apart from every `/events` sender. */
function sourceSender(name: string): Sender {
  return { name: `source:${name}`, identity: () => undefined };
}

/**
 * The mapping's events and their queue messages, each with its id: the mapping's own, else
 * `<base>:<index>` (its position among the events the mapping yielded). Events the ingest
 * would refuse (§1, §5: the schema, ENTITIES, CONTACT_MATCH_FIELDS, the size of a message,
 * more events of one record than MAX_RECORD_EVENTS_PER_MINUTE) are a failure at the first
 * refused field.
 */
async function mapToMessages(
  source: CompiledSource,
  body: unknown,
  headers: Readonly<Record<string, string | undefined>>,
  base: string,
  context: MappingContext,
): Promise<{ events: unknown[]; messages: OutgoingMessage[] } | { failure: MappingFailure }> {
  const mapped = await source.map(body, headers);
  if (mapped.kind === 'failed') return { failure: mapped };
  if (mapped.events.length === 0) return { events: [], messages: [] };
  try {
    const events = validateEvents(mapped.events, context.limits).map(
      (event, index): RelayEvent => ({ ...event, eventId: event.eventId ?? `${base}:${index}` }),
    );
    const queued = envelope(events, sourceSender(source.name), context.receivedAt, context.newId);
    const messages = toMessages(queued);
    // More events of one record than its bound takes in a minute could never be queued.
    checkRecordShare(messages, context.limits);
    return { events: mapped.events, messages };
  } catch (error) {
    if (!(error instanceof IngestRefusal)) throw error;
    const [first] = error.details ?? [];
    if (first === undefined) return { failure: { error: `map: ${error.message}`, pointer: '' } };
    return {
      failure: {
        error: `map: yields an event the ingest refuses: ${first.message}`,
        pointer: first.index === undefined ? '' : eventPointer(first.index, first.path),
      },
    };
  }
}

/**
 * The base of the ids of a request's events (`<base>:<index>`) and the id of its dead letter:
 * `<name>:<key>`, a new id standing for the key when the request has none. An idempotency key
 * may have 256 characters and §1 allows an event id 128: when `<name>:<key>:<index>` could
 * pass 128 for the largest index this relay allows (MAX_EVENTS_PER_REQUEST), or the key holds
 * a character §1.4 keeps out of event ids, the key is replaced by its SHA-256,
 * `<name>:sha256:<43 base64url characters>` (at most 115 characters, so 120 with the index).
 * The form depends only on the name and the key, so a provider's retry of a webhook gets the
 * same ids.
 */
function idBaseOf(name: string, key: string, maxEvents: number): string {
  const plain = `${name}:${key}`;
  const indexLength = String(Math.max(0, maxEvents - 1)).length;
  const fits = plain.length + 1 + indexLength <= MAX_EVENT_ID_LENGTH;
  if (fits && eventIdSchema().safeParse(plain).success) return plain;
  return `${name}:sha256:${createHash('sha256').update(key).digest('base64url')}`;
}

/**
 * The payload's dead letter, sized before anything is done: a payload whose letter could not be
 * one queue message is refused with 413 up front, so a payload is either kept whole or refused,
 * never half kept. The body is written as parsed, which can be longer than it came (numbers in
 * full, U+FFFE escaped) and cannot be written at all when it nests deeper than the stack allows.
 * Returns what keeps it: the letter sent, and the answer (202 naming it, or 503).
 */
function deadLetterOf(source: CompiledSource, body: unknown, request: IngestRequest, deps: Deps) {
  const receivedAt = new Date(deps.clock.now()).toISOString();
  let bodyJson: string;
  try {
    bodyJson = toSqsText(JSON.stringify(body));
  } catch (error) {
    if (!(error instanceof RangeError)) throw error;
    throw new IngestRefusal(413, 'payload_too_large', 'The body nests too deeply to be kept.');
  }
  const headersJson = toSqsText(JSON.stringify(source.mappingHeaders(request.headers)));
  const head = `{"v":1,"source":${JSON.stringify(source.name)},"eventId":`;
  const tail = `,"receivedAt":"${receivedAt}","headers":${headersJson},"body":`;
  const largest =
    Buffer.byteLength(head) +
    LONGEST_ID_JSON_BYTES +
    Buffer.byteLength(tail) +
    Buffer.byteLength(bodyJson) +
    1;
  if (largest > MAX_MESSAGE_BYTES) {
    throw new IngestRefusal(
      413,
      'payload_too_large',
      'The payload is larger than a dead letter can keep.',
    );
  }
  return (id: string, failure: MappingFailure) =>
    keepDeadLetter(
      { id, body: `${head}${JSON.stringify(id)}${tail}${bodyJson}}`, receivedAt, failure },
      source,
      request,
      deps,
    );
}

/**
 * Sends the dead letter: 202 `deadLettered` with its id once the queue has it, 503 (retry the
 * whole request) when it could not be kept. Logged without its detail, which may quote the
 * payload (a jsonata error can).
 */
async function keepDeadLetter(
  letter: { id: string; body: string; receivedAt: string; failure: MappingFailure },
  source: CompiledSource,
  request: IngestRequest,
  deps: Deps,
): Promise<IngestResponse> {
  const { id, failure } = letter;
  const detail = withoutPayloadValues(mappingFailureText(failure));
  try {
    await deps.deadLetters.deadLetter({
      id,
      source: source.name,
      body: letter.body,
      reason: 'mapping_failed',
      detail,
      receivedAt: letter.receivedAt,
    });
  } catch (error) {
    return queueUnavailable(error, request, deps, {
      log: 'A payload that could not be mapped could not be kept either',
      answer: 'The payload could not be kept; retry the whole request.',
      details: { source: source.name },
    });
  }
  const { name } = sourceSender(source.name);
  await recordSourceOutcome(deps, (now) => mappingFailedOutcome({ id, detail }, name, now));
  deps.logger?.warn('A payload could not be mapped; it is kept as a dead letter', {
    event: 'dead_lettered',
    requestId: request.requestId,
    eventId: id,
    reason: 'mapping_failed',
    source: source.name,
    pointer: failure.pointer,
  });
  return accepted({ deadLettered: id });
}
