/**
 * A Mautic 5 simulator: the OAuth2 server and the classic REST API for contacts, companies and
 * segments, on a real HTTP server bound to 127.0.0.1. It is the test double for the whole project
 * and the Mautic of the local stack, written from ../../shared/reference/mautic-api.md (section
 * numbers below refer to it) and independent of functions/, so it can judge the client there.
 *
 * Faithful where a client can tell: status codes, bodies byte for byte (PHP's escaped slashes,
 * Symfony's \u0027), the array-or-object serialization of batch responses, and which bodies
 * Mautic ignores (a JSON body sent as text/plain is ignored, as FOSRestBundle does). This file
 * holds the OAuth2 half and the HTTP harness; mautic-simulator-rest.ts the REST half.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { listenOnLoopback } from './loopback.ts';
import {
  batchItemCount,
  bodyParams,
  createEntityState,
  decodeBody,
  type EntityState,
  exceptionError,
  HTML,
  isApiPath,
  listRecords,
  oauthError,
  parsePhpQuery,
  phpEmpty,
  phpJsonEncode,
  phpUrldecode,
  type Reply,
  routeEntities,
  type SimRequest,
  scalar,
  seedRecord,
  truthy,
} from './mautic-simulator-rest.ts';

/** The grants Mautic supports (§1.3). */
type GrantType = 'authorization_code' | 'refresh_token' | 'client_credentials';

/** An API credential as Mautic stores it; `clientId` is the public id `<numericId>_<randomId>`. */
export interface SimulatorClient {
  clientId: string;
  clientSecret: string;
  grantTypes: GrantType[];
  redirectUris: string[];
}

/** Random failures; the same seed gives the same sequence of decisions, one per request in scope. */
interface SimulatorFaults {
  seed: number;
  /** 0..1: answer 500 (Mautic's generic body), 502 or 503 (a proxy's HTML page). */
  errorRate?: number;
  /** 0..1: destroy the socket without answering. */
  dropRate?: number;
  /** Delay before answering (or dropping), uniform in [min, max] ms. */
  latencyMs?: { min: number; max: number };
  /** 'api' (default): only /api/*; 'all': /oauth/* too. */
  scope?: 'api' | 'all';
}

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
  addClient(client: SimulatorClient): void;
  /** Mints an access and refresh token as a grant would (default client: the first one). */
  issueToken(clientId?: string): { accessToken: string; refreshToken: string };
  /** Every access token issued so far is expired from now on. */
  expireAccessTokens(): void;
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

const AUTH_CODE_LIFETIME_MS = 30_000;
const MAX_BODY_BYTES = 32 * 1024 * 1024;
const API_DISABLED_MESSAGE =
  "API disabled. You need to enable the API in the API settings of Mautic's Configuration.";
const BASIC_AUTH_MESSAGE =
  "Basic Auth disabled. You need to enable HTTP basic auth in the API settings of Mautic's Configuration.";
const MISSING_TOKEN_MESSAGE =
  'The request is missing a required parameter, includes an unsupported parameter or parameter value, repeats the same parameter, uses more than one method for including an access token, or is otherwise malformed.';
// oauth2-php's GRANT_TYPE_REGEXP: the syntax check that runs before client authentication.
const GRANT_TYPE_PATTERN =
  /^(authorization_code|token|password|client_credentials|refresh_token|https?:\/\/.+|urn:.+)$/;
const SECRET_QUERY_PARAMS = new Set(['access_token', 'refresh_token', 'client_secret', 'code']);

interface AccessToken {
  id: number;
  clientId: string;
  expiresAt: number;
  forcedExpired: boolean;
}

interface Grant {
  clientId: string;
  expiresAt: number;
  scope: string | null;
}

interface AuthCode extends Grant {
  redirectUri: string;
}

interface State {
  now: () => number;
  clients: Map<string, SimulatorClient>;
  accessLifetimeSeconds: number;
  refreshLifetimeSeconds: number;
  clientCredentialsRefreshToken: boolean;
  apiEnabled: boolean;
  rateLimit: { limit: number; windowSeconds: number } | undefined;
  rateWindows: Map<number, { calls: number; resetAt: number }>;
  accessTokens: Map<string, AccessToken>;
  refreshTokens: Map<string, Grant>;
  authCodes: Map<string, AuthCode>;
  lastTokenId: number;
  entities: EntityState;
}

// ---------------------------------------------------------------------------------------------
// OAuth2 mechanics from oauth2-php and PHP: tokens, redirect URIs

