import { randomBytes, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Route } from './console-routes.ts';

export interface ConsoleServer {
  /** The URL to open, with the token: printed once, never logged elsewhere. */
  url: string;
  port: number;
  close(): Promise<void>;
}

const COOKIE = 'mautic_relay_console';
/** The header a state-changing request carries: a page of another origin cannot set it. */
export const TOKEN_HEADER = 'x-console-token';
const MAX_BODY_BYTES = 1_048_576;

/** The page's files, served from the project itself: no CDN, so it works offline. */
const ASSETS: Record<string, { file: string; type: string }> = {
  '/': { file: 'index.html', type: 'text/html; charset=utf-8' },
  '/console.js': { file: 'console.js', type: 'text/javascript; charset=utf-8' },
  '/console-page.js': { file: 'console-page.js', type: 'text/javascript; charset=utf-8' },
  '/console-events.js': { file: 'console-events.js', type: 'text/javascript; charset=utf-8' },
  '/console.css': { file: 'console.css', type: 'text/css; charset=utf-8' },
};

const HEADERS = {
  'cache-control': 'no-store',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'",
};

/**
 * The console's server, on 127.0.0.1 and a free port only. The rules, each tested:
 * - a Host other than 127.0.0.1:PORT or localhost:PORT is refused (a DNS rebinding page names
 *   its own host), so nothing but this machine's browser reaches it;
 * - the printed URL's token, once given, becomes an HttpOnly, SameSite=Strict cookie, and every
 *   other request without it is refused;
 * - a state-changing request is a POST with JSON and carries the token in a header too, which a
 *   page of another origin cannot send (CSRF); a route's other methods are refused with 405.
 */
export async function startConsoleServer(routes: Record<string, Route>): Promise<ConsoleServer> {
  const token = randomBytes(32).toString('base64url');
  const assets = Object.fromEntries(
    Object.entries(ASSETS).map(([path, { file, type }]) => [
      path,
      { body: readFileSync(new URL(`./assets/${file}`, import.meta.url)), type },
    ]),
  );
  let port = 0;
  const server: Server = createServer((req, res) => {
    handle(req, res, { token, port, routes, assets }).catch((error: unknown) => {
      json(res, 500, { error: error instanceof Error ? error.message : String(error) });
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  port = typeof address === 'object' && address ? address.port : 0;
  return {
    url: `http://127.0.0.1:${port}/?token=${token}`,
    port,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

interface Served {
  token: string;
  port: number;
  routes: Record<string, Route>;
  assets: Record<string, { body: Buffer; type: string }>;
}

async function handle(req: IncomingMessage, res: ServerResponse, served: Served): Promise<void> {
  const { token, port, routes, assets } = served;
  const host = req.headers.host ?? '';
  if (host !== `127.0.0.1:${port}` && host !== `localhost:${port}`)
    return json(res, 403, { error: 'This console answers only on 127.0.0.1 and localhost.' });
  const url = new URL(req.url ?? '/', `http://${host}`);
  const given = url.searchParams.get('token');
  if (url.pathname === '/' && given !== null && req.method === 'GET') {
    if (!same(given, token))
      return json(res, 401, { error: 'Not the token this console printed.' });
    // The token leaves the address bar and the history at once: the cookie carries it now.
    res.writeHead(303, {
      ...HEADERS,
      location: '/',
      'set-cookie': `${COOKIE}=${token}; HttpOnly; SameSite=Strict; Path=/`,
    });
    return void res.end();
  }
  if (!same(cookieOf(req), token))
    return json(res, 401, {
      error: 'Open the console with the URL it printed (it carries a token).',
    });
  const route = routes[url.pathname];
  if (route) {
    if (req.method !== route.method) {
      res.setHeader('allow', route.method);
      return json(res, 405, { error: `${url.pathname} takes ${route.method} only` });
    }
    if (route.method === 'POST') return post(req, res, route, served);
    const answer = await route.handle(url.searchParams, {});
    return json(res, answer.status, answer.body);
  }
  if (url.pathname === '/api/session' && req.method === 'GET')
    return json(res, 200, { headerName: TOKEN_HEADER, token });
  const asset = assets[url.pathname];
  if (!asset || req.method !== 'GET') return json(res, 404, { error: 'not found' });
  res.writeHead(200, { ...HEADERS, 'content-type': asset.type }).end(asset.body);
}

/** A state-changing request: the token header and a JSON body, or nothing is done. */
async function post(req: IncomingMessage, res: ServerResponse, route: Route, served: Served) {
  const header = req.headers[TOKEN_HEADER];
  if (typeof header !== 'string' || !same(header, served.token))
    return json(res, 403, { error: `A change needs the ${TOKEN_HEADER} header.` });
  if (!String(req.headers['content-type']).startsWith('application/json'))
    return json(res, 415, { error: 'Send JSON.' });
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) return json(res, 413, { error: 'At most 1 MiB.' });
    chunks.push(chunk);
  }
  let body: unknown;
  try {
    body = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}');
  } catch {
    return json(res, 400, { error: 'Not JSON.' });
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    return json(res, 400, { error: 'Send a JSON object.' });
  const answer = await route.handle(new URLSearchParams(), body as Record<string, unknown>);
  return json(res, answer.status, answer.body);
}

function cookieOf(req: IncomingMessage): string {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const [name, ...value] = part.trim().split('=');
    if (name === COOKIE) return value.join('=');
  }
  return '';
}

/** In constant time, so the token cannot be guessed a character at a time. */
function same(given: string, token: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(token);
  return a.length === b.length && timingSafeEqual(a, b);
}

function json(res: ServerResponse, status: number, body: unknown): void {
  if (res.headersSent) return void res.end();
  res
    .writeHead(status, { ...HEADERS, 'content-type': 'application/json; charset=utf-8' })
    .end(JSON.stringify(body));
}
