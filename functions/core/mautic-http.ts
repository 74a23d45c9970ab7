import {
  BodyTooLargeError,
  MauticAuthError,
  MauticBatchLimitError,
  type MauticError,
  MauticPermanentError,
  MauticRateLimitError,
  MauticResponseError,
  MauticTransientError,
} from './errors.ts';
import type { FetchLike } from './ports.ts';

/** How the client reaches one Mautic instance. */
export interface MauticHttpOptions {
  /** Mautic's site URL, e.g. `https://mautic.example.com` (a path prefix is kept). */
  baseUrl: string;
  fetch: FetchLike;
  /** Per-call timeout. @default 10_000 */
  timeoutMs?: number;
  /** Largest response body read; a larger one is an error, never buffered whole. @default 16 MiB */
  maxResponseBytes?: number;
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
  }): Promise<MauticAnswer>;
}

/**
 * Builds the transport every Mautic call goes through: one timeout per call, combined with the
 * caller's signal; redirects never followed (a redirect would carry the bearer token to
 * wherever it points); the body read only up to a cap.
 */
export function createMauticHttp(options: MauticHttpOptions): MauticHttp {
  const baseUrl = checkBaseUrl(options.baseUrl);
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
    async send({ method, path, query, headers, body, signal }) {
      const timeout = AbortSignal.timeout(timeoutMs);
      const combined = signal ? AbortSignal.any([signal, timeout]) : timeout;
      const url = `${baseUrl}${path}${query ? `?${query}` : ''}`;
      const failed = (error: unknown, sent: boolean) =>
        transportFailure(error, sent, { method, path, signal, timeout });
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
  call: { method: string; path: string; signal: AbortSignal | undefined; timeout: AbortSignal },
): MauticTransientError {
  const { method, path } = call;
  let kind: 'aborted' | 'timeout' | 'network' = 'network';
  if (call.signal?.aborted) kind = 'aborted';
  else if (call.timeout.aborted) kind = 'timeout';
  const possiblyApplied = sent && (kind !== 'network' || !failedToConnect(error));
  // The foreign error is kept as the cause; Node's fetch errors carry no request headers.
  return new MauticTransientError({ method, path, kind, possiblyApplied }, { cause: error });
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
]);

/** Whether a fetch failure happened before a connection was made (looked up along `cause`). */
function failedToConnect(error: unknown): boolean {
  for (let cause = error, depth = 0; cause && depth < 5; depth++) {
    const code = (cause as { code?: unknown }).code;
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
    return new MauticRateLimitError({
      method,
      path,
      resetAt: headerNumber(headers, 'x-ratelimit-reset', 1000),
      limit: headerNumber(headers, 'x-ratelimit-limit', 1),
    });
  }
  const limit = error?.message?.match(BATCH_LIMIT_MESSAGE)?.[1];
  if (status === 500 && limit !== undefined) {
    return new MauticBatchLimitError({ method, path, limit: Number(limit) });
  }
  if (status >= 500 || status === 408) {
    // A proxy's gateway timeout (nginx 504, Cloudflare 524) answers while PHP goes on with the
    // request, so Mautic may have applied it; Mautic's own 5xx and the other proxy errors come
    // before or instead of the work (docs/mautic.md §6.4).
    const possiblyApplied = status === 504 || status === 524;
    return new MauticTransientError({ method, path, kind: 'server', status, possiblyApplied });
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
