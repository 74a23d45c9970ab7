/**
 * A local stand-in for API Gateway HTTP API (payload format 2.0) in front of a Lambda handler:
 * it turns each request into the event API Gateway would send, invokes the handler with a
 * Lambda-shaped Context, and writes its answer back the way API Gateway would. The local stack
 * (`npm start`) and the ingest benchmark use it, so the real handler runs behind it unchanged.
 *
 * Differences from API Gateway that matter here: a body over `maxBodyBytes` is cut at
 * `maxBodyBytes + 1` bytes and handed to the handler (which answers 413) instead of being refused
 * by the front; that connection is then closed without reading the rest. Only plain routes
 * (`METHOD /path`, `ANY /path`, `$default`) are matched: no path parameters or authorizers.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type {
  APIGatewayProxyEventV2,
  APIGatewayProxyStructuredResultV2,
  Context,
} from 'aws-lambda';
import { listenOnLoopback } from './loopback.ts';
import { InvocationTimeoutError } from './sqs-event-source.ts';

export type HttpApiHandler = (
  event: APIGatewayProxyEventV2,
  context: Context,
) => Promise<APIGatewayProxyStructuredResultV2>;

export interface HttpFrontOptions {
  handler: HttpApiHandler;
  /** Default 0 (an ephemeral port). Always bound to 127.0.0.1. */
  port?: number;
  /**
   * Route keys, e.g. `['POST /events']`; `ANY /path` and `$default` also work. Any other
   * method and path answers 404 `{"message":"Not Found"}`, as API Gateway does.
   * @default ['POST /events']
   */
  routes?: string[];
  /**
   * Reading a body stops at this many bytes + 1 and the handler gets what was read (so it can
   * answer 413). API Gateway's own cap is 10 MB. @default 10 MiB
   */
  maxBodyBytes?: number;
  /**
   * Drives context.getRemainingTimeInMillis(). As in Lambda, a handler still running at the
   * timeout is a function error: the request answers 500. @default 30_000
   */
  functionTimeoutMs?: number;
  /** @default 'ingest' */
  functionName?: string;
  /**
   * Called with what a handler threw, or an InvocationTimeoutError, or a response API Gateway
   * could not use (the client then sees a 500). Lambda would log these. Default: console.error.
   */
  onError?: (error: unknown) => void;
}

export interface HttpFront {
  /** `http://127.0.0.1:<port>`. */
  url: string;
  /**
   * Stops accepting connections, lets the invocations in hand finish (each is bounded by
   * `functionTimeoutMs`) and answer, then closes every socket. Idempotent.
   */
  close(): Promise<void>;
}

/** API Gateway's answers when it cannot route or when the integration failed. */
const NOT_FOUND = '{"message":"Not Found"}';
const INTERNAL_SERVER_ERROR = '{"message":"Internal Server Error"}';
const SERVICE_UNAVAILABLE = '{"message":"Service Unavailable"}';
const DEFAULT_ROUTES = ['POST /events'];
const DEFAULT_MAX_BODY_BYTES = 10 * 1024 * 1024;
const DEFAULT_FUNCTION_TIMEOUT_MS = 30_000;
const DEFAULT_FUNCTION_NAME = 'ingest';
const MAX_FUNCTION_TIMEOUT_MS = 900_000;
const REGION = 'us-east-1';
const ACCOUNT_ID = '000000000000';
const API_ID = 'local';
const MEMORY_LIMIT_MB = '1024';
/** Connection-level headers: API Gateway does not pass them on, in either direction. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade']);
const MONTHS = 'Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec'.split(' ');
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

interface Route {
  key: string;
  method: string;
  path: string;
}

/**
 * Starts the front on 127.0.0.1.
 *
 * @example
 * const front = await startHttpFront({ handler: createIngestHandler(deps), port: 3000 });
 * console.log(`${front.url}/events`);
 * process.once('SIGTERM', () => void front.close());
 */
