import {
  ENTITY_PATTERN,
  type QueuedEvent,
  queuedEventSchema,
  type RelayEvent,
  relayEventSchema,
} from './events.ts';
import type {
  Clock,
  EventQueue,
  IngestCredentials,
  Logger,
  OutgoingMessage,
  RequestLedger,
} from './ports.ts';
import { type AuthenticatedSender, requestIdentity } from './request-identity.ts';
import { verifyApiKey, verifyWebhook } from './webhook-auth.ts';

/** The queue did not accept every message: the request may be retried whole. */
export class QueueUnavailableError extends Error {
  override name = 'QueueUnavailableError';
  /** What SQS last said, for the log: the error's name and its code (never a message body). */
  readonly reason: { error: string | undefined; code: string | undefined };

  constructor(
    message: string,
    reason: { error?: string | undefined; code?: string | undefined } = {},
  ) {
    super(message);
    this.reason = { error: reason.error, code: reason.code };
  }
}

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
  status: 202 | 400 | 401 | 409 | 413 | 415 | 422 | 503;
  body: unknown;
}

export interface IngestLimits {
  /** Largest body accepted, in bytes. @default 1 MiB */
  maxBodyBytes: number;
  /** Most events in one request. @default 500 */
  maxEvents: number;
  /** The entities events may name (`ENTITIES`). @default the standard Mautic entities */
  entities: ReadonlySet<string>;
}

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

/** Nesting deeper than this is refused: re-serialising it could exhaust the stack. */
const MAX_DEPTH = 32;
/** Made once: decode() without `stream` keeps no state between calls. */
const UTF8 = new TextDecoder('utf-8', { fatal: true });
/** SQS's limit per message, less room for message attributes. */
const MAX_MESSAGE_BYTES = 1024 * 1024 - 16 * 1024;

interface Detail {
  index?: number;
  path: string;
  message: string;
}

/**
 * Accepts one POST /events request (contract §1), checking in this order: size (413), content
 * type (415), authentication (401), JSON (400), the schema of every event (422, nothing
 * queued), the request id (a replay gets the first answer, 409 while the first is in hand, 422
 * for another body, 503 when the store cannot say), then queues one message per event (202, or
 * 503 when the queue did not take them all). Bad input never reaches the de-duplication store,
 * and only a 202 is remembered. It never answers 5xx for bad input: every input problem has its 4xx.
 */
