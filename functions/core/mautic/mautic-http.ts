import {
  BodyTooLargeError,
  MauticAuthError,
  MauticBatchLimitError,
  type MauticError,
  MauticPermanentError,
  MauticRateLimitError,
  MauticResponseError,
  MauticTransientError,
} from '../errors.ts';
import type { FetchLike } from '../ports.ts';

/** How the client reaches one Mautic instance. */
export interface MauticHttpOptions {
  /** Mautic's site URL, e.g. `https://mautic.example.com` (a path prefix is kept). */
  baseUrl: string;
  fetch: FetchLike;
  /** Per-call timeout. @default 10_000 */
  timeoutMs?: number;
  /** Largest response body read; a larger one is an error, never buffered whole. @default 16 MiB */
  maxResponseBytes?: number;
  /** The clock a `Retry-After` delay counts from (the delivery's). @default Date.now */
  now?: () => number;
}

/** An HTTP answer whose body was read (up to the cap) and, when it is JSON, parsed. */
export interface MauticAnswer {
  status: number;
  headers: Headers;
  /** The parsed JSON body, or `undefined` when the body was empty or not JSON. */
  json: unknown;
  /** Whether the body was JSON (an empty body is not). */
  isJson: boolean;
}

const DEFAULT_TIMEOUT_MS = 10_000;
const DEFAULT_MAX_RESPONSE_BYTES = 16 * 1024 * 1024;

/** Resolved options with the base URL checked once. */
export interface MauticHttp {
  readonly baseUrl: string;
  send(request: {
    method: string;
    path: string;
    query?: string;
    headers: Record<string, string>;
    body?: string;
    signal?: AbortSignal | undefined;
    /** This call's own timeout, instead of the transport's. */
    timeoutMs?: number | undefined;
  }): Promise<MauticAnswer>;
}

/**
 * Builds the transport every Mautic call goes through: one timeout per call, combined with the
 * caller's signal; redirects never followed (a redirect would carry the bearer token to
 * wherever it points); the body read only up to a cap.
 */
export function createMauticHttp(options: MauticHttpOptions): MauticHttp {
  const baseUrl = checkBaseUrl(options.baseUrl);
  const host = new URL(baseUrl).host;
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const maxBytes = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
  if (!Number.isInteger(timeoutMs) || timeoutMs <= 0) {
    throw new TypeError('Expected `timeoutMs` to be a positive integer.');
  }
  if (!Number.isInteger(maxBytes) || maxBytes <= 0) {
    throw new TypeError('Expected `maxResponseBytes` to be a positive integer.');
  }

  return {
    baseUrl,
    async send({ method, path, query, headers, body, signal, timeoutMs: callTimeoutMs }) {
      const timeout = AbortSignal.timeout(callTimeoutMs ?? timeoutMs);
      const combined = signal ? AbortSignal.any([signal, timeout]) : timeout;
      const url = `${baseUrl}${path}${query ? `?${query}` : ''}`;
      const failed = (error: unknown, sent: boolean) =>
        transportFailure(error, sent, { method, path, host, signal, timeout });
      if (signal?.aborted) throw failed(signal.reason, false);

      let response: Response;
      try {
        response = await options.fetch(url, {
          method,
          headers: { 'user-agent': 'mautic-batch-relay', ...headers },
          ...(body === undefined ? {} : { body }),
          redirect: 'manual',
          signal: combined,
        });
      } catch (error) {
        throw failed(error, true);
      }

      let bytes: Uint8Array;
      try {
        bytes = await readCapped(response, maxBytes);
      } catch (error) {
        if (error instanceof BodyTooLargeError) {
          throw new MauticResponseError(
            `a body larger than ${maxBytes} bytes`,
            { method, path, status: response.status, retryable: false },
            { cause: error },
          );
        }
        // A 2xx that breaks off in its body was applied; a failure status was not.
        throw failed(error, response.status >= 200 && response.status < 300);
      }

      return answerOf(response, new TextDecoder().decode(bytes));
    },
  };
}

/**
 * A call that got no whole answer. `sent`: whether the request may have reached Mautic. Node's
 * fetch does not say whether the request had left when a call times out or is aborted, so those
 * count as sent; only a failure to connect at all is certainly not.
 */