export async function startHttpFront(options: HttpFrontOptions): Promise<HttpFront> {
  const routes = (options.routes ?? DEFAULT_ROUTES).map(parseRoute);
  const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  requireInteger('maxBodyBytes', maxBodyBytes, 0, Number.MAX_SAFE_INTEGER - 1);
  const functionTimeoutMs = options.functionTimeoutMs ?? DEFAULT_FUNCTION_TIMEOUT_MS;
  requireInteger('functionTimeoutMs', functionTimeoutMs, 1, MAX_FUNCTION_TIMEOUT_MS);
  const functionName = options.functionName ?? DEFAULT_FUNCTION_NAME;
  const report = (error: unknown) => {
    try {
      (options.onError ?? ((e) => console.error(`http-front ${functionName}:`, e)))(error);
    } catch {
      // A failing error sink must not take a request down with it.
    }
  };
  const day = new Date().toISOString().slice(0, 10).replaceAll('-', '/');
  const logStreamName = `${day}/[$LATEST]${randomBytes(16).toString('hex')}`;
  const inFlight = new Set<Promise<unknown>>();
  let closing = false;

  const invoke = async (
    event: APIGatewayProxyEventV2,
  ): Promise<{ ok: true; result: unknown } | { ok: false }> => {
    const startedAt = Date.now();
    const context = createContext({ functionName, functionTimeoutMs, logStreamName, startedAt });
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<{ ok: false }>((resolve) => {
      timer = setTimeout(() => {
        report(new InvocationTimeoutError(functionTimeoutMs, context.awsRequestId));
        resolve({ ok: false });
      }, functionTimeoutMs);
    });
    // Promise.resolve().then also turns a synchronous throw into a rejection.
    const ran = Promise.resolve()
      .then(() => options.handler(event, context))
      .then(
        (result): { ok: true; result: unknown } => ({ ok: true, result }),
        (error: unknown): { ok: false } => {
          report(error);
          return { ok: false };
        },
      );
    try {
      return await Promise.race([ran, timedOut]);
    } finally {
      clearTimeout(timer);
    }
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const requestId = apiRequestId();
    res.setHeader('apigw-requestid', requestId);
    if (closing) {
      res.setHeader('connection', 'close');
      return send(res, 503, { 'content-type': 'application/json' }, SERVICE_UNAVAILABLE);
    }
    const method = (req.method ?? 'GET').toUpperCase();
    const target = req.url ?? '/';
    const queryAt = target.indexOf('?');
    const rawPath = queryAt === -1 ? target : target.slice(0, queryAt);
    const rawQueryString = queryAt === -1 ? '' : target.slice(queryAt + 1);
    const route = matchRoute(routes, method, rawPath);
    if (route === undefined) {
      // Node discards the unread body itself once the answer is written.
      return send(res, 404, { 'content-type': 'application/json' }, NOT_FOUND);
    }

    const { body, complete } = await readBody(req, maxBodyBytes);
    // The rest of a cut body is never read, so this connection cannot carry another request.
    if (!complete) res.setHeader('connection', 'close');
    const event = toEvent({ req, method, rawPath, rawQueryString, route, requestId, body });

    const work = invoke(event);
    inFlight.add(work);
    let outcome: Awaited<typeof work>;
    try {
      outcome = await work;
    } finally {
      inFlight.delete(work);
    }
    const response = outcome.ok ? toResponse(outcome.result) : undefined;
    if (response === undefined) {
      if (outcome.ok) report(new Error('The handler answered a response API Gateway cannot use'));
      return send(res, 500, { 'content-type': 'application/json' }, INTERNAL_SERVER_ERROR);
    }
    send(res, response.status, response.headers, response.body);
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      // The request broke off (client gone) or the front has a bug: nothing useful to send.
      if (!isClientGone(error)) report(error);
      if (!res.headersSent && !res.destroyed) {
        res.setHeader('connection', 'close');
        send(res, 500, { 'content-type': 'application/json' }, INTERNAL_SERVER_ERROR);
      } else {
        res.destroy();
      }
    });
  });
  const port = await listenOnLoopback(server, options.port);

  let closed: Promise<void> | undefined;
  return {
    url: `http://127.0.0.1:${port}`,
    close() {
      closed ??= (async () => {
        closing = true;
        const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
        server.closeIdleConnections();
        // Each invocation settles by its own timeout, so this wait is bounded.
        while (inFlight.size > 0) await Promise.allSettled([...inFlight]);
        // Lets the answers just produced be written before the sockets go.
        await new Promise((resolve) => setImmediate(resolve));
        server.closeAllConnections();
        await stopped;
      })();
      return closed;
    },
  };
}