/** PHP's urlencode (RFC 1738 flavour used by http_build_query: spaces become `+`). */
function phpUrlencode(text: string): string {
  let out = '';
  for (const byte of Buffer.from(text, 'utf8')) {
    const char = String.fromCharCode(byte);
    if (/[A-Za-z0-9_.-]/.test(char)) out += char;
    else if (byte === 0x20) out += '+';
    else out += `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

/** The parts of parse_url that matter here; absent parts are undefined, as PHP leaves them unset. */
interface ParsedUrl {
  scheme?: string;
  host?: string;
  port?: string;
  path?: string;
  query?: string;
  fragment?: string;
  userInfo?: string;
}

const URL_PATTERN =
  /^(?:([A-Za-z][A-Za-z0-9+.-]*):)?(?:\/\/(?:([^@/?#]*)@)?(\[[^\]]*\]|[^:/?#]*)(?::(\d*))?)?([^?#]*)(?:\?([^#]*))?(?:#([\s\S]*))?$/;

/** parse_url, close enough for redirect URIs. */
function parseUrl(uri: string): ParsedUrl {
  const match = URL_PATTERN.exec(uri);
  const parsed: ParsedUrl = {};
  if (!match) return parsed;
  const [, scheme, userInfo, host, port, path, query, fragment] = match;
  if (scheme !== undefined) parsed.scheme = scheme;
  if (userInfo !== undefined) parsed.userInfo = userInfo;
  if (host !== undefined && host !== '') parsed.host = host;
  if (port !== undefined && port !== '') parsed.port = port;
  if (path !== undefined && path !== '') parsed.path = path;
  if (query !== undefined) parsed.query = query;
  if (fragment !== undefined) parsed.fragment = fragment;
  return parsed;
}

/**
 * oauth2-php's buildUri: appends `params` (null values skipped, as http_build_query does) to the
 * query of `uri`, keeping any query it already had.
 */
function buildRedirectUri(uri: string, params: Array<[string, string | null]>): string {
  const parsed = parseUrl(uri);
  const added = params
    .filter((entry): entry is [string, string] => entry[1] !== null)
    .map(([key, value]) => `${phpUrlencode(key)}=${phpUrlencode(value)}`)
    .join('&');
  const query = parsed.query !== undefined ? `${parsed.query}&${added}` : added;
  return (
    (parsed.scheme !== undefined ? `${parsed.scheme}://` : '') +
    (parsed.userInfo !== undefined ? `${parsed.userInfo}@` : '') +
    (parsed.host ?? '') +
    (parsed.port !== undefined ? `:${parsed.port}` : '') +
    (parsed.path ?? '') +
    `?${query}` +
    (parsed.fragment !== undefined ? `#${parsed.fragment}` : '')
  );
}

/**
 * oauth2-php's validateRedirectUri: a case-insensitive prefix of a registered URI, on the same
 * host and port (the prefix alone would let http://127.0.0.1.evil.example through), and no
 * `/../` or `/./` segment in the decoded path.
 */
function isRedirectUriAllowed(input: string, registered: readonly string[]): boolean {
  if (input === '' || registered.length === 0) return false;
  const parsed = parseUrl(input);
  if (parsed.path !== undefined && /\/\.\.?(\/|$)/.test(phpUrldecode(parsed.path))) return false;
  return registered.some((stored) => {
    if (input.slice(0, stored.length).toLowerCase() !== stored.toLowerCase()) return false;
    const storedParsed = parseUrl(stored);
    return (
      (parsed.host ?? '').toLowerCase() === (storedParsed.host ?? '').toLowerCase() &&
      (parsed.port ?? '') === (storedParsed.port ?? '')
    );
  });
}

