import { createHash } from 'node:crypto';
import { MauticTokenError } from './errors.ts';
import type {
  Clock,
  Logger,
  MauticTokens,
  MetricsSink,
  StoredTokens,
  TokenGranter,
  TokenVault,
} from './ports.ts';
import type { ClientSecret, TokenSecret } from './token-secret.ts';
import { usableFor } from './token-wait.ts';

/** A write that failed: Mautic already rotated, so these tokens must be stored before any new call. */
interface UnsavedWrite {
  token: TokenSecret;
  requestToken: string;
  basedOn: string | undefined;
}

export interface RefreshDeps {
  vault: TokenVault;
  /** A granter whose token call may take `timeoutMs` at most. */
  granterFor: (client: ClientSecret, timeoutMs: number) => TokenGranter;
  clock: Clock;
  logger: Logger;
  metrics: MetricsSink;
  /** Refresh when the access token has less than this left. @default 900 */
  refreshAheadSeconds: number;
  /** Mautic does not say when a refresh token expires; its default lifetime is 14 days. */
  refreshTokenLifetimeSeconds: number;
  /** Tokens obtained but not yet stored; kept for the life of the container. */
  unsaved: { value: UnsavedWrite | undefined };
  /** What is left of this run's time (Lambda's `getRemainingTimeInMillis`). */
  remainingMs?: () => number;
}

/**
 * A run of the refresher: on its schedule, forced by the batch function when its token is
 * missing, expired or refused, or forced by the operator's `refresh` command.
 */
export interface RefreshRequest {
  force: boolean;
  reason: string;
  /**
   * The `updatedAt` of the tokens the caller found stale (`null`: it found none). A forced run
   * that finds other, usable tokens stored makes no token call: many callers that found the same
   * tokens stale cause one refresh. Absent (the operator's `refresh`): the run always refreshes.
   */
  staleUpdatedAt?: string | null;
}

export type RefreshOutcome = (
  | { action: 'none'; why: 'fresh' | 'newer_stored' | 'superseded' }
  | { action: 'refreshed'; grant: 'refresh_token' | 'client_credentials' }
  | { action: 'failed'; why: string }
) & { stored?: StoredTokens };

/** Kept back from the token call for storing its answer (two writes, each possibly retried). */
const WRITE_RESERVE_MS = 6_000;
/** The token call's timeout when the run's remaining time is unknown (tests, the local stack). */
const DEFAULT_TOKEN_CALL_MS = 20_000;