/** `METHOD /path`, `ANY /path` or `$default`. */
function parseRoute(key: string): Route {
  if (key === '$default') return { key, method: 'ANY', path: '' };
  const match = /^([A-Z]+) (\/\S*)$/.exec(key);
  if (match?.[1] === undefined || match[2] === undefined) {
    throw new RangeError(`route must be "METHOD /path", "ANY /path" or "$default", got "${key}"`);
  }
  return { key, method: match[1], path: match[2] };
}

/** API Gateway's precedence: an exact method beats ANY, and $default comes last. */
function matchRoute(routes: ReadonlyArray<Route>, method: string, path: string): Route | undefined {
  return (
    routes.find((route) => route.path === path && route.method === method) ??
    routes.find((route) => route.path === path && route.method === 'ANY') ??
    routes.find((route) => route.key === '$default')
  );
}

/**
 * Reads the body up to `maxBytes + 1` bytes. When more is coming it stops there, pauses the
 * request and reports the body incomplete.
 */
function readBody(
  req: IncomingMessage,
  maxBytes: number,
): Promise<{ body: Buffer; complete: boolean }> {
  const limit = maxBytes + 1;
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const finish = (complete: boolean) => {
      req.off('data', onData).off('end', onEnd).off('error', onError).off('close', onClose);
      resolve({ body: Buffer.concat(chunks, size), complete });
    };
    const onData = (chunk: Buffer) => {
      const room = limit - size;
      if (chunk.length < room) {
        chunks.push(chunk);
        size += chunk.length;
        return;
      }
      chunks.push(chunk.subarray(0, room));
      size = limit;
      req.pause();
      finish(req.complete && chunk.length === room);
    };
    const onEnd = () => finish(true);
    const onError = (error: Error) => {
      req.off('data', onData).off('end', onEnd).off('close', onClose);
      reject(error);
    };
    const onClose = () => {
      if (!req.complete)
        onError(Object.assign(new Error('request aborted'), { code: 'ECONNRESET' }));
    };
    req.on('data', onData).on('end', onEnd).on('error', onError).on('close', onClose);
  });
}

