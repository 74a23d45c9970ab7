/**
 * What Mautic's kernel does with a request before and around its controllers: ApiSubscriber's
 * gatekeeping (§1.1), the OAuth2 firewall, noxlogic's rate limiter (§6.3) and the routing to the
 * token and authorize endpoints and the REST routes.
 */
import { check, type RequestLogEntry } from './harness.ts';
import {
  authenticate,
  handleAuthorize,
  handleToken,
  type OAuthState,
  type SimulatorClient,
} from './oauth.ts';
import { routeEntities } from './rest.ts';
import type { EntityState } from './store.ts';
import {
  exceptionError,
  HTML,
  isApiPath,
  oauthError,
  type Reply,
  type SimRequest,
} from './symfony.ts';

const API_DISABLED_MESSAGE =
  "API disabled. You need to enable the API in the API settings of Mautic's Configuration.";
const BASIC_AUTH_MESSAGE =
  "Basic Auth disabled. You need to enable HTTP basic auth in the API settings of Mautic's Configuration.";

/** A simulator's OAuth2 state, its settings and its records. */
export interface State extends OAuthState {
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

/**
 * Everything after logging, injection and faults: what Mautic itself would answer. Only an API
 * controller's view names Mautic's version (FetchCommonApiController::view sets
 * `Mautic-Version`), so the token endpoint, a 401, a 429, a routing 404 and an exception's
 * answer carry no version: the header `view` marks is filled in with the version played.
 */
export function respond(state: State, req: SimRequest, entry: RequestLogEntry): Reply {
  const reply = answer(state, req, entry);
  if ('mautic-version' in reply.headers)
    reply.headers['mautic-version'] = state.entities.line.version;
  return reply;
}

function answer(state: State, req: SimRequest, entry: RequestLogEntry): Reply {
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

export function addClient(clients: Map<string, SimulatorClient>, client: SimulatorClient): void {
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
