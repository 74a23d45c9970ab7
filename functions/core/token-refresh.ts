import { createHash } from 'node:crypto';
import { MauticTokenError } from './errors.ts';
import type {
  Clock,
  Logger,
  MauticTokens,
  MetricsSink,
  TokenGranter,
  TokenVault,
} from './ports.ts';
import type { ClientSecret, TokenSecret } from './token-secret.ts';

/** A write that failed: Mautic already rotated, so these tokens must be stored before any new call. */
interface UnsavedWrite {
  token: TokenSecret;
  requestToken: string;
  basedOn: string | undefined;
}

export interface RefreshDeps {
  vault: TokenVault;
  granterFor: (client: ClientSecret) => TokenGranter;
  clock: Clock;
  logger: Logger;
  metrics: MetricsSink;
  /** Refresh when the access token has less than this left. @default 900 */
  refreshAheadSeconds: number;
  /** Mautic does not say when a refresh token expires; its default lifetime is 14 days. */
  refreshTokenLifetimeSeconds: number;
  /** Tokens obtained but not yet stored; kept for the life of the container. */
  unsaved: { value: UnsavedWrite | undefined };
}

/** A run of the refresher: on its schedule, or forced by the batch function after a 401. */
export interface RefreshRequest {
  force: boolean;
  reason: string;
}

export type RefreshOutcome =
  | { action: 'none'; why: 'fresh' | 'refreshed_recently' | 'superseded' }
  | { action: 'refreshed'; grant: 'refresh_token' | 'client_credentials' }
  | { action: 'failed'; why: string };

/** A forced run finding tokens this recent, and not about to expire, does nothing. */
const FORCED_RUN_MIN_AGE_MS = 60_000;

/**
 * One run of the token refresher, the single writer of the token secret.
 *
 * Reads the tokens; leaves them alone when the access token has more than
 * `refreshAheadSeconds` left (and the run is not forced), or when a forced run finds them written
 * within the last minute and still valid for one. Otherwise refreshes: the refresh grant while a
 * refresh token is held and unexpired, `client_credentials` otherwise when the credential allows
 * it, and stores the result at once as a new version, compare-and-swapped against the version
 * read. Tokens that could not be stored are kept and stored first on the next run, before any
 * token call, so a rotated refresh token is never lost or sent twice.
 *
 * A refused refresh token (`invalid_grant`) falls back to `client_credentials` for such a
 * credential; for an `authorization_code` credential the dead refresh token is removed from the
 * secret, so no further token calls are made until `authorize` stores new tokens, and every run
 * says so (metric and an ERROR log naming the fix). Network errors and 5xx wait for the next run.
 */
export async function refreshTokens(
  request: RefreshRequest,
  deps: RefreshDeps,
): Promise<RefreshOutcome> {
  const { vault, clock, logger, metrics } = deps;
  const now = clock.now();

  const pending = deps.unsaved.value;
  if (pending) {
    const stored = await write(pending, deps);
    if (stored === 'failed') return failed(pending.token, now, deps, 'write_failed');
    deps.unsaved.value = undefined;
  }

  const { token, versionId } = await vault.readToken();
  const msLeft = token ? Date.parse(token.accessTokenExpiresAt) - now : 0;
  if (token && !request.force && msLeft > deps.refreshAheadSeconds * 1000) {
    reportLifetimes(token, now, metrics);
    return { action: 'none', why: 'fresh' };
  }
  if (
    token &&
    request.force &&
    now - Date.parse(token.updatedAt) < FORCED_RUN_MIN_AGE_MS &&
    msLeft > FORCED_RUN_MIN_AGE_MS
  ) {
    logger.info('Forced refresh skipped: the tokens were refreshed moments ago', {
      reason: request.reason,
    });
    reportLifetimes(token, now, metrics);
    return { action: 'none', why: 'refreshed_recently' };
  }

  let client: ClientSecret;
  try {
    ({ client } = await vault.readClient());
  } catch (error) {
    logger.error('Cannot read the Mautic credential: run "npx mautic-relay credentials"', {
      error: describe(error),
    });
    return failed(token, now, deps, 'client_secret_unreadable');
  }
  const granter = deps.granterFor(client);
  const refreshToken =
    token?.refreshToken &&
    (!token.refreshTokenExpiresAt || Date.parse(token.refreshTokenExpiresAt) > now)
      ? token.refreshToken
      : undefined;

  let tokens: MauticTokens;
  let grant: 'refresh_token' | 'client_credentials';
  try {
    if (refreshToken) {
      try {
        tokens = await granter.refresh(refreshToken);
        grant = 'refresh_token';
      } catch (error) {
        if (!(isInvalidGrant(error) && client.grantType === 'client_credentials')) throw error;
        logger.warn('The refresh token was refused; falling back to client_credentials');
        tokens = await granter.clientCredentials();
        grant = 'client_credentials';
      }
    } else if (client.grantType === 'client_credentials') {
      tokens = await granter.clientCredentials();
      grant = 'client_credentials';
    } else {
      return needsAuthorize(token, now, deps, 'no usable refresh token is stored');
    }
  } catch (error) {
    if (isInvalidGrant(error) && token) {
      // Dropping the dead refresh token is what stops further calls until `authorize` is run;
      // if the write fails it is kept and retried before any token call.
      const { refreshToken: _dead, refreshTokenExpiresAt: _expiry, ...rest } = token;
      await writeOrKeep(
        { token: rest, requestToken: requestTokenFor(versionId, 'drop'), basedOn: versionId },
        deps,
      );
      return needsAuthorize(rest, now, deps, 'Mautic refused the refresh token (invalid_grant)');
    }
    if (error instanceof MauticTokenError) {
      logger.error(fixFor(error), {
        reason: error.reason,
        status: error.status,
        error: error.message,
      });
      return failed(token, now, deps, error.reason);
    }
    logger.warn('Token refresh failed; the next run tries again', { error: describe(error) });
    return failed(token, now, deps, 'transient');
  }

  const next: TokenSecret = {
    accessToken: tokens.accessToken,
    accessTokenExpiresAt: new Date(tokens.accessTokenExpiresAt).toISOString(),
    ...(tokens.refreshToken
      ? {
          refreshToken: tokens.refreshToken,
          refreshTokenExpiresAt: new Date(
            tokens.obtainedAt + deps.refreshTokenLifetimeSeconds * 1000,
          ).toISOString(),
        }
      : {}),
    obtainedWith: grant,
    updatedAt: new Date(tokens.obtainedAt).toISOString(),
  };
  const stored = await writeOrKeep(
    { token: next, requestToken: requestTokenFor(versionId, 'refresh'), basedOn: versionId },
    deps,
  );
  if (stored === 'failed') return failed(token, now, deps, 'write_failed');
  if (stored === 'superseded') {
    logger.warn('New tokens were stored by someone else meanwhile (authorize?); keeping theirs');
    return { action: 'none', why: 'superseded' };
  }
  metrics.addMetric('TokenRefreshed', 'Count', 1);
  reportLifetimes(next, now, metrics);
  logger.info('Mautic tokens refreshed', {
    grant,
    forced: request.force,
    reason: request.reason,
    accessTokenExpiresAt: next.accessTokenExpiresAt,
  });
  return { action: 'refreshed', grant };
}

