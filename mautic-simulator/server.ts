/**
 * A Mautic 5 simulator: the OAuth2 server and the classic REST API for contacts, companies and
 * segments, on a real HTTP server bound to 127.0.0.1. It is the test double for the whole project
 * and the Mautic of the local stack, written from docs/mautic.md (the § numbers in this folder
 * refer to it) and independent of functions/, so it can judge the client there.
 *
 * Faithful where a client can tell: status codes, bodies byte for byte (PHP's escaped slashes,
 * Symfony's \u0027), the array-or-object serialization of batch responses, and which bodies
 * Mautic ignores (a JSON body sent as text/plain is ignored, as FOSRestBundle does). This file is
 * the HTTP harness (options, request log, scripted answers, faults, rate limit) and Mautic's
 * routing; oauth.ts holds the OAuth2 server, rest.ts the REST controllers (write-rules.ts how
 * they write fields), symfony.ts and php.ts the framework and language mechanics they share.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { listenOnLoopback } from '../infra/local/loopback.ts';
import { readBody } from '../infra/local/read-body.ts';
import {
  authenticate,
  handleAuthorize,
  handleToken,
  issueTokens,
  type OAuthState,
  type SimulatorClient,
} from './oauth.ts';
import { parsePhpQuery } from './php.ts';
import {
  batchItemCount,
  createEntityState,
  type EntityState,
  listRecords,
  routeEntities,
  seedRecord,
} from './rest.ts';
import {
  decodeBody,
  exceptionError,
  HTML,
  isApiPath,
  oauthError,
  type Reply,
  type SimRequest,
} from './symfony.ts';

/** Random failures; the same seed gives the same sequence of decisions, one per request in scope. */
interface SimulatorFaults {
  seed: number;
  /** 0..1: answer 500 (Mautic's generic body), 502 or 503 (a proxy's HTML page). */
  errorRate?: number;
  /** 0..1: destroy the socket without answering. */
  dropRate?: number;
  /**
   * Time to answer (or drop), uniform in [min, max] ms, counted from the request's arrival. A
   * request that passes is applied at once and answered when the time is up.
   */
  latencyMs?: { min: number; max: number };
  /** 'api' (default): only /api/*; 'all': /oauth/* too. */
  scope?: 'api' | 'all';
}

/** How `failAfterApply` spoils the answer to a request it let through. */
type AfterApplyFault = 'drop' | 'garble' | 'gateway_timeout';

/** A scripted answer for `inject`. */
interface InjectedResponse {
  status: number;
  headers?: Record<string, string>;
  body?: string | Buffer;
}

/** One received request. `tokenId` numbers the access token used; the token itself is never kept. */
interface RequestLogEntry {
  method: string;
  path: string;
  /** Raw query string, with access_token, refresh_token, client_secret and code redacted. */
  query: string;
  /** 0 while unanswered and for a dropped request. */
  status: number;
  /** Items in a batch body, or ids in a batch delete. */
  items?: number;
  tokenId?: number;
  /** `now()` when the request was received. */
  at: number;
}

/** Options of `startMauticSimulator`; every one has Mautic's default. */
export interface MauticSimulatorOptions {
  /** Default 0 (ephemeral); the host is always 127.0.0.1. */
  port?: number;
  /** Default: DEFAULT_SIMULATOR_CLIENT only. */
  clients?: SimulatorClient[];
  accessTokenLifetimeSeconds?: number;
  refreshTokenLifetimeSeconds?: number;
  /** Mautic issues no refresh token for client_credentials; true makes it issue one. */
  clientCredentialsRefreshToken?: boolean;
  /** api_batch_max_limit, default 200. */
  batchMaxLimit?: number;
  /** api_rate_limiter_limit per access token and window (default 3600 s); default off. */
  rateLimit?: { limit: number; windowSeconds?: number };
  /** false answers 403 api_disabled on /api and /oauth. */
  apiEnabled?: boolean;
  faults?: SimulatorFaults;
  /** Epoch ms, default Date.now; drives every expiry and rate window. */
  now?: () => number;
}

