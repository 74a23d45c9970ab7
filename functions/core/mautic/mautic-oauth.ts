import {
  MauticResponseError,
  MauticTokenError,
  MauticTransientError,
  type TokenErrorReason,
} from '../errors.ts';
import type { Clock, MauticTokens, TokenGranter } from '../ports.ts';
import {
  createMauticHttp,
  firstMauticError,
  isObject,
  type MauticHttp,
  type MauticHttpOptions,
} from './mautic-http.ts';

/** One Mautic OAuth2 client: its public id (`<numericId>_<randomId>`) and secret. */
export interface MauticOAuthOptions extends MauticHttpOptions {
  clientId: string;
  clientSecret: string;
  clock: Clock;
}

const TOKEN_PATH = '/oauth/v2/token';
const AUTHORIZE_PATH = '/oauth/v2/authorize';
/** `where id = 0`: a lookup by primary key that finds no contact, the cheapest API answer. */
const VERSION_QUERY = new URLSearchParams({
  'where[0][col]': 'id',
  'where[0][expr]': 'eq',
  'where[0][val]': '0',
  minimal: '1',
  limit: '1',
}).toString();
const KNOWN_REASONS: ReadonlySet<string> = new Set([
  'invalid_client',
  'invalid_grant',
  'unauthorized_client',
]);

/**
 * A client of Mautic's OAuth2 server. Grants are sent form-encoded with the client id and
 * secret in the body: Mautic answers HTTP Basic credentials with 403 unless basic auth is
 * enabled (docs/mautic.md §1.1).
 *
 * @example
 * const oauth = new MauticOAuthClient({ baseUrl, clientId, clientSecret, fetch, clock: Date });
 * const tokens = await oauth.clientCredentials();
 */
export class MauticOAuthClient implements TokenGranter {
  readonly #http: MauticHttp;
  readonly #clientId: string;
  readonly #clientSecret: string;
  readonly #clock: Clock;

  constructor(options: MauticOAuthOptions) {
    if (!options.clientId) throw new TypeError('Expected `clientId` to be a non-empty string.');
    if (!options.clientSecret)
      throw new TypeError('Expected `clientSecret` to be a non-empty string.');
    this.#http = createMauticHttp(options);
    this.#clientId = options.clientId;
    this.#clientSecret = options.clientSecret;
    this.#clock = options.clock;
  }

  /** Grants a token to the client itself; only credentials created by an admin may use it. */
  clientCredentials(signal?: AbortSignal): Promise<MauticTokens> {
    return this.#grant({ grant_type: 'client_credentials' }, signal);
  }

  /** Trades a refresh token for new tokens. The old refresh token stops working at once. */
  refresh(refreshToken: string, signal?: AbortSignal): Promise<MauticTokens> {
    if (!refreshToken) throw new TypeError('Expected `refreshToken` to be a non-empty string.');
    return this.#grant({ grant_type: 'refresh_token', refresh_token: refreshToken }, signal);
  }

  /** Trades an authorization code (it lives 30 s) for tokens; `redirectUri` as at authorize. */
  exchangeCode(code: string, redirectUri: string, signal?: AbortSignal): Promise<MauticTokens> {
    if (!code) throw new TypeError('Expected `code` to be a non-empty string.');
    return this.#grant(
      { grant_type: 'authorization_code', code, redirect_uri: redirectUri },
      signal,
    );
  }

  /**
   * The version Mautic names on an API answer to `accessToken`, a token still valid: its token
   * endpoint names none (only its API controllers send `Mautic-Version`). One cheap read: a
   * contact lookup by an id no contact has. Undefined when the answer names none (a 401 for a
   * token no longer valid) or the call fails: the version is then unknown, never an error.
   */
  async mauticVersion(accessToken: string, signal?: AbortSignal): Promise<string | undefined> {
    if (!accessToken || /\s/.test(accessToken)) return undefined;
    try {
      const answer = await this.#http.send({
        method: 'GET',
        path: '/api/contacts',
        query: VERSION_QUERY,
        headers: { authorization: `Bearer ${accessToken}`, accept: 'application/json' },
        signal,
      });
      const version = answer.status === 401 ? null : answer.headers.get('mautic-version');
      return version ? version.slice(0, 64) : undefined;
    } catch {
      return undefined;
    }
  }

  /** The URL a Mautic user opens to authorize this client; Mautic redirects back with a code. */
  authorizeUrl(redirectUri: string, state: string): string {
    const query = new URLSearchParams({
      client_id: this.#clientId,
      response_type: 'code',
      redirect_uri: redirectUri,
      state,
    });
    return `${this.#http.baseUrl}${AUTHORIZE_PATH}?${query}`;
  }

  async #grant(
    params: Record<string, string>,
    signal: AbortSignal | undefined,
  ): Promise<MauticTokens> {
    const method = 'POST';
    const body = new URLSearchParams({
      ...params,
      client_id: this.#clientId,
      client_secret: this.#clientSecret,
    }).toString();
    const answer = await this.#http.send({
      method,
      path: TOKEN_PATH,
      headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
      body,
      signal,
    });
    const { status, json } = answer;
    if (status >= 200 && status < 300) return this.#parseTokens(json, status);
    if (status >= 500 || status === 429 || status === 408) {
      throw new MauticTransientError({ method, path: TOKEN_PATH, kind: 'server', status });
    }
    const error = firstMauticError(json);
    const reason: TokenErrorReason =
      error?.type !== undefined && KNOWN_REASONS.has(error.type)
        ? (error.type as TokenErrorReason)
        : 'other';
    throw new MauticTokenError({
      method,
      path: TOKEN_PATH,
      status,
      reason,
      mauticType: error?.type,
      mauticMessage: error?.message,
    });
  }

  #parseTokens(json: unknown, status: number): MauticTokens {
    const bad = (problem: string) =>
      new MauticResponseError(problem, {
        method: 'POST',
        path: TOKEN_PATH,
        status,
        retryable: true,
      });
    if (!isObject(json)) throw bad('a body that is not a JSON object');
    const { access_token, expires_in, token_type, scope, refresh_token } = json;
    if (typeof access_token !== 'string' || access_token === '') throw bad('no access_token');
    if (typeof token_type !== 'string' || token_type.toLowerCase() !== 'bearer') {
      throw bad('a token_type other than bearer');
    }
    const seconds =
      typeof expires_in === 'string' && /^\d+$/.test(expires_in) ? Number(expires_in) : expires_in;
    if (typeof seconds !== 'number' || !Number.isInteger(seconds) || seconds <= 0) {
      throw bad('no positive integer expires_in');
    }
    if (scope !== undefined && scope !== null && typeof scope !== 'string')
      throw bad('a scope that is not a string');
    if (
      refresh_token !== undefined &&
      refresh_token !== null &&
      (typeof refresh_token !== 'string' || refresh_token === '')
    ) {
      throw bad('a refresh_token that is not a string');
    }
    const obtainedAt = this.#clock.now();
    return {
      accessToken: access_token,
      accessTokenExpiresAt: obtainedAt + seconds * 1000,
      ...(typeof refresh_token === 'string' ? { refreshToken: refresh_token } : {}),
      scope: scope ?? null,
      obtainedAt,
    };
  }
}
