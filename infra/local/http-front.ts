/**
 * A local stand-in for the stack's API Gateway HTTP API, whose routes, `POST /events`,
 * `POST /sources/{name}`, `GET /events` and `GET /events/{eventId}`, lead to the ingest function: each request becomes the payload 2.0 event
 * API Gateway would send, the handler runs with a Lambda Context and timeout, and its answer is
 * written back as API Gateway writes it. Any other method or path answers API Gateway's 404. The local stack
 * (`npm start`), the CLI tests and the ingest benchmark run the real ingest handler behind it.
 *
 * One difference from API Gateway matters: a body over `maxBodyBytes` is cut at
 * `maxBodyBytes + 1` bytes and handed to the handler, which answers its own 413, instead of being
 * refused by the front; the rest is never read and that connection is closed.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type {
  APIGatewayProxyEventV2,
  APIGatewayProxyStructuredResultV2,
  Context,
} from 'aws-lambda';
import { listenOnLoopback } from '../../mautic-simulator/loopback.ts';
import { readBody } from '../../mautic-simulator/read-body.ts';
import { invokeHandler, lambdaContext, newLogStreamName } from './lambda-context.ts';

export type HttpApiHandler = (
  event: APIGatewayProxyEventV2,
  context: Context,
) => Promise<APIGatewayProxyStructuredResultV2>;

export interface HttpFrontOptions {
  handler: HttpApiHandler;
  /** Default 0 (an ephemeral port). Always bound to 127.0.0.1. */
  port?: number;
  /** The handler gets at most this many bytes + 1 of a body. @default 10 MiB, API Gateway's cap */
  maxBodyBytes?: number;
  /**
   * Drives context.getRemainingTimeInMillis(). As in Lambda, a handler still running at the
   * timeout is a function error: the request answers 500. @default 30_000
   */
  functionTimeoutMs?: number;
  /**
   * Called with what a handler threw, an InvocationTimeoutError, or a response API Gateway
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
/** Connection-level headers: API Gateway does not pass them on. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade']);
const MONTHS = 'Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec'.split(' ');
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * Starts the front on 127.0.0.1.
 *
 * @example
 * const front = await startHttpFront({ handler: ingestHandler, port: 3000 });
 * console.log(`${front.url}/events`);
 * process.once('SIGTERM', () => void front.close());
 */