/**
 * The write's idempotency token: derived from the version read, so retrying the same write
 * cannot add a second version.
 */
export function requestTokenFor(versionRead: string | undefined, purpose: string): string {
  return createHash('sha256')
    .update(`${versionRead ?? 'none'}|${purpose}`)
    .digest('hex');
}

/** Writes, keeping the tokens for the next run if the write fails. */
async function writeOrKeep(
  unsaved: UnsavedWrite,
  deps: RefreshDeps,
): Promise<'written' | 'superseded' | 'failed'> {
  const result = await write(unsaved, deps);
  if (result === 'failed') deps.unsaved.value = unsaved;
  return result;
}

async function write(
  unsaved: UnsavedWrite,
  deps: RefreshDeps,
): Promise<'written' | 'superseded' | 'failed'> {
  for (let attempt = 1; attempt <= 2; attempt++) {
    try {
      return await deps.vault.writeToken(unsaved.token, unsaved.requestToken, unsaved.basedOn);
    } catch (error) {
      deps.logger.error(
        'Could not store the Mautic tokens; they are kept to be stored first on the next run',
        {
          attempt,
          error: describe(error),
        },
      );
    }
  }
  return 'failed';
}

function failed(
  token: Partial<TokenSecret> | undefined,
  now: number,
  deps: RefreshDeps,
  why: string,
): RefreshOutcome {
  deps.metrics.addMetric('TokenRefreshFailed', 'Count', 1);
  reportLifetimes(token, now, deps.metrics);
  return { action: 'failed', why };
}

function needsAuthorize(
  token: Omit<TokenSecret, 'refreshToken'> | undefined,
  now: number,
  deps: RefreshDeps,
  why: string,
): RefreshOutcome {
  deps.logger.error(
    `Mautic tokens cannot be refreshed: ${why}. Run "npx mautic-relay authorize" for this environment to authorize the relay again.`,
  );
  // No refresh token is held: say so with 0, for the refresh-token alarm.
  deps.metrics.addMetric('RefreshTokenSecondsLeft', 'Seconds', 0);
  const accessOnly = token && { accessTokenExpiresAt: token.accessTokenExpiresAt };
  return failed(accessOnly, now, deps, 'needs_authorize');
}

function fixFor(error: MauticTokenError): string {
  if (error.reason === 'invalid_client') {
    return 'Mautic refused the client id or secret: run "npx mautic-relay credentials" with the right ones';
  }
  if (error.reason === 'unauthorized_client') {
    return 'This Mautic credential may not use client_credentials (it was not created by an admin): use grantType authorization_code and run "npx mautic-relay authorize"';
  }
  return 'Mautic refused the token request';
}

/** How long the access and refresh tokens have left. */
function reportLifetimes(
  token: Partial<TokenSecret> | undefined,
  now: number,
  metrics: MetricsSink,
): void {
  const left = (at: string | undefined) =>
    at === undefined ? 0 : Math.max(0, Math.round((Date.parse(at) - now) / 1000));
  metrics.addMetric('AccessTokenSecondsLeft', 'Seconds', left(token?.accessTokenExpiresAt));
  // Only a held refresh token has a lifetime: client_credentials tokens come without one.
  if (token?.refreshToken)
    metrics.addMetric('RefreshTokenSecondsLeft', 'Seconds', left(token.refreshTokenExpiresAt));
}

function isInvalidGrant(error: unknown): boolean {
  return error instanceof MauticTokenError && error.reason === 'invalid_grant';
}

function describe(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}