function transportFailure(
  error: unknown,
  sent: boolean,
  call: {
    method: string;
    path: string;
    host: string;
    signal: AbortSignal | undefined;
    timeout: AbortSignal;
  },
): MauticTransientError {
  const { method, path } = call;
  let kind: 'aborted' | 'timeout' | 'network' = 'network';
  if (call.signal?.aborted) kind = 'aborted';
  else if (call.timeout.aborted) kind = 'timeout';
  const possiblyApplied = sent && (kind !== 'network' || !failedToConnect(error));
  // The host names where the call went (never the query, which may hold a contact's email, nor a
  // header, which holds the token); the code says how it failed (a name not found, a refusal).
  const code = kind === 'network' ? errorCode(error) : undefined;
  const unreached = kind === 'aborted' ? undefined : `${call.host}${code ? ` ${code}` : ''}`;
  // The foreign error is kept as the cause; Node's fetch errors carry no request headers.
  return new MauticTransientError(
    { method, path, kind, possiblyApplied, ...(unreached === undefined ? {} : { unreached }) },
    { cause: error },
  );
}

/**
 * A cause's error code; fetch's refusal of a port it never connects to (the Fetch standard's bad
 * ports, such as 1 or 9) has none, only the message "bad port".
 */
function codeOf(cause: unknown): unknown {
  const { code, message } = cause as { code?: unknown; message?: unknown };
  return code ?? (message === 'bad port' ? 'BAD_PORT' : undefined);
}

/** The first system error code along a fetch failure's causes (`ECONNREFUSED`, `ENOTFOUND`…). */
function errorCode(error: unknown): string | undefined {
  for (let cause = error, depth = 0; cause && depth < 5; depth++) {
    const code = codeOf(cause);
    if (typeof code === 'string' && /^[A-Z][A-Z_]+$/.test(code)) return code;
    if (cause instanceof AggregateError) return errorCode(cause.errors[0]);
    cause = (cause as { cause?: unknown }).cause;
  }
  return undefined;
}

/**
 * The answer with its body parsed when it is JSON. A body that is empty or not JSON is no
 * error here: whether it is acceptable depends on the call and its status, which callers judge.
 */
function answerOf(response: Response, text: string): MauticAnswer {
  const { status, headers } = response;
  if (text.trim() === '') return { status, headers, json: undefined, isJson: false };
  try {
    return { status, headers, json: JSON.parse(text), isJson: true };
  } catch {
    return { status, headers, json: undefined, isJson: false };
  }
}

/** Error codes of a connection that never opened, so no request left (Node and undici). */
const NOT_CONNECTED_CODES = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EADDRNOTAVAIL',
  'UND_ERR_CONNECT_TIMEOUT',
  'BAD_PORT',
]);

/** Whether a fetch failure happened before a connection was made (looked up along `cause`). */
function failedToConnect(error: unknown): boolean {
  for (let cause = error, depth = 0; cause && depth < 5; depth++) {
    const code = codeOf(cause);
    if (typeof code === 'string' && NOT_CONNECTED_CODES.has(code)) return true;
    if (cause instanceof AggregateError)
      return cause.errors.length > 0 && cause.errors.every(failedToConnect);
    cause = (cause as { cause?: unknown }).cause;
  }
  return false;
}

async function readCapped(response: Response, maxBytes: number): Promise<Uint8Array> {
  const declared = Number(response.headers.get('content-length'));
  if (Number.isFinite(declared) && declared > maxBytes) {
    await response.body?.cancel().catch(() => {});
    throw new BodyTooLargeError(`declared ${declared} bytes`);
  }
  if (!response.body) return new Uint8Array(0);
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > maxBytes) {
      await reader.cancel().catch(() => {});
      throw new BodyTooLargeError(`more than ${maxBytes} bytes`);
    }
    chunks.push(value);
  }
  const bytes = new Uint8Array(total);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return bytes;
}

function checkBaseUrl(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch (error) {
    throw new TypeError('Expected `baseUrl` to be an absolute http(s) URL.', { cause: error });
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new TypeError('Expected `baseUrl` to be an absolute http(s) URL.');
  }
  // A URL with credentials would put them into every error's cause; refuse it outright.
  if (url.username || url.password) {
    throw new TypeError('Expected `baseUrl` without user name or password.');
  }
  if (url.search || url.hash) {
    throw new TypeError('Expected `baseUrl` without a query or fragment.');
  }
  return `${url.origin}${url.pathname.replace(/\/+$/, '')}`;
}