/** A running simulator. */
export interface MauticSimulator {
  /** Base URL without a trailing slash, e.g. http://127.0.0.1:41234. */
  readonly url: string;
  /** Closes the server and every open socket. */
  close(): Promise<void>;
  /** Stored records of 'contacts' | 'companies' | 'segments' as flat field maps, in id order. */
  records(entity: string): Array<Record<string, unknown> & { id: number }>;
  /** Every request received, in order, token endpoint included (a snapshot). */
  readonly requests: readonly RequestLogEntry[];
  clearRequests(): void;
  /** Replaces the fault settings and restarts the random sequence from their seed. */
  setFaults(faults: SimulatorFaults | undefined): void;
  /** Replaces the rate limit and forgets every counter. */
  setRateLimit(rateLimit: { limit: number; windowSeconds?: number } | undefined): void;
  /**
   * Answers the next `times` (default 1) requests matching `method` (any if absent) and `path`
   * (exact pathname, or a RegExp tested on it) with `response`, before any other processing.
   */
  inject(
    match: { method?: string; path: string | RegExp },
    response: InjectedResponse,
    times?: number,
  ): void;
  /**
   * Handles the next `times` (default 1) requests matching `match` as usual, so Mautic applies
   * them, then fails to tell: 'drop' destroys the connection instead of answering; 'garble'
   * answers as PHP does when a notice is printed before the response (status 200, text/html,
   * the notice then the JSON); 'gateway_timeout' answers as a proxy in front of a slow Mautic
   * does (504 page) while Mautic went on. For "was it applied?" tests (issue 11).
   */
  failAfterApply(
    match: { method?: string; path: string | RegExp },
    how: AfterApplyFault,
    times?: number,
  ): void;
  addClient(client: SimulatorClient): void;
  /** Mints an access and refresh token as a grant would (default client: the first one). */
  issueToken(clientId?: string): { accessToken: string; refreshToken: string };
  /** Every access token issued so far is expired from now on. */
  expireAccessTokens(): void;
  /**
   * Revokes every token issued so far, as an admin deleting the credential's tokens would: access
   * tokens answer 401 "invalid", refresh tokens `invalid_grant`.
   */
  revokeTokens(): void;
  /** Inserts a record directly; an `id` in it is ignored, `dateAdded` (ISO-8601) is kept. */
  seed(entity: string, record: Record<string, unknown>): { id: number };
}

/** The credential every simulator knows unless `clients` says otherwise. */
export const DEFAULT_SIMULATOR_CLIENT: SimulatorClient = {
  clientId: '1_simulator',
  clientSecret: 'simulator-secret',
  grantTypes: ['authorization_code', 'refresh_token', 'client_credentials'],
  redirectUris: ['http://127.0.0.1'],
};

const MAX_BODY_BYTES = 32 * 1024 * 1024;
const API_DISABLED_MESSAGE =
  "API disabled. You need to enable the API in the API settings of Mautic's Configuration.";
const BASIC_AUTH_MESSAGE =
  "Basic Auth disabled. You need to enable HTTP basic auth in the API settings of Mautic's Configuration.";
const SECRET_QUERY_PARAMS = new Set(['access_token', 'refresh_token', 'client_secret', 'code']);
interface State extends OAuthState {
  apiEnabled: boolean;
  rateLimit: { limit: number; windowSeconds: number } | undefined;
  rateWindows: Map<number, { calls: number; resetAt: number }>;
  entities: EntityState;
}

/** noxlogic's fixed window per access token, counted after authentication (§6.3). */
function countCall(state: State, tokenId: number) {
  const limit = state.rateLimit;
  if (limit === undefined) return undefined;
  const nowSeconds = Math.floor(state.now() / 1000);
  let window = state.rateWindows.get(tokenId);
  if (window === undefined || nowSeconds >= window.resetAt) {
    window = { calls: 0, resetAt: nowSeconds + limit.windowSeconds };
    state.rateWindows.set(tokenId, window);
  }
  window.calls += 1;
  const headers = {
    'x-ratelimit-limit': String(limit.limit),
    'x-ratelimit-remaining': String(Math.max(0, limit.limit - window.calls)),
    'x-ratelimit-reset': String(window.resetAt),
  };
  return { limited: window.calls > limit.limit, limit: limit.limit, headers };
}

function handleApi(state: State, req: SimRequest, entry: RequestLogEntry): Reply {
  const auth = authenticate(state, req);
  if ('status' in auth) return auth;
  entry.tokenId = auth.id;
  const rate = countCall(state, auth.id);
  const reply = rate?.limited
    ? {
        status: 429,
        headers: { 'content-type': HTML, 'cache-control': 'no-cache, private' },
        body: `{ "errors": [ { "code": 429, "message": "You exceeded the rate limit of ${rate.limit} API calls per hour.", "details": [] } ]}`,
      }
    : routeEntities(state.entities, req);
  if (rate !== undefined) Object.assign(reply.headers, rate.headers);
  return reply;
}