function toEvent(input: {
  req: IncomingMessage;
  method: string;
  rawPath: string;
  rawQueryString: string;
  route: Route;
  requestId: string;
  body: Buffer;
}): APIGatewayProxyEventV2 {
  const { req, method, rawPath, rawQueryString, route, requestId, body } = input;
  const now = new Date();
  const sourceIp = (req.socket.remoteAddress ?? '127.0.0.1').replace(/^::ffff:/, '');
  const { headers, cookies } = joinHeaders(req.rawHeaders);
  headers['x-forwarded-for'] =
    headers['x-forwarded-for'] === undefined
      ? sourceIp
      : `${headers['x-forwarded-for']}, ${sourceIp}`;
  headers['x-forwarded-port'] = String(req.socket.localPort ?? '');
  headers['x-forwarded-proto'] = 'http';
  headers['x-amzn-trace-id'] ??=
    `Root=1-${Math.floor(now.getTime() / 1000).toString(16)}-${randomBytes(12).toString('hex')}`;
  const host = headers.host ?? '127.0.0.1';
  const domainName = host.replace(/:\d+$/, '');

  const event: APIGatewayProxyEventV2 = {
    version: '2.0',
    routeKey: route.key,
    rawPath,
    rawQueryString,
    headers,
    requestContext: {
      accountId: ACCOUNT_ID,
      apiId: API_ID,
      domainName,
      domainPrefix: domainName.split('.')[0] ?? domainName,
      http: {
        method,
        path: rawPath,
        protocol: `HTTP/${req.httpVersion}`,
        sourceIp,
        userAgent: headers['user-agent'] ?? '',
      },
      requestId,
      routeKey: route.key,
      stage: '$default',
      time: apiTime(now),
      timeEpoch: now.getTime(),
    },
    isBase64Encoded: false,
  };
  if (cookies.length > 0) event.cookies = cookies;
  const query = parseQuery(rawQueryString);
  if (query !== undefined) event.queryStringParameters = query;
  if (body.length > 0) {
    const text = isTextLike(headers['content-type']) ? decodeUtf8(body) : undefined;
    if (text === undefined) {
      event.body = body.toString('base64');
      event.isBase64Encoded = true;
    } else {
      event.body = text;
    }
  }
  return event;
}

/**
 * Header names lower-cased and duplicates joined with ',' (API Gateway's way), rebuilt from
 * rawHeaders because IncomingMessage.headers drops some duplicates and joins others with ', '.
 * Cookie headers go to `cookies`, one entry per cookie, as API Gateway moves them.
 */
function joinHeaders(rawHeaders: ReadonlyArray<string>): {
  headers: Record<string, string>;
  cookies: string[];
} {
  const headers: Record<string, string> = {};
  const cookies: string[] = [];
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const name = (rawHeaders[i] as string).toLowerCase();
    const value = rawHeaders[i + 1] as string;
    if (HOP_BY_HOP.has(name)) continue;
    if (name === 'cookie') {
      for (const cookie of value.split(';')) {
        const trimmed = cookie.trim();
        if (trimmed !== '') cookies.push(trimmed);
      }
      continue;
    }
    const previous = headers[name];
    headers[name] = previous === undefined ? value : `${previous},${value}`;
  }
  return { headers, cookies };
}

/** Values percent-decoded, duplicates joined with ','; undefined for no query string. */
function parseQuery(raw: string): Record<string, string> | undefined {
  if (raw === '') return undefined;
  const result: Record<string, string> = {};
  for (const pair of raw.split('&')) {
    if (pair === '') continue;
    const equals = pair.indexOf('=');
    const name = percentDecode(equals === -1 ? pair : pair.slice(0, equals));
    const value = equals === -1 ? '' : percentDecode(pair.slice(equals + 1));
    const previous = result[name];
    result[name] = previous === undefined ? value : `${previous},${value}`;
  }
  return result;
}

function percentDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/** text/*, application/json, application/*+json, application/xml, form-urlencoded. */
function isTextLike(contentType: string | undefined): boolean {
  const type = contentType?.split(';')[0]?.trim().toLowerCase() ?? '';
  return (
    type.startsWith('text/') ||
    type === 'application/json' ||
    /^application\/[^/]+\+json$/.test(type) ||
    type === 'application/xml' ||
    type === 'application/x-www-form-urlencoded'
  );
}

/** The text, or undefined when the bytes are not valid UTF-8 (a BOM is kept, byte for byte). */
function decodeUtf8(bytes: Buffer): string | undefined {
  try {
    return utf8.decode(bytes);
  } catch {
    return undefined;
  }
}

/**
 * The handler's result as API Gateway reads it (payload 2.0): a result without `statusCode`
 * is a 200 JSON body; one that breaks the format is undefined (API Gateway answers 500).
 */
