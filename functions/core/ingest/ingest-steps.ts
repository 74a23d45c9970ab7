/**
 * The steps of an ingest endpoint, each a small function that returns its result or throws an
 * `IngestRefusal` with the answer (contract §1). `acceptEvents` (ingest.ts) runs them in order;
 * another kind of endpoint runs the same steps with one swapped, e.g. its own authenticate.
 */
import { IngestRefusal, type RefusalDetail } from '../errors.ts';
import {
  eventIdSchema,
  type QueuedEvent,
  queuedEventSchema,
  type RelayEvent,
  relayEventSchema,
} from '../events.ts';
import { CONTACT_FIELD_PATTERN, ENTITY_PATTERN } from '../mautic-names.ts';
import type { IngestCredentials, RequestIdentity } from '../ports.ts';
import type { OutgoingMessage } from '../queue-ports.ts';
import { requestIdentity } from './request-identity.ts';
import { standardWebhookHeaders, verifyApiKey, verifyWebhook } from './webhook-auth.ts';

/** A request as the ingest sees it: raw body bytes and lower-cased header names. */
export interface IngestRequest {
  body: Uint8Array;
  headers: Readonly<Record<string, string | undefined>>;
  /** The invocation's request id, for log lines. */
  requestId?: string | undefined;
  /** Time left in the invocation: a claim on a request id lasts no longer. */
  remainingTimeMs?: number | undefined;
}

export interface IngestResponse {
  status: 200 | 202 | IngestRefusal['status'];
  body: unknown;
  /** Headers beside the content type, e.g. a 429's `Retry-After`. */
  headers?: Readonly<Record<string, string>> | undefined;
}

export interface IngestLimits {
  /** Largest body accepted, in bytes. @default 1 MiB */
  maxBodyBytes: number;
  /** Most events in one request. @default 500 */
  maxEvents: number;
  /** The entities events may name (`ENTITIES`). @default the standard Mautic entities */
  entities: ReadonlySet<string>;
  /**
   * The contact fields `match` may name (`CONTACT_MATCH_FIELDS`, contract §5), `email` among them.
   * @default email
   */
  contactMatchFields: ReadonlySet<string>;
  /** `MAX_RECORD_EVENTS_PER_MINUTE` (contract §2); 0 or absent: no bound. @default 600 */
  maxRecordEventsPerMinute?: number | undefined;
}

/** Who sent a request, as the authenticate step found: what the later steps need of it. */
export interface Sender {
  /** The sender's name in the envelope: `webhook#<credential id>`, `api-key#<id>`, `source:<name>`. */
  name: string;
  /**
   * The request's identity for de-duplication (contract §1.3); undefined: it has none. A
   * function: it hashes the body, which only a relay with a de-duplication store needs.
   */
  identity: () => RequestIdentity | undefined;
  /** Event ids the sender did not give are `${eventIdBase}:${index}`, or new ids when unset. */
  eventIdBase?: string | undefined;
}

/**
 * The steps that tell one kind of endpoint from another: who sent the request, and which events
 * it carries. The rest of the pipeline (`acceptWith` in ingest.ts) is the same for every kind.
 */
export interface IngestEndpoint {
  /** Throws a 401 refusal when the request is not from a sender this endpoint knows. */
  authenticate(request: IngestRequest): Promise<Sender>;
  /**
   * The events the request carries, for the pipeline to envelope and queue under the sender's
   * identity; throws a 400 or 422 refusal when the body is not events. Or an `Intake`: what
   * the endpoint made of the request itself (a source's mapping, contract §6).
   */
  events(request: IngestRequest, sender: Sender): RelayEvent[] | Promise<Intake>;
}

/** What the pipeline does with a request whose events step gave an `Intake`. */
export type Intake =
  /** Queue these messages, once per identity (undefined: no de-duplication), as for events. */
  | { kind: 'queue'; messages: OutgoingMessage[]; identity: () => RequestIdentity | undefined }
  /**
   * Run `settle` instead of queueing, once per identity, as a queueing would be: its 202 is
   * remembered and replayed (a dead letter kept once), any other answer leaves the id free.
   */
  | {
      kind: 'settle';
      settle: () => Promise<IngestResponse>;
      identity: () => RequestIdentity | undefined;
    }
  /** Answer this now: nothing was done, so nothing is remembered (a source's filter said no). */
  | { kind: 'answer'; response: IngestResponse };

/** POST /events: senders sign with Standard Webhooks or use an API key; the body is events. */
export function eventsEndpoint(deps: {
  credentials: () => Promise<IngestCredentials>;
  clock: { now(): number };
  limits: IngestLimits;
}): IngestEndpoint {
  return {
    authenticate: async (request) => {
      const credentials = await deps.credentials();
      return authenticate(request, credentials, Math.floor(deps.clock.now() / 1000));
    },
    events: (request) => validateEvents(parseBody(request.body), deps.limits),
  };
}

