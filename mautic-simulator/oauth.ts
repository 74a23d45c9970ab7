/**
 * The OAuth2 half of the Mautic simulator, as FOSOAuthServerBundle and oauth2-php behave behind
 * Mautic (docs/mautic.md §1, §2, §3): the token endpoint with its three grants, the authorize
 * endpoint, and the bearer-token check in front of /api.
 */
import { createHash, randomBytes } from 'node:crypto';
import { parseUrl, phpEmpty, phpUrldecode, phpUrlencode, sanitizeUrl } from './php.ts';
import { phpJsonEncode } from './php-json.ts';
import {
  bodyParams,
  exceptionError,
  HTML,
  oauthError,
  type Reply,
  type SimRequest,
  scalar,
  truthy,
} from './symfony.ts';

/** The grants Mautic supports (§1.3). */
type GrantType = 'authorization_code' | 'refresh_token' | 'client_credentials';

/** An API credential as Mautic stores it; `clientId` is the public id `<numericId>_<randomId>`. */
export interface SimulatorClient {
  clientId: string;
  clientSecret: string;
  grantTypes: GrantType[];
  redirectUris: string[];
}

const AUTH_CODE_LIFETIME_MS = 30_000;
const MISSING_TOKEN_MESSAGE =
  'The request is missing a required parameter, includes an unsupported parameter or parameter value, repeats the same parameter, uses more than one method for including an access token, or is otherwise malformed.';
// oauth2-php's GRANT_TYPE_REGEXP: the syntax check that runs before client authentication.
const GRANT_TYPE_PATTERN =
  /^(authorization_code|token|password|client_credentials|refresh_token|https?:\/\/.+|urn:.+)$/;

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

/** What the OAuth2 server keeps: its clients, their lifetimes, and every token and code issued. */
export interface OAuthState {
  now: () => number;
  clients: Map<string, SimulatorClient>;
  accessLifetimeSeconds: number;
  refreshLifetimeSeconds: number;
  clientCredentialsRefreshToken: boolean;
  accessTokens: Map<string, AccessToken>;
  refreshTokens: Map<string, Grant>;
  authCodes: Map<string, AuthCode>;
  lastTokenId: number;
}

// ---------------------------------------------------------------------------------------------
// oauth2-php mechanics: redirect URIs and tokens

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

export function issueTokens(
  state: OAuthState,
  clientId: string,
  scope: string | null,
  withRefresh: boolean,
) {
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

export function handleToken(state: OAuthState, req: SimRequest): Reply {
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
  state: OAuthState,
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
  state: OAuthState,
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
export function handleAuthorize(state: OAuthState, req: SimRequest): Reply {
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
export function authenticate(state: OAuthState, req: SimRequest): Reply | { id: number } {
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