/** Everything after logging, injection and faults: what Mautic itself would answer. */
function respond(state: State, req: SimRequest, entry: RequestLogEntry): Reply {
  const { path } = req;
  // ApiSubscriber (§1.1) runs before routing and the firewall, for any /api or /oauth URI.
  if (path.includes('/api') || path.includes('/oauth')) {
    if (!state.apiEnabled) return oauthError(403, 'api_disabled', API_DISABLED_MESSAGE);
    if ((req.headers.authorization ?? '').toLowerCase().startsWith('basic')) {
      return oauthError(403, 'access_denied', BASIC_AUTH_MESSAGE);
    }
    // The body listener runs before the firewall: a malformed body beats a missing token.
    if (req.body.kind === 'invalid') return exceptionError(400);
  }
  if (path === '/oauth/v2/token') return handleToken(state, req);
  if (path === '/oauth/v2/authorize') return handleAuthorize(state, req);
  if (isApiPath(path)) return handleApi(state, req, entry);
  if (path.startsWith('/oauth/')) return exceptionError(404, `Requested URL not found: ${path}`);
  return { status: 404, headers: { 'content-type': HTML }, body: 'Not Found' };
}

// ---------------------------------------------------------------------------------------------
// Harness: request log, scripted answers, faults, options, and the public handle

/** mulberry32: tiny, seedable, and good enough to spread fault decisions. */
function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface Injection {
  method: string | undefined;
  path: string | RegExp;
  response: InjectedResponse;
  remaining: number;
}

function redactQuery(query: string): string {
  return query
    .split('&')
    .map((pair) => {
      const name = pair.split('=')[0] ?? '';
      return SECRET_QUERY_PARAMS.has(name) ? `${name}=REDACTED` : pair;
    })
    .join('&');
}

/** What a proxy in front of Mautic answers when PHP is gone. */
function proxyErrorPage(status: 502 | 503 | 504): Reply {
  const title = {
    502: '502 Bad Gateway',
    503: '503 Service Temporarily Unavailable',
    504: '504 Gateway Time-out',
  }[status];
  return {
    status,
    headers: { 'content-type': HTML },
    body: `<html>\r\n<head><title>${title}</title></head>\r\n<body>\r\n<center><h1>${title}</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n`,
  };
}

function check(valid: boolean, message: string): void {
  if (!valid) throw new RangeError(message);
}

const isRate = (value: number | undefined) => value === undefined || (value >= 0 && value <= 1);
const isCount = (value: number) => Number.isInteger(value) && value >= 1;

function addClient(clients: Map<string, SimulatorClient>, client: SimulatorClient): void {
  // FOS looks a public id up as <numeric id>_<random id>; anything else can never authenticate.
  check(
    /^\d+_.+$/.test(client.clientId),
    `clientId must be "<number>_<random>": ${client.clientId}`,
  );
  check(!clients.has(client.clientId), `A client with id "${client.clientId}" already exists`);
  clients.set(client.clientId, {
    ...client,
    grantTypes: [...client.grantTypes],
    redirectUris: [...client.redirectUris],
  });
}

function checkFaults(faults: SimulatorFaults | undefined): void {
  if (faults === undefined) return;
  const latency = faults.latencyMs;
  check(Number.isFinite(faults.seed), 'faults.seed must be a finite number');
  check(isRate(faults.errorRate) && isRate(faults.dropRate), 'fault rates must be within 0..1');
  check(
    latency === undefined || (latency.min >= 0 && latency.max >= latency.min),
    'latencyMs needs 0 <= min <= max',
  );
}

function toRateLimit(rateLimit: { limit: number; windowSeconds?: number } | undefined) {
  if (rateLimit === undefined) return undefined;
  const windowSeconds = rateLimit.windowSeconds ?? 3600;
  check(isCount(rateLimit.limit) && isCount(windowSeconds), 'rateLimit needs positive integers');
  return { limit: rateLimit.limit, windowSeconds };
}

function send(res: ServerResponse, entry: RequestLogEntry, reply: Reply): void {
  entry.status = reply.status;
  if (res.destroyed || res.headersSent) return;
  res.writeHead(reply.status, reply.headers);
  res.end(reply.body);
}

/**
 * Starts a simulator on 127.0.0.1.
 *
 * @example
 * const mautic = await startMauticSimulator();
 * const { accessToken } = mautic.issueToken();
 * await fetch(`${mautic.url}/api/contacts/batch/new`, {
 *   method: 'POST',
 *   headers: { authorization: `Bearer ${accessToken}`, 'content-type': 'application/json' },
 *   body: JSON.stringify([{ email: 'ada@example.com' }]),
 * });
 * await mautic.close();
 */