function toResponse(
  result: unknown,
): { status: number; headers: Record<string, string | string[]>; body: Buffer } | undefined {
  if (!isPlainObject(result) || result.statusCode === undefined) {
    const json = JSON.stringify(result ?? null);
    return {
      status: 200,
      headers: { 'content-type': 'application/json' },
      body: Buffer.from(json),
    };
  }
  const { statusCode, headers = {}, body = '', isBase64Encoded = false, cookies = [] } = result;
  if (typeof statusCode !== 'number' || !Number.isInteger(statusCode)) return undefined;
  if (statusCode < 100 || statusCode > 599) return undefined;
  if (!isPlainObject(headers) || typeof body !== 'string' || typeof isBase64Encoded !== 'boolean')
    return undefined;
  if (!Array.isArray(cookies) || cookies.some((cookie) => typeof cookie !== 'string'))
    return undefined;
  const written: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers)) {
    const lower = name.toLowerCase();
    if (HOP_BY_HOP.has(lower) || lower === 'content-length') continue;
    if (!['string', 'number', 'boolean'].includes(typeof value)) return undefined;
    written[name] = String(value);
  }
  if (cookies.length > 0) written['set-cookie'] = cookies as string[];
  return {
    status: statusCode,
    headers: written,
    body: isBase64Encoded ? Buffer.from(body, 'base64') : Buffer.from(body, 'utf8'),
  };
}

function send(
  res: ServerResponse,
  status: number,
  headers: Record<string, string | string[]>,
  body: string | Buffer,
): void {
  if (res.destroyed || res.headersSent) return;
  try {
    for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
    res.setHeader('content-length', Buffer.byteLength(body));
    res.writeHead(status).end(body);
  } catch {
    // An invalid header name or value from the handler: API Gateway answers 500 then.
    for (const name of res.getHeaderNames()) {
      if (name !== 'apigw-requestid' && name !== 'connection') res.removeHeader(name);
    }
    res.setHeader('content-type', 'application/json');
    res.setHeader('content-length', Buffer.byteLength(INTERNAL_SERVER_ERROR));
    res.writeHead(500).end(INTERNAL_SERVER_ERROR);
  }
}

function createContext(input: {
  functionName: string;
  functionTimeoutMs: number;
  logStreamName: string;
  startedAt: number;
}): Context {
  const { functionName, functionTimeoutMs, logStreamName, startedAt } = input;
  const unsupported = (name: string) => () => {
    throw new Error(`context.${name}() is not supported: return or throw from the handler`);
  };
  return {
    callbackWaitsForEmptyEventLoop: true,
    functionName,
    functionVersion: '$LATEST',
    invokedFunctionArn: `arn:aws:lambda:${REGION}:${ACCOUNT_ID}:function:${functionName}`,
    memoryLimitInMB: MEMORY_LIMIT_MB,
    awsRequestId: randomUUID(),
    logGroupName: `/aws/lambda/${functionName}`,
    logStreamName,
    getRemainingTimeInMillis: () => Math.max(0, startedAt + functionTimeoutMs - Date.now()),
    done: unsupported('done'),
    fail: unsupported('fail'),
    succeed: unsupported('succeed'),
  };
}

/** API Gateway's request ids look like `JKJaXmPLvHcESHA=`. */
function apiRequestId(): string {
  return randomBytes(10).toString('base64');
}

/** `12/Mar/2020:19:03:58 +0000`, as in requestContext.time. */
function apiTime(date: Date): string {
  const pad = (n: number) => String(n).padStart(2, '0');
  return (
    `${pad(date.getUTCDate())}/${MONTHS[date.getUTCMonth()]}/${date.getUTCFullYear()}:` +
    `${pad(date.getUTCHours())}:${pad(date.getUTCMinutes())}:${pad(date.getUTCSeconds())} +0000`
  );
}

function isClientGone(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === 'ECONNRESET' || code === 'ERR_STREAM_PREMATURE_CLOSE' || code === 'EPIPE';
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function requireInteger(name: string, value: number, min: number, max: number): void {
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new RangeError(`${name} must be an integer from ${min} to ${max}, got ${value}`);
  }
}