export async function startHttpFront(options: HttpFrontOptions): Promise<HttpFront> {
  const { maxBodyBytes, functionTimeoutMs } = limitsOf(options);
  const report = (error: unknown) => {
    try {
      (options.onError ?? ((e) => console.error('http-front ingest:', e)))(error);
    } catch {
      // A failing error sink must not take a request down with it.
    }
  };
  // One execution environment, so one log stream.
  const logStreamName = newLogStreamName();
  const inFlight = new Set<Promise<unknown>>();
  let closing = false;

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const requestId = randomBytes(10).toString('base64');
    res.setHeader('apigw-requestid', requestId);
    if (closing) {
      res.setHeader('connection', 'close');
      return send(res, 503, { 'content-type': 'application/json' }, SERVICE_UNAVAILABLE);
    }
    const [rawPath = '/', rawQueryString = ''] = (req.url ?? '/').split(/\?(.*)/s);
    const route = routeOf(req.method ?? '', rawPath);
    if (route === undefined) {
      // Node discards the unread body itself once the answer is written.
      return send(res, 404, { 'content-type': 'application/json' }, NOT_FOUND);
    }

    const { body, complete } = await readBody(req, maxBodyBytes);
    if (!complete) res.setHeader('connection', 'close');
    const event = toEvent(req, route, rawPath, rawQueryString, requestId, body);
    const context = lambdaContext('ingest', functionTimeoutMs, { logStreamName });
    const work = invokeHandler(options.handler, event, context, functionTimeoutMs);
    inFlight.add(work);
    const outcome = await work.finally(() => inFlight.delete(work));
    if (!outcome.ok) report(outcome.error);
    else if (!isUsable(outcome.result)) report(new Error('The handler answered no usable result'));
    if (!outcome.ok || !isUsable(outcome.result)) {
      return send(res, 500, { 'content-type': 'application/json' }, INTERNAL_SERVER_ERROR);
    }
    sendResult(res, outcome.result);
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      // The request broke off (client gone), the handler's headers were invalid, or the front
      // has a bug: API Gateway would answer 500.
      if (!isClientGone(error)) report(error);
      answerBroken(res);
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

/** A route of the stack's HTTP API (infra/aws/api.ts), and the path parameters it takes. */
interface Route {
  routeKey: string;
  pathParameters?: Record<string, string>;
}

/**
 * The route a request to `rawPath` takes, or undefined (API Gateway's 404). API Gateway decodes
 * the path before it matches routes, so a percent-encoded name arrives decoded, as here.
 */
function routeOf(method: string, rawPath: string): Route | undefined {
  if (rawPath === '/events' && (method === 'POST' || method === 'GET'))
    return { routeKey: `${method} /events` };
  const [, parent, parameter] = /^\/(sources|events)\/([^/]+)$/.exec(rawPath) ?? [];
  if (parameter === undefined) return undefined;
  let decoded = parameter;
  try {
    decoded = decodeURIComponent(parameter);
  } catch {
    // A malformed escape is passed on as it came: it names no source, and no event.
  }
  if (parent === 'sources' && method === 'POST')
    return { routeKey: 'POST /sources/{name}', pathParameters: { name: decoded } };
  if (parent === 'events' && method === 'GET')
    return { routeKey: 'GET /events/{eventId}', pathParameters: { eventId: decoded } };
  return undefined;
}

/** The payload 2.0 event API Gateway builds for this request. */
function toEvent(
  req: IncomingMessage,
  route: Route,
  rawPath: string,
  rawQueryString: string,
  requestId: string,
  body: Buffer,
): APIGatewayProxyEventV2 {
  const now = new Date();
  const sourceIp = (req.socket.remoteAddress ?? '127.0.0.1').replace(/^::ffff:/, '');
  // Names lower-cased and duplicates joined with ',' (API Gateway's way), from rawHeaders because
  // IncomingMessage.headers drops some duplicates and joins others with ', '.
  // Cookie headers go to `cookies`, one entry per cookie, as API Gateway moves them.
  const headers: Record<string, string> = {};
  const cookies: string[] = [];
  for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) {
    const name = (req.rawHeaders[i] as string).toLowerCase();
    const value = req.rawHeaders[i + 1] as string;
    if (name === 'cookie')
      cookies.push(
        ...value
          .split(';')
          .map((c) => c.trim())
          .filter(Boolean),
      );
    else if (!HOP_BY_HOP.has(name)) join(headers, name, value);
  }
  join(headers, 'x-forwarded-for', sourceIp, ', ');
  headers['x-forwarded-proto'] = 'http';
  const domainName = (headers.host ?? '127.0.0.1').replace(/:\d+$/, '');
  const pad = (n: number) => String(n).padStart(2, '0');
  const event: APIGatewayProxyEventV2 = {
    version: '2.0',
    routeKey: route.routeKey,
    rawPath,
    rawQueryString,
    headers,
    requestContext: {
      accountId: '000000000000',
      apiId: 'local',
      domainName,
      domainPrefix: domainName.split('.')[0] ?? domainName,
      http: {
        method: req.method ?? 'POST',
        path: rawPath,
        protocol: `HTTP/${req.httpVersion}`,
        sourceIp,
        userAgent: headers['user-agent'] ?? '',
      },
      requestId,
      routeKey: route.routeKey,
      stage: '$default',
      // `12/Mar/2020:19:03:58 +0000`
      time:
        `${pad(now.getUTCDate())}/${MONTHS[now.getUTCMonth()]}/${now.getUTCFullYear()}:` +
        `${pad(now.getUTCHours())}:${pad(now.getUTCMinutes())}:${pad(now.getUTCSeconds())} +0000`,
      timeEpoch: now.getTime(),
    },
    isBase64Encoded: false,
  };
  if (cookies.length > 0) event.cookies = cookies;
  if (route.pathParameters !== undefined) event.pathParameters = route.pathParameters;
  if (rawQueryString !== '') {
    const query: Record<string, string> = {};
    for (const [name, value] of new URLSearchParams(rawQueryString)) join(query, name, value);
    event.queryStringParameters = query;
  }
  if (body.length > 0) {
    // API Gateway passes text-like bodies that are valid UTF-8 as text, anything else as base64.
    const text = isTextLike(headers['content-type']) ? decodeUtf8(body) : undefined;
    event.body = text ?? body.toString('base64');
    event.isBase64Encoded = text === undefined;
  }
  return event;
}