/** Nesting deeper than this is refused: re-serialising it could exhaust the stack. */
const MAX_DEPTH = 32;
/** Made once: decode() without `stream` keeps no state between calls. */
const UTF8 = new TextDecoder('utf-8', { fatal: true });

/** Size, before anything else: 413 for a body over the cap. */
export function checkSize(body: Uint8Array, limits: IngestLimits): void {
  if (body.byteLength > limits.maxBodyBytes) throw bodyTooLarge(limits.maxBodyBytes);
}

/** The refusal of a body over the cap (also answered by the handler before it decodes one). */
export function bodyTooLarge(maxBodyBytes: number): IngestRefusal {
  return new IngestRefusal(413, 'payload_too_large', `The body exceeds ${maxBodyBytes} bytes.`);
}

/** Content type: 415 unless `application/json`, optionally with `charset=utf-8` (any case). */
export function checkContentType(headers: IngestRequest['headers']): void {
  const [type, ...params] = (headers['content-type'] ?? '')
    .split(';')
    .map((part) => part.trim().toLowerCase());
  const json =
    type === 'application/json' &&
    params.every((param) => param === '' || /^charset\s*=\s*"?utf-8"?$/.test(param));
  if (!json) {
    throw new IngestRefusal(
      415,
      'unsupported_media_type',
      'Content-Type must be application/json.',
    );
  }
}

/** Authentication: a Standard Webhooks signature, or an API key; 401 for neither. */
function authenticate(
  request: IngestRequest,
  credentials: IngestCredentials,
  nowSeconds: number,
): Sender {
  const { headers, body } = request;
  const webhook = standardWebhookHeaders(headers);
  const keyIndex = verifyWebhook(webhook, body, credentials.webhookKeys, nowSeconds);
  const webhookId = webhook.id;
  // The credential's stable id, never its place in a list that changes (the ledger keys by it).
  const webhookName = credentials.webhookIds[keyIndex];
  if (webhookName !== undefined && webhookId !== undefined) {
    return {
      name: `webhook#${webhookName}`,
      identity: () => requestIdentity({ kind: 'webhook', webhookId }, undefined, body),
      eventIdBase: webhookId,
    };
  }
  const apiKeyIndex = verifyApiKey(headers.authorization, credentials.apiKeyDigests);
  const keyDigest = credentials.apiKeyDigests[apiKeyIndex];
  const keyName = credentials.apiKeyIds[apiKeyIndex];
  if (keyDigest !== undefined && keyName !== undefined) {
    return {
      name: `api-key#${keyName}`,
      identity: () =>
        requestIdentity({ kind: 'api-key', keyDigest }, headers['idempotency-key'], body),
    };
  }
  throw new IngestRefusal(401, 'unauthorized', 'Authentication failed.');
}

/** Parsing: 400 unless the body is JSON in UTF-8. */
export function parseBody(body: Uint8Array): unknown {
  try {
    return JSON.parse(UTF8.decode(body));
  } catch {
    throw new IngestRefusal(400, 'invalid_json', 'The body is not valid JSON in UTF-8.');
  }
}

/**
 * Validation: an event object or an array of 1 to `maxEvents` of them, each of the schema and
 * naming an entity the relay accepts; 422 with a detail per problem, nothing queued.
 */
export function validateEvents(parsed: unknown, limits: IngestLimits): RelayEvent[] {
  const items: unknown[] = Array.isArray(parsed) ? parsed : [parsed];
  if (items.length < 1 || items.length > limits.maxEvents || !items.every(isPlainObject)) {
    throw new IngestRefusal(422, 'invalid_event', 'The request could not be accepted.', [
      {
        path: '',
        message: `The body must be an event object or an array of 1 to ${limits.maxEvents} event objects.`,
      },
    ]);
  }
  const details: RefusalDetail[] = [];
  const events: RelayEvent[] = [];
  items.forEach((item, index) => {
    const checked = checkEvent(item, limits);
    if ('event' in checked) events.push(checked.event);
    else for (const problem of checked.problems) details.push({ index, ...problem });
  });
  if (details.length > 0) {
    throw new IngestRefusal(422, 'invalid_event', 'Some events are invalid.', details);
  }
  return events;
}

type Problem = { path: string; message: string };

/**
 * One event, checked: the event, or what is wrong with it (its shape, what this relay's settings
 * allow, or the schema).
 */