export async function acceptEvents(
  request: IngestRequest,
  deps: IngestDeps,
): Promise<IngestResponse> {
  const { body, headers } = request;
  if (body.byteLength > deps.limits.maxBodyBytes) return payloadTooLarge(deps.limits.maxBodyBytes);
  if (!isJsonContentType(headers['content-type'])) {
    return failure(415, 'unsupported_media_type', 'Content-Type must be application/json.');
  }
  const sender = authenticate(
    headers,
    body,
    await deps.credentials(),
    Math.floor(deps.clock.now() / 1000),
  );
  if (sender === undefined) return failure(401, 'unauthorized', 'Authentication failed.');
  const webhookId = sender.auth.kind === 'webhook' ? sender.auth.webhookId : undefined;

  let parsed: unknown;
  try {
    parsed = JSON.parse(UTF8.decode(body));
  } catch {
    return failure(400, 'invalid_json', 'The body is not valid JSON in UTF-8.');
  }

  const many = Array.isArray(parsed);
  const items: unknown[] = many ? (parsed as unknown[]) : [parsed];
  if (
    items.length < 1 ||
    items.length > deps.limits.maxEvents ||
    items.some((item) => !isPlainObject(item))
  ) {
    return failure(422, 'invalid_event', 'The request could not be accepted.', [
      {
        path: '',
        message: `The body must be an event object or an array of 1 to ${deps.limits.maxEvents} event objects.`,
      },
    ]);
  }

  const details: Detail[] = [];
  const events: RelayEvent[] = [];
  items.forEach((item, index) => {
    const shapeProblem = checkShape(item);
    if (shapeProblem) {
      details.push({ index, ...shapeProblem });
      return;
    }
    const entity = (item as Record<string, unknown>).entity;
    const unknownEntity =
      typeof entity === 'string' &&
      ENTITY_PATTERN.test(entity) &&
      !deps.limits.entities.has(entity);
    if (unknownEntity) {
      details.push({
        index,
        path: '/entity',
        message: 'is not one of the entities this relay accepts (ENTITIES)',
      });
    }
    const result = relayEventSchema.safeParse(item);
    if (result.success) {
      if (!unknownEntity) events.push(result.data);
    } else {
      for (const issue of result.error.issues) {
        // One detail per unknown key, at its own pointer: "" is kept for the request as a whole.
        if (issue.code === 'unrecognized_keys') {
          for (const key of issue.keys)
            details.push({
              index,
              path: toPointer([...issue.path, key]),
              message: 'is not a known field',
            });
        } else {
          details.push({ index, path: toPointer(issue.path), message: issue.message });
        }
      }
    }
  });
  if (details.length > 0) return failure(422, 'invalid_event', 'Some events are invalid.', details);

  const receivedAt = new Date(deps.clock.now()).toISOString();
  const queued = events.map(
    (event, index): QueuedEvent => ({
      v: 1,
      eventId: event.eventId ?? (webhookId ? `${webhookId}:${index}` : deps.newId()),
      receivedAt,
      sender: sender.name,
      entity: event.entity,
      action: event.action,
      ...(event.data === undefined ? {} : { data: event.data }),
      ...(event.id === undefined ? {} : { id: event.id }),
    }),
  );
  // What the batch function reads must parse, e.g. an event id derived from a long webhook-id.
  const unreadable = queued.flatMap((envelope, index) => {
    const check = queuedEventSchema.safeParse(envelope);
    return check.success
      ? []
      : check.error.issues.map((issue) => ({
          index,
          path: toPointer(issue.path),
          message: issue.message,
        }));
  });
  if (unreadable.length > 0)
    return failure(422, 'invalid_event', 'Some events are invalid.', unreadable);
  const messages: OutgoingMessage[] = queued.map((envelope) => ({
    eventId: envelope.eventId,
    body: toQueueBody(envelope),
  }));
  const tooLarge = messages.findIndex(
    (message) => Buffer.byteLength(message.body) > MAX_MESSAGE_BYTES,
  );
  if (tooLarge !== -1) {
    return failure(
      413,
      'payload_too_large',
      `Event ${tooLarge} is larger than one queue message can hold.`,
    );
  }

  const enqueue = async (): Promise<IngestResponse> => {
    try {
      await deps.queue.enqueue(messages);
    } catch (error) {
      if (error instanceof QueueUnavailableError) {
        deps.logger?.error('The events could not be queued', {
          event: 'queue_unavailable',
          requestId: request.requestId,
          events: messages.length,
          error: error.reason.error,
          code: error.reason.code,
        });
        return failure(
          503,
          'queue_unavailable',
          'The events could not be queued; retry the whole request.',
        );
      }
      throw error;
    }
    return {
      status: 202,
      body: { accepted: messages.length, eventIds: messages.map((m) => m.eventId) },
    };
  };

  const identity = deps.ledger && requestIdentity(sender.auth, headers['idempotency-key'], body);
  if (deps.ledger === undefined || identity === undefined) return enqueue();
  const outcome = await deps.ledger.once(
    identity,
    async () => {
      const response = await enqueue();
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
      return failure(
        409,
        'request_in_progress',
        'A request with this id is being handled; retry it later.',
      );
    case 'reused':
      return failure(
        422,
        'idempotency_key_reused',
        'This request id was already used with another body.',
      );
    case 'unavailable':
      return failure(
        503,
        'queue_unavailable',
        'The request could not be checked for duplicates; retry the whole request.',
      );
  }
}

/**
 * The event as an SQS message body. JSON.stringify leaves U+FFFE and U+FFFF as they are, and SQS
 * refuses messages holding them; inside JSON they can only stand in strings, so escaping them
 * keeps the same value.
 */
function toQueueBody(event: QueuedEvent): string {
  return JSON.stringify(event).replace(
    /[\uFFFE\uFFFF]/g,
    (char) => `\\u${char.charCodeAt(0).toString(16)}`,
  );
}

/** The 413 answer for a body over the cap. */
export function payloadTooLarge(maxBodyBytes: number): IngestResponse {
  return failure(413, 'payload_too_large', `The body exceeds ${maxBodyBytes} bytes.`);
}

function authenticate(
  headers: IngestRequest['headers'],
  body: Uint8Array,
  credentials: IngestCredentials,
  nowSeconds: number,
): { name: string; auth: AuthenticatedSender } | undefined {
  const webhook = webhookHeaders(headers);
  const keyIndex = verifyWebhook(webhook, body, credentials.webhookKeys, nowSeconds);
  if (keyIndex !== -1 && webhook.id !== undefined)
    return { name: `webhook#${keyIndex + 1}`, auth: { kind: 'webhook', webhookId: webhook.id } };
  const apiKeyIndex = verifyApiKey(headers.authorization, credentials.apiKeyDigests);
  const keyDigest = credentials.apiKeyDigests[apiKeyIndex];
  if (keyDigest !== undefined)
    return { name: `api-key#${apiKeyIndex + 1}`, auth: { kind: 'api-key', keyDigest } };
  return undefined;
}

/**
 * The Standard Webhooks headers, or Svix's names for them (`svix-id`, `svix-timestamp`,
 * `svix-signature`), which Svix-sent webhooks carry by default. The set is taken whole from one
 * family, never mixed: any `webhook-*` header picks the Standard Webhooks names.
 */
function webhookHeaders(headers: IngestRequest['headers']) {
  const standard =
    headers['webhook-id'] !== undefined ||
    headers['webhook-timestamp'] !== undefined ||
    headers['webhook-signature'] !== undefined;
  const prefix = standard ? 'webhook' : 'svix';
  return {
    id: headers[`${prefix}-id`],
    timestamp: headers[`${prefix}-timestamp`],
    signature: headers[`${prefix}-signature`],
  };
}

/** `application/json`, optionally with `charset=utf-8` (any case, any spacing). */
function isJsonContentType(value: string | undefined): boolean {
  if (value === undefined) return false;
  const [type, ...params] = value.split(';').map((part) => part.trim().toLowerCase());
  if (type !== 'application/json') return false;
  return params.every((param) => param === '' || /^charset\s*=\s*"?utf-8"?$/.test(param));
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

function failure(
  status: IngestResponse['status'],
  code: string,
  message: string,
  details?: Detail[],
): IngestResponse {
  return { status, body: { error: { code, message, ...(details ? { details } : {}) } } };
}