/** Sets `name`, or appends to it with `separator` (API Gateway joins duplicates with ','). */
function join(values: Record<string, string>, name: string, value: string, separator = ','): void {
  const previous = values[name];
  values[name] = previous === undefined ? value : `${previous}${separator}${value}`;
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
 * A structured payload 2.0 result API Gateway can write. The ingest handler always answers one;
 * API Gateway's reading of other results (no statusCode: a 200 JSON body) is left out.
 */
function isUsable(
  result: unknown,
): result is APIGatewayProxyStructuredResultV2 & { statusCode: number } {
  if (typeof result !== 'object' || result === null) return false;
  const {
    statusCode,
    headers = {},
    body = '',
    isBase64Encoded = false,
  } = result as Record<string, unknown>;
  return (
    Number.isInteger(statusCode) &&
    (statusCode as number) >= 100 &&
    (statusCode as number) <= 599 &&
    typeof headers === 'object' &&
    headers !== null &&
    Object.values(headers).every((value) =>
      ['string', 'number', 'boolean'].includes(typeof value),
    ) &&
    typeof body === 'string' &&
    typeof isBase64Encoded === 'boolean'
  );
}

/** The body cap (API Gateway's 10 MB) and the function's timeout (30 s), checked. */
function limitsOf(options: HttpFrontOptions): { maxBodyBytes: number; functionTimeoutMs: number } {
  const maxBodyBytes = options.maxBodyBytes ?? 10 * 1024 * 1024;
  const functionTimeoutMs = options.functionTimeoutMs ?? 30_000;
  for (const [name, value] of Object.entries({ maxBodyBytes, functionTimeoutMs })) {
    if (!Number.isSafeInteger(value) || value < 1) {
      throw new RangeError(`${name} must be a positive integer, got ${value}`);
    }
  }
  return { maxBodyBytes, functionTimeoutMs };
}

/** The handler's answer, as API Gateway writes it. */
function sendResult(
  res: ServerResponse,
  result: APIGatewayProxyStructuredResultV2 & { statusCode: number },
): void {
  const { statusCode, headers = {}, body = '', isBase64Encoded } = result;
  const written: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) written[name] = String(value);
  send(res, statusCode, written, Buffer.from(body, isBase64Encoded ? 'base64' : 'utf8'));
}

/** API Gateway's 500 for a request that broke; once an answer was begun, the connection goes. */
function answerBroken(res: ServerResponse): void {
  if (res.headersSent || res.destroyed) {
    res.destroy();
    return;
  }
  for (const name of res.getHeaderNames()) {
    if (name !== 'apigw-requestid') res.removeHeader(name);
  }
  res.setHeader('connection', 'close');
  send(res, 500, { 'content-type': 'application/json' }, INTERNAL_SERVER_ERROR);
}

function send(
  res: ServerResponse,
  status: number,
  headers: Record<string, string>,
  body: string | Buffer,
): void {
  if (res.destroyed || res.headersSent) return;
  for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
  res.setHeader('content-length', Buffer.byteLength(body));
  res.writeHead(status).end(body);
}

function isClientGone(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === 'ECONNRESET' || code === 'ERR_STREAM_PREMATURE_CLOSE' || code === 'EPIPE';
}