function checkEvent(
  item: Record<string, unknown>,
  limits: IngestLimits,
): { event: RelayEvent } | { problems: Problem[] } {
  const shapeProblem = checkShape(item);
  if (shapeProblem) return { problems: [shapeProblem] };
  const problems: Problem[] = [];
  const entity = item.entity;
  if (typeof entity === 'string' && ENTITY_PATTERN.test(entity) && !limits.entities.has(entity)) {
    problems.push({
      path: '/entity',
      message: 'is not one of the entities this relay accepts (ENTITIES)',
    });
  }
  const matchProblem = checkMatchField(item, limits.contactMatchFields);
  if (matchProblem) problems.push(matchProblem);
  const result = relayEventSchema().safeParse(item);
  for (const issue of result.error?.issues ?? []) {
    // One detail per unknown key, at its own pointer: "" is kept for the request as a whole.
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys)
        problems.push({ path: toPointer([...issue.path, key]), message: 'is not a known field' });
    } else {
      problems.push({ path: toPointer(issue.path), message: issue.message });
    }
  }
  return result.success && problems.length === 0 ? { event: result.data } : { problems };
}

/**
 * A contact `match` on a field this relay does not allow (contract §5). Only where the schema
 * finds the reference itself well formed (a contact event other than a create, named by a
 * `match` alone with one field alias), so that one mistake gives one detail.
 */
function checkMatchField(
  item: Record<string, unknown>,
  allowed: ReadonlySet<string>,
): Problem | undefined {
  const { entity, action, id, match } = item;
  if (entity !== 'contacts' || action === 'create' || id !== undefined) return undefined;
  if (!isPlainObject(match)) return undefined;
  const fields = Object.keys(match);
  const [field] = fields;
  if (fields.length !== 1 || field === undefined || !CONTACT_FIELD_PATTERN.test(field)) {
    return undefined;
  }
  if (allowed.has(field)) return undefined;
  return {
    path: toPointer(['match', field]),
    message: 'is not a field contacts may be matched on (CONTACT_MATCH_FIELDS)',
  };
}

/**
 * Envelopes: the queued form of each event, with its id (the sender's, one derived from the
 * webhook id, or a new one), the time and the sender; 422 when one would not parse again in the
 * batch function (e.g. an event id derived from a long webhook id).
 */
export function envelope(
  events: ReadonlyArray<RelayEvent>,
  sender: Sender,
  now: number,
  newId: () => string,
): QueuedEvent[] {
  const base = sender.eventIdBase;
  const receivedAt = new Date(now).toISOString();
  const queued = events.map((event, index): QueuedEvent => {
    // Every other field as the sender gave it: `data`, `id`, `match` and the action's fields.
    const { eventId, ...fields } = event;
    return {
      v: 1,
      eventId: eventId ?? (base ? `${base}:${index}` : newId()),
      receivedAt,
      sender: sender.name,
      ...fields,
    };
  });
  const unreadable = queued.flatMap((queuedEvent, index) => {
    const check = queuedEventSchema().safeParse(queuedEvent);
    // The batch function's schema takes any id of 1 to 128 characters; what the ingest queues
    // is held to the rule of §1.4 as well, whoever made the id.
    const issues = check.success
      ? (eventIdSchema().safeParse(queuedEvent.eventId).error?.issues ?? []).map((issue) => ({
          path: ['eventId'],
          message: issue.message,
        }))
      : check.error.issues;
    return issues.map((issue) => ({ index, path: toPointer(issue.path), message: issue.message }));
  });
  if (unreadable.length > 0) {
    throw new IngestRefusal(422, 'invalid_event', 'Some events are invalid.', unreadable);
  }
  return queued;
}

/** The answer for a refusal: `{ error: { code, message, details? } }` with its status. */
export function refusalResponse(refusal: IngestRefusal): IngestResponse {
  const { status, code, message, details, retryAfterSeconds: after } = refusal;
  const headers = after === undefined ? undefined : { 'retry-after': String(after) };
  return { status, body: { error: { code, message, ...(details ? { details } : {}) } }, headers };
}

/**
 * Refuses what the schema cannot see and re-serialising could trip on: nesting deeper than
 * MAX_DEPTH and `__proto__` keys, which an object spread or assignment would turn into a
 * prototype. Walks iteratively, so depth cannot exhaust the stack here either.
 */
function checkShape(event: unknown): { path: string; message: string } | undefined {
  const stack: Array<{ value: unknown; path: string[] }> = [{ value: event, path: [] }];
  while (stack.length > 0) {
    const { value, path } = stack.pop() as { value: unknown; path: string[] };
    if (typeof value !== 'object' || value === null) continue;
    if (path.length >= MAX_DEPTH)
      return { path: toPointer(path), message: `nests deeper than ${MAX_DEPTH} levels` };
    for (const key of Object.keys(value)) {
      if (key === '__proto__')
        return { path: toPointer([...path, key]), message: 'is not an allowed key' };
      stack.push({ value: (value as Record<string, unknown>)[key], path: [...path, key] });
    }
  }
  return undefined;
}

/** A JSON pointer (RFC 6901) for a path inside one event. */
function toPointer(path: ReadonlyArray<PropertyKey>): string {
  return path
    .map((part) => `/${String(part).replaceAll('~', '~0').replaceAll('/', '~1')}`)
    .join('');
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