export async function startMauticSimulator(
  options: MauticSimulatorOptions = {},
): Promise<MauticSimulator> {
  const now = options.now ?? Date.now;
  const state: State = {
    now,
    clients: new Map(),
    accessLifetimeSeconds: options.accessTokenLifetimeSeconds ?? 3600,
    refreshLifetimeSeconds: options.refreshTokenLifetimeSeconds ?? 1_209_600,
    clientCredentialsRefreshToken: options.clientCredentialsRefreshToken ?? false,
    apiEnabled: options.apiEnabled ?? true,
    rateLimit: toRateLimit(options.rateLimit),
    rateWindows: new Map(),
    accessTokens: new Map(),
    refreshTokens: new Map(),
    authCodes: new Map(),
    lastTokenId: 0,
    entities: createEntityState(now, options.batchMaxLimit ?? 200),
  };
  for (const client of options.clients ?? [DEFAULT_SIMULATOR_CLIENT]) {
    addClient(state.clients, client);
  }
  check(
    isCount(state.accessLifetimeSeconds) &&
      isCount(state.refreshLifetimeSeconds) &&
      isCount(state.entities.batchMaxLimit),
    'token lifetimes and batchMaxLimit must be positive integers',
  );
  checkFaults(options.faults);

  let log: RequestLogEntry[] = [];
  let injections: Injection[] = [];
  // ----- failAfterApply (issue 11) -----
  let afterApply: Array<Omit<Injection, 'response'> & { how: AfterApplyFault }> = [];
  const takeAfterApply = (method: string, path: string): AfterApplyFault | undefined => {
    const index = afterApply.findIndex(
      (rule) =>
        (rule.method === undefined || rule.method === method) &&
        (typeof rule.path === 'string' ? rule.path === path : new RegExp(rule.path).test(path)),
    );
    const rule = afterApply[index];
    if (rule === undefined) return undefined;
    rule.remaining -= 1;
    if (rule.remaining === 0) afterApply.splice(index, 1);
    return rule.how;
  };
  // ----- end of failAfterApply -----
  let faults: { config: SimulatorFaults; random: () => number } | undefined;
  const setFaults = (config: SimulatorFaults | undefined) => {
    checkFaults(config);
    faults = config && { config: { ...config }, random: mulberry32(config.seed) };
  };
  setFaults(options.faults);
  // Aborted by close(), so a request held back by latency cannot keep the process alive.
  const closing = new AbortController();

  const takeInjection = (method: string, path: string): Reply | undefined => {
    const index = injections.findIndex((rule) => {
      if (rule.method !== undefined && rule.method !== method) return false;
      if (typeof rule.path === 'string') return rule.path === path;
      rule.path.lastIndex = 0;
      return rule.path.test(path);
    });
    const rule = injections[index];
    if (rule === undefined) return undefined;
    rule.remaining -= 1;
    if (rule.remaining === 0) injections.splice(index, 1);
    const { status, headers, body } = rule.response;
    return { status, headers: { ...headers }, body: body ?? '' };
  };

  // Three draws per request in scope, whatever the rates, so a seed fixes the whole sequence.
  const drawFault = (path: string) => {
    if (faults === undefined) return undefined;
    const { config, random } = faults;
    if (!isApiPath(path) && !(config.scope === 'all' && path.startsWith('/oauth/'))) {
      return undefined;
    }
    const [decision, pick, wait] = [random(), random(), random()];
    const dropRate = config.dropRate ?? 0;
    const { min, max } = config.latencyMs ?? { min: 0, max: 0 };
    const waitMs = min + Math.floor(wait * (max - min + 1));
    if (decision < dropRate) return { waitMs, kind: 'drop' as const };
    if (decision < dropRate + (config.errorRate ?? 0)) {
      const status = ([500, 502, 503] as const)[Math.min(2, Math.floor(pick * 3))] ?? 500;
      return { waitMs, kind: 'error' as const, status };
    }
    return { waitMs, kind: 'pass' as const };
  };

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const arrived = performance.now();
    const { body: raw } = await readBody(req, MAX_BODY_BYTES);
    if (raw.length > MAX_BODY_BYTES) {
      // Answered as a bug is (a generic 500, below); the rest of the body stays unread.
      res.setHeader('connection', 'close');
      throw new RangeError('request body too large');
    }
    const method = (req.method ?? 'GET').toUpperCase();
    const [path = '/', rawQuery = ''] = (req.url ?? '/').split(/\?(.*)/s);
    const request: SimRequest = {
      method,
      path,
      query: parsePhpQuery(rawQuery),
      headers: req.headers,
      body: decodeBody(method, path, req.headers, raw),
    };
    const entry: RequestLogEntry = {
      method,
      path,
      query: redactQuery(rawQuery),
      status: 0,
      at: now(),
    };
    const items = batchItemCount(request);
    if (items !== undefined) entry.items = items;
    log.push(entry);

    const injected = takeInjection(method, path);
    if (injected !== undefined) return send(res, entry, injected);
    const fault = drawFault(path);
    // The latency is the time to answer, counted from the request's arrival, as a real server's
    // is: its own work is part of it. A request that passes is applied first and answered when
    // the latency is over (or at once, if the work took longer); otherwise the 50 ms of a bench's
    // "Mautic at 50 ms per call" would be 50 ms plus the simulator's parsing and writing.
    // False when close() came meanwhile: nothing is answered then.
    const waitOutLatency = async () => {
      const left = arrived + (fault?.waitMs ?? 0) - performance.now();
      if (left > 0) await sleep(left, undefined, { signal: closing.signal }).catch(() => undefined);
      return !closing.signal.aborted;
    };
    if (closing.signal.aborted) return;
    if (fault?.kind === 'drop' || fault?.kind === 'error') {
      if (!(await waitOutLatency())) return;
      if (fault.kind === 'drop') return void req.socket.destroy();
      const reply = fault.status === 500 ? exceptionError(500) : proxyErrorPage(fault.status);
      return send(res, entry, reply);
    }
    const reply = respond(state, request, entry);
    // ----- failAfterApply (issue 11): the work is done, the answer is lost or spoilt -----
    const spoilt = takeAfterApply(method, path);
    if (!(await waitOutLatency())) return;
    if (spoilt === 'drop') return void req.socket.destroy();
    if (spoilt === 'garble') {
      const notice = `<br />\n<b>Notice</b>:  Undefined index: alias in /var/www/html/app/bundles/LeadBundle/Model/FieldModel.php on line 1042<br />\n`;
      return send(res, entry, {
        status: 200,
        headers: { 'content-type': HTML },
        body: Buffer.concat([Buffer.from(notice), Buffer.from(reply.body)]),
      });
    }
    if (spoilt === 'gateway_timeout') return send(res, entry, proxyErrorPage(504));
    // ----- end of failAfterApply -----
    send(res, entry, reply);
  };

  const server = createServer((req, res) => {
    handle(req, res).catch(() => {
      // A bug in the simulator must look like a Mautic 500, not hang the client.
      if (!res.headersSent && !res.destroyed) {
        const reply = exceptionError(500);
        res.writeHead(reply.status, reply.headers).end(reply.body);
      }
    });
  });
  const port = await listenOnLoopback(server, options.port);

  return {
    url: `http://127.0.0.1:${port}`,
    async close() {
      if (closing.signal.aborted) return;
      closing.abort();
      const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await stopped;
    },
    records: (entity) => listRecords(state.entities, entity),
    get requests() {
      return log.map((entry) => ({ ...entry }));
    },
    clearRequests() {
      log = [];
    },
    setFaults,
    setRateLimit(rateLimit) {
      state.rateLimit = toRateLimit(rateLimit);
      state.rateWindows.clear();
    },
    inject(match, response, times = 1) {
      check(isCount(times), `times must be a positive integer, got ${times}`);
      const { status } = response;
      check(Number.isInteger(status) && status >= 200 && status <= 599, `bad status ${status}`);
      const method = match.method?.toUpperCase();
      injections = [...injections, { method, path: match.path, response, remaining: times }];
    },
    failAfterApply(match, how, times = 1) {
      check(isCount(times), `times must be a positive integer, got ${times}`);
      const method = match.method?.toUpperCase();
      afterApply = [...afterApply, { method, path: match.path, how, remaining: times }];
    },
    addClient: (client) => addClient(state.clients, client),
    issueToken(clientId) {
      const client =
        clientId === undefined ? state.clients.values().next().value : state.clients.get(clientId);
      if (client === undefined) throw new TypeError(`Unknown client "${clientId ?? '(none)'}"`);
      const tokens = issueTokens(state, client.clientId, null, true);
      return { accessToken: tokens.accessToken, refreshToken: tokens.refreshToken ?? '' };
    },
    expireAccessTokens() {
      for (const token of state.accessTokens.values()) token.forcedExpired = true;
    },
    revokeTokens() {
      state.accessTokens.clear();
      state.refreshTokens.clear();
    },
    seed: (entity, record) => seedRecord(state.entities, entity, record),
  };
}