/** FILTER_SANITIZE_URL: drops every character that may not appear in a URL. */
function sanitizeUrl(text: string): string {
  return text.replace(/[^A-Za-z0-9$\-_.+!*'(),{}|\\^~[\]`<>#%";/?:@&=]/g, '');
}

/**
 * oauth2-php's genAccessToken: URL-safe base64, unpadded, of the hex SHA-256 of random bytes,
 * so 86 characters of [A-Za-z0-9_-]. Auth codes use the same generator.
 */
function generateOAuthToken(): string {
  const hexDigest = createHash('sha256').update(randomBytes(100)).digest('hex');
  return Buffer.from(hexDigest, 'latin1').toString('base64url');
}

// ---------------------------------------------------------------------------------------------
// OAuth2: token endpoint (§1), authorize endpoint (§2), bearer checks (§3)

function issueTokens(state: State, clientId: string, scope: string | null, withRefresh: boolean) {
  const now = state.now();
  const accessToken = generateOAuthToken();
  state.lastTokenId += 1;
  state.accessTokens.set(accessToken, {
    id: state.lastTokenId,
    clientId,
    expiresAt: now + state.accessLifetimeSeconds * 1000,
    forcedExpired: false,
  });
  let refreshToken: string | undefined;
  if (withRefresh) {
    refreshToken = generateOAuthToken();
    const expiresAt = now + state.refreshLifetimeSeconds * 1000;
    state.refreshTokens.set(refreshToken, { clientId, expiresAt, scope });
  }
  return { accessToken, refreshToken };
}

type GrantResult = Reply | { scope: string | null; withRefresh: boolean; consume?: () => void };

function handleToken(state: State, req: SimRequest): Reply {
  if (req.method !== 'GET' && req.method !== 'POST') return exceptionError(405);
  const input = bodyParams(req.method === 'POST' ? req.body : { kind: 'form', params: req.query });
  const invalid = (type: string, message: string) => oauthError(400, type, message);

  const grantType = scalar(input.grant_type);
  if (grantType === undefined || !GRANT_TYPE_PATTERN.test(grantType)) {
    return invalid('invalid_request', 'Invalid grant_type parameter or parameter missing');
  }
  if (phpEmpty(input.client_id)) {
    return invalid('invalid_client', 'Client id was not found in the headers or body');
  }
  const client =
    typeof input.client_id === 'string' ? state.clients.get(input.client_id) : undefined;
  if (client === undefined || input.client_secret !== client.clientSecret) {
    return invalid('invalid_client', 'The client credentials are invalid');
  }
  if (!client.grantTypes.some((allowed) => allowed === grantType)) {
    return invalid('unauthorized_client', 'The grant type is unauthorized for this client_id');
  }

  let grant: GrantResult;
  if (grantType === 'authorization_code') grant = grantAuthCode(state, client, input);
  else if (grantType === 'refresh_token') grant = grantRefreshToken(state, client, input);
  else grant = { scope: null, withRefresh: state.clientCredentialsRefreshToken };
  if ('status' in grant) return grant;

  // Mautic configures no supported scopes, so any non-empty scope fails, after the grant checks.
  if (truthy(scalar(input.scope))) {
    return invalid('invalid_scope', 'An unsupported scope was requested.');
  }
  const tokens = issueTokens(state, client.clientId, grant.scope, grant.withRefresh);
  grant.consume?.();
  return {
    status: 200,
    headers: {
      'content-type': 'application/json',
      'cache-control': 'no-store',
      pragma: 'no-cache',
    },
    body: phpJsonEncode({
      access_token: tokens.accessToken,
      expires_in: state.accessLifetimeSeconds,
      token_type: 'bearer',
      scope: grant.scope,
      refresh_token: tokens.refreshToken,
    }),
  };
}

function grantAuthCode(
  state: State,
  client: SimulatorClient,
  input: Record<string, unknown>,
): GrantResult {
  const code = scalar(input.code);
  if (!truthy(code)) {
    return oauthError(400, 'invalid_request', 'Missing parameter. "code" is required');
  }
  const redirectUri = sanitizeUrl(scalar(input.redirect_uri) ?? '');
  if (!truthy(redirectUri)) {
    return oauthError(400, 'invalid_request', 'The redirect URI parameter is required.');
  }
  const stored = state.authCodes.get(code);
  if (stored === undefined || stored.clientId !== client.clientId) {
    return oauthError(400, 'invalid_grant', "Code doesn't exist or is invalid for the client");
  }
  if (!isRedirectUriAllowed(redirectUri, [stored.redirectUri])) {
    return oauthError(400, 'redirect_uri_mismatch', 'The redirect URI is missing or do not match');
  }
  if (state.now() > stored.expiresAt) {
    return oauthError(400, 'invalid_grant', 'The authorization code has expired');
  }
  return { scope: stored.scope, withRefresh: true, consume: () => state.authCodes.delete(code) };
}

function grantRefreshToken(
  state: State,
  client: SimulatorClient,
  input: Record<string, unknown>,
): GrantResult {
  const token = scalar(input.refresh_token);
  if (!truthy(token)) {
    return oauthError(400, 'invalid_request', 'No "refresh_token" parameter found');
  }
  const stored = state.refreshTokens.get(token);
  if (stored === undefined || stored.clientId !== client.clientId) {
    return oauthError(400, 'invalid_grant', 'Invalid refresh token');
  }
  if (state.now() > stored.expiresAt) {
    return oauthError(400, 'invalid_grant', 'Refresh token has expired');
  }
  // The old refresh token dies with the new one's birth; the old access token lives on (§1.6).
  return {
    scope: stored.scope,
    withRefresh: true,
    consume: () => state.refreshTokens.delete(token),
  };
}

/** Mautic approves at once here: no login form, as for a user who already authorized the client. */
function handleAuthorize(state: State, req: SimRequest): Reply {
  if (req.method !== 'GET' && req.method !== 'POST') return exceptionError(405);
  const param = (name: string) => scalar(req.query.get(name));
  const clientId = param('client_id');
  const client = clientId === undefined ? undefined : state.clients.get(clientId);
  if (client === undefined) return exceptionError(404, 'Client not found.');

  const mismatch = (message: string) => oauthError(400, 'redirect_uri_mismatch', message);
  const requested = sanitizeUrl(param('redirect_uri') ?? '');
  if (requested === '') {
    if (client.redirectUris.length === 0) {
      return mismatch('No redirect URL was supplied or registered.');
    }
    if (client.redirectUris.length > 1) {
      return mismatch('No redirect URL was supplied and more than one is registered.');
    }
    return mismatch('The redirect URI is mandatory and was not supplied.');
  }
  if (!isRedirectUriAllowed(requested, client.redirectUris)) {
    return mismatch('The redirect URI provided does not match registered URI(s).');
  }

  const stateParam = param('state');
  const echoedState = truthy(stateParam) ? stateParam : null;
  const responseType = param('response_type');
  if (!truthy(responseType)) {
    return redirect(requested, [
      ['error', 'invalid_request'],
      ['error_description', 'Invalid response type.'],
      ['state', echoedState],
    ]);
  }
  if (responseType !== 'code') {
    return redirect(requested, [
      ['error', 'unsupported_response_type'],
      ['state', echoedState],
    ]);
  }
  const scope = param('scope');
  if (truthy(scope)) {
    return redirect(requested, [
      ['error', 'invalid_scope'],
      ['error_description', 'An unsupported scope was requested.'],
      ['state', echoedState],
    ]);
  }
  const code = generateOAuthToken();
  state.authCodes.set(code, {
    clientId: client.clientId,
    redirectUri: requested,
    expiresAt: state.now() + AUTH_CODE_LIFETIME_MS,
    scope: scope ?? null,
  });
  return redirect(requested, [
    ['state', stateParam ?? null],
    ['code', code],
  ]);
}

function redirect(uri: string, params: Array<[string, string | null]>): Reply {
  return {
    status: 302,
    headers: {
      location: buildRedirectUri(uri, params),
      'content-type': HTML,
      'cache-control': 'no-cache, private',
    },
    body: '',
  };
}

/** oauth2-php's getBearerToken + verifyAccessToken, behind FOS's listener (§3). */
function authenticate(state: State, req: SimRequest): Reply | { id: number } {
  const tokens: string[] = [];
  const header = req.headers.authorization;
  const fromHeader = header === undefined ? null : /Bearer\s(\S+)/.exec(header);
  if (fromHeader?.[1] !== undefined) tokens.push(fromHeader[1]);
  // oauth2-php takes the token out of the request, so the controllers never see it.
  if (req.body.kind === 'form' && req.method !== 'GET' && req.body.params.has('access_token')) {
    tokens.push(scalar(req.body.params.get('access_token')) ?? '');
    req.body.params.delete('access_token');
  }
  const fromQuery = scalar(req.query.get('access_token'));
  if (truthy(fromQuery)) {
    tokens.push(fromQuery);
    req.query.delete('access_token');
  }

  // "Only one method may be used…" is thrown outside FOS's catch, so it ends as a generic 500.
  if (tokens.length > 1) return exceptionError(500);
  const token = tokens[0];
  if (token === undefined) return oauthError(401, 'access_denied', 'API authorization denied.');
  if (!truthy(token)) return oauthError(400, 'invalid_request', MISSING_TOKEN_MESSAGE);
  const stored = state.accessTokens.get(token);
  if (stored === undefined) {
    return oauthError(401, 'invalid_grant', 'The access token provided is invalid.');
  }
  if (stored.forcedExpired || state.now() > stored.expiresAt) {
    return oauthError(401, 'invalid_grant', 'The access token provided has expired.');
  }
  return { id: stored.id };
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
function proxyErrorPage(status: 502 | 503): Reply {
  const title = status === 502 ? '502 Bad Gateway' : '503 Service Temporarily Unavailable';
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

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) reject(new Error('request body too large'));
      else chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
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
    const raw = await readBody(req);
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
    if (fault !== undefined && fault.waitMs > 0) {
      await sleep(fault.waitMs, undefined, { signal: closing.signal }).catch(() => undefined);
    }
    if (closing.signal.aborted) return;
    if (fault?.kind === 'drop') return void req.socket.destroy();
    if (fault?.kind === 'error') {
      const reply = fault.status === 500 ? exceptionError(500) : proxyErrorPage(fault.status);
      return send(res, entry, reply);
    }
    send(res, entry, respond(state, request, entry));
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
    seed: (entity, record) => seedRecord(state.entities, entity, record),
  };
}
