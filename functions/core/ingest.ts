import {
  type QueuedEvent,
  queuedEventSchema,
  type RelayEvent,
  relayEventSchema,
} from './events.ts';
import type { Clock, EventQueue, OutgoingMessage } from './ports.ts';
import { verifyApiKey, verifyWebhook } from './webhook-auth.ts';

/** The keys a request may be authenticated with: HMAC keys and API key digests. */
export interface IngestCredentials {
  webhookKeys: ReadonlyArray<Buffer>;
  apiKeyDigests: ReadonlyArray<Buffer>;
}

/** The queue did not accept every message: the request may be retried whole. */
export class QueueUnavailableError extends Error {
  override name = 'QueueUnavailableError';
}

/** A request as the ingest sees it: raw body bytes and lower-cased header names. */
export interface IngestRequest {
  body: Uint8Array;
  headers: Readonly<Record<string, string | undefined>>;
}

export interface IngestResponse {
  status: 202 | 400 | 401 | 413 | 415 | 422 | 503;
  body: unknown;
}

export interface IngestLimits {
  /** Largest body accepted, in bytes. @default 1 MiB */
  maxBodyBytes: number;
  /** Most events in one request. @default 500 */
  maxEvents: number;
}

export interface IngestDeps {
  credentials: () => Promise<IngestCredentials>;
  queue: EventQueue;
  clock: Clock;
  newId: () => string;
  limits: IngestLimits;
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
 * queued), then queues one message per event (202, or 503 when the queue did not take them all).
 * It never answers 5xx for bad input: every input problem has its 4xx.
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
    const result = relayEventSchema.safeParse(item);
    if (result.success) events.push(result.data);
    else {
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
      eventId: event.eventId ?? (sender.webhookId ? `${sender.webhookId}:${index}` : deps.newId()),
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

  try {
    await deps.queue.enqueue(messages);
  } catch (error) {
    if (error instanceof QueueUnavailableError) {
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
): { name: string; webhookId?: string } | undefined {
  const webhook = {
    id: headers['webhook-id'],
    timestamp: headers['webhook-timestamp'],
    signature: headers['webhook-signature'],
  };
  const keyIndex = verifyWebhook(webhook, body, credentials.webhookKeys, nowSeconds);
  if (keyIndex !== -1 && webhook.id !== undefined)
    return { name: `webhook#${keyIndex + 1}`, webhookId: webhook.id };
  const apiKeyIndex = verifyApiKey(headers.authorization, credentials.apiKeyDigests);
  if (apiKeyIndex !== -1) return { name: `api-key#${apiKeyIndex + 1}` };
  return undefined;
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