/**
 * One run of the token refresher, the single writer of the token secret.
 *
 * First heals a half-finished write: a pending version built on the current one (its put
 * succeeded, its stage move did not, and the container that made it may be gone) is made current
 * without any Mautic call, so its rotated refresh token is the one used from now on.
 *
 * Then reads the tokens; leaves them alone when the access token has more than
 * max(`refreshAheadSeconds`, half its lifetime) left and the run is not forced, or when a forced
 * run names stale tokens and finds others, still usable, stored. Otherwise refreshes: the refresh
 * grant while a refresh token is held and unexpired, `client_credentials` otherwise when the
 * credential allows it, and stores the result at once as a new version, compare-and-swapped
 * against the version read. Tokens that could not be stored are kept by this container and stored
 * first on its next run, and the pending version heals them in any other container.
 *
 * One loss no writer can prevent: Mautic rotated the refresh token but its answer never arrived
 * (timeout, dropped connection). The old refresh token is then spent and the new one unknown, so
 * only a new authorization helps. The token call therefore gets most of the run's time, and the
 * resulting `invalid_grant` says to run `authorize`.
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

  let { token, versionId } = await vault.readToken();
  const healed = await healPendingWrite(versionId, deps);
  if (healed === 'failed') return failed(token, now, deps, 'write_failed');
  if (healed) ({ token, versionId } = healed);

  const msLeft = token ? Date.parse(token.accessTokenExpiresAt) - now : 0;
  if (token && !request.force && msLeft > refreshAheadMs(token, deps)) {
    reportLifetimes(token, now, metrics);
    return { action: 'none', why: 'fresh', stored: storedOf(token) };
  }
  if (
    token &&
    request.force &&
    request.staleUpdatedAt !== undefined &&
    token.updatedAt !== request.staleUpdatedAt &&
    usableFor(token, now)
  ) {
    logger.info('Forced refresh skipped: newer tokens than the caller had are stored', {
      reason: request.reason,
    });
    reportLifetimes(token, now, metrics);
    return { action: 'none', why: 'newer_stored', stored: storedOf(token) };
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
  // Most of the run's time goes to the token call: an answer given up on may be a rotated refresh
  // token lost for good (see above).
  const remaining = deps.remainingMs?.() ?? DEFAULT_TOKEN_CALL_MS + WRITE_RESERVE_MS;
  const granter = deps.granterFor(client, Math.max(1_000, remaining - WRITE_RESERVE_MS));
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
        { token: rest, requestToken: requestTokenFor(versionId, rest), basedOn: versionId },
        deps,
      );
      return needsAuthorize(
        rest,
        now,
        deps,
        'Mautic refused the refresh token (invalid_grant: revoked, expired, or spent by a refresh whose answer was lost)',
      );
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
    { token: next, requestToken: requestTokenFor(versionId, next), basedOn: versionId },
    deps,
  );
  if (stored === 'failed') return failed(token, now, deps, 'write_failed');
  if (stored === 'superseded') {
    logger.warn('New tokens were stored by someone else meanwhile (authorize?); keeping theirs');
    const theirs = (await vault.readToken()).token;
    return { action: 'none', why: 'superseded', ...(theirs ? { stored: storedOf(theirs) } : {}) };
  }
  metrics.addMetric('TokenRefreshed', 'Count', 1);
  reportLifetimes(next, now, metrics);
  logger.info('Mautic tokens refreshed', {
    grant,
    forced: request.force,
    reason: request.reason,
    accessTokenExpiresAt: next.accessTokenExpiresAt,
  });
  return { action: 'refreshed', grant, stored: storedOf(next) };
}

/**
 * The write's idempotency token (and so the new version's id): derived from the version read and
 * the new content. Retrying the same write adds no second version; a different write on the same
 * version (after a half-finished one) cannot collide with it; and a pending version can be told
 * to have been built on the current one.
 */
export function requestTokenFor(versionRead: string | undefined, content: TokenSecret): string {
  return createHash('sha256')
    .update(`${versionRead ?? 'none'}|${JSON.stringify(content)}`)
    .digest('hex');
}

/** Max(`refreshAheadSeconds`, half the access token's lifetime), so short lifetimes renew too. */
function refreshAheadMs(token: TokenSecret, deps: Pick<RefreshDeps, 'refreshAheadSeconds'>) {
  const lifetime = Date.parse(token.accessTokenExpiresAt) - Date.parse(token.updatedAt);
  return Math.max(deps.refreshAheadSeconds * 1000, lifetime / 2);
}

/**
 * Makes current a pending version built on the current one: tokens whose put succeeded but whose
 * stage move did not. Nothing to do for the usual pending label, which stays on the version it
 * made current, or for one built on an older version (superseded, e.g. by `authorize`).
 */
async function healPendingWrite(
  currentVersion: string | undefined,
  deps: RefreshDeps,
): Promise<{ token: TokenSecret; versionId: string } | 'failed' | undefined> {
  if (currentVersion === undefined) return undefined;
  let pending: { token: TokenSecret; versionId: string } | undefined;
  try {
    pending = await deps.vault.readPending();
  } catch (error) {
    deps.logger.warn('Could not read the pending token version', { error: describe(error) });
    return undefined;
  }
  if (
    pending === undefined ||
    pending.versionId === currentVersion ||
    requestTokenFor(currentVersion, pending.token) !== pending.versionId
  ) {
    return undefined;
  }
  const unsaved = {
    token: pending.token,
    requestToken: pending.versionId,
    basedOn: currentVersion,
  };
  const result = await write(unsaved, deps);
  if (result === 'failed') return 'failed';
  if (result === 'superseded') return undefined;
  deps.logger.warn('Completed a token write that an earlier run left half-finished');
  return { token: pending.token, versionId: pending.versionId };
}

function storedOf(token: TokenSecret): StoredTokens {
  return { updatedAt: token.updatedAt, accessTokenExpiresAt: token.accessTokenExpiresAt };
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
    { event: 'needs_authorize' },
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