/** The first element of Mautic's `{"errors":[…]}` or the raw OAuth `{"error",…}` form. */
export function firstMauticError(
  json: unknown,
): { message?: string; code?: number; type?: string } | undefined {
  if (!isObject(json)) return undefined;
  const errors = json.errors;
  const first = Array.isArray(errors)
    ? errors[0]
    : isObject(errors)
      ? Object.values(errors)[0]
      : undefined;
  if (isObject(first)) {
    return {
      ...(typeof first.message === 'string' ? { message: first.message } : {}),
      ...(typeof first.code === 'number' ? { code: first.code } : {}),
      ...(typeof first.type === 'string' ? { type: first.type } : {}),
    };
  }
  if (typeof json.error === 'string') {
    return {
      type: json.error,
      ...(typeof json.error_description === 'string' ? { message: json.error_description } : {}),
    };
  }
  return undefined;
}

const BATCH_LIMIT_MESSAGE = /A max of (\d+) entities are supported at a time/;

/**
 * Turns a failed `/api` answer into the typed error a caller decides on. Returns nothing for a
 * 2xx answer.
 */
export function apiErrorFor(
  method: string,
  path: string,
  answer: MauticAnswer,
  now: number = Date.now(),
): MauticError | undefined {
  const { status, headers, json } = answer;
  if (status >= 200 && status < 300) return undefined;
  const error = firstMauticError(json);
  if (status === 401) {
    let reason: 'token_invalid' | 'token_expired' | 'access_denied' = 'token_invalid';
    if (error?.type === 'access_denied') reason = 'access_denied';
    else if (error?.message?.includes('expired')) reason = 'token_expired';
    return new MauticAuthError({ method, path, reason });
  }
  if (status === 429) {
    const resets = [headerNumber(headers, 'x-ratelimit-reset', 1000), retryAfter(headers, now)];
    const known = resets.filter((at) => at !== undefined);
    return new MauticRateLimitError({
      method,
      path,
      resetAt: known.length === 0 ? undefined : Math.max(...known),
      limit: headerNumber(headers, 'x-ratelimit-limit', 1),
    });
  }
  // The standard batch routes refuse too many items with a 500, Mautic 7's batch company links
  // with a 400 (docs/mautic.md §4.4).
  const limit = error?.message?.match(BATCH_LIMIT_MESSAGE)?.[1];
  if ((status === 500 || status === 400) && limit !== undefined) {
    return new MauticBatchLimitError({ method, path, limit: Number(limit), status });
  }
  if (status >= 500 || status === 408) {
    // Any 5xx may come after work was done: Mautic's batch saves item by item, with no
    // transaction, and a 500 can follow the first saves; a gateway timeout (nginx 504,
    // Cloudflare 524) answers while PHP goes on (docs/mautic.md §6.4). The one exception: a 503
    // that says when to come back (`Retry-After`), a server declaring itself unavailable (a
    // maintenance page, an overloaded front), which took no request.
    const retryAt = status === 503 ? retryAfter(headers, now) : undefined;
    return new MauticTransientError({
      method,
      path,
      kind: 'server',
      status,
      possiblyApplied: status !== 408 && retryAt === undefined,
      ...(retryAt === undefined ? {} : { retryAt }),
    });
  }
  if (status >= 300 && status < 400) {
    return new MauticPermanentError({
      method,
      path,
      status,
      mauticMessage:
        'redirect not followed: check the Mautic base URL (http vs https, trailing path)',
    });
  }
  return new MauticPermanentError({ method, path, status, mauticMessage: error?.message });
}

/** `Retry-After` as epoch ms: delay seconds from `now`, or an HTTP date (RFC 9110 §10.2.3). */
function retryAfter(headers: Headers, now: number): number | undefined {
  const raw = headers.get('retry-after')?.trim();
  if (raw === undefined || raw === '') return undefined;
  if (/^\d+$/.test(raw)) return now + Number(raw) * 1000;
  const date = Date.parse(raw);
  return Number.isFinite(date) ? date : undefined;
}

function headerNumber(headers: Headers, name: string, scale: number): number | undefined {
  const raw = headers.get(name);
  if (raw === null || raw.trim() === '') return undefined;
  const value = Number(raw);
  return Number.isFinite(value) ? value * scale : undefined;
}

/** A plain JSON object (not null, not an array). */
export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
