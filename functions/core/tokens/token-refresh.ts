import { describeError, MauticTokenError } from '../errors.ts';
import type { Clock, MauticTokens, MetricsSink, StoredTokens, TokenGranter } from '../ports.ts';
import type { ClientSecret, TokenSecret } from '../token-secret.ts';
import { fixFor, isInvalidGrant, transientDetail } from './token-failures.ts';
import {
  forcedFreshness,
  LONGEST_SCHEDULE_SECONDS,
  scheduledFreshness,
} from './token-freshness.ts';
import { currentMauticVersion, withMauticVersion } from './token-version.ts';
import {
  healPendingWrite,
  racingWrite,
  requestTokenFor,
  storeGranted,
  type TokenWriteDeps,
  writeOrKeep,
} from './token-writes.ts';

export interface RefreshDeps extends TokenWriteDeps {
  /** A granter whose token call may take `timeoutMs` at most. */
  granterFor: (client: ClientSecret, timeoutMs: number) => TokenGranter;
  clock: Clock;
  metrics: MetricsSink;
  /** Refresh when the access token has less than this left. @default 900 */
  refreshAheadSeconds: number;
  /** Mautic does not say when a refresh token expires; its default lifetime is 14 days. */
  refreshTokenLifetimeSeconds: number;
  /** What is left of this run's time (Lambda's `getRemainingTimeInMillis`). */
  remainingMs?: () => number;
  /** The pause between reads of the secret after Mautic refuses the refresh token (`racingWrite`). */
  sleep: (ms: number) => Promise<void>;
  /** The command that authorizes this relay again, for the log. @default "npx mautic-relay authorize" */
  authorizeCommand?: string | undefined;
  /**
   * What to do about a client id or secret Mautic refuses, for the log: the local stack takes
   * its credential from its environment, not from the `credentials` command.
   * @default 'run "npx mautic-relay credentials" with the right ones'
   */
  credentialsFix?: string | undefined;
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
  /** A scheduled run's period, as its rule says. @default LONGEST_SCHEDULE_SECONDS */
  scheduleSeconds?: number;
}

export type RefreshOutcome = (
  | { action: 'none'; why: 'fresh' | 'written_recently' | 'newer_stored' | 'superseded' }
  | { action: 'refreshed'; grant: 'refresh_token' | 'client_credentials' }
  /** `detail`: what a transient failure did not reach (`mautic.example.com ENOTFOUND`). */
  | { action: 'failed'; why: string; detail?: string }
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
 * Then reads the tokens; leaves them alone on a scheduled run while they are fresh, or were
 * written under 10 minutes ago and outlast the next scheduled run (token-freshness.ts: AWS asks
 * for at most one write per secret every 10 minutes), or when a forced run names stale tokens and
 * finds others, still usable, stored. Otherwise refreshes: the refresh grant while a refresh
 * token is held and unexpired, `client_credentials` otherwise when the credential allows it, and
 * stores the result at once as a new version, compare-and-swapped against the version read.
 * Tokens that could not be stored are kept by this container and stored first on its next run,
 * and the pending version heals them in any other container.
 *
 * One loss no writer can prevent: Mautic rotated the refresh token but its answer never arrived
 * (timeout, dropped connection). The old refresh token is then spent and the new one unknown, so
 * only a new authorization helps. The token call therefore gets most of the run's time, and the
 * resulting `invalid_grant` says to run `authorize`.
 *
 * A refused refresh token (`invalid_grant`) falls back to `client_credentials` for such a
 * credential; for an `authorization_code` one, unless a racing run's tokens appear within 3 s
 * (`racingWrite`), the dead refresh token is removed from the secret, so no token calls are made
 * until `authorize` stores new tokens, and every run says so (metric, ERROR log naming the fix).
 */
export async function refreshTokens(
  request: RefreshRequest,
  deps: RefreshDeps,
): Promise<RefreshOutcome> {
  const now = deps.clock.now();
  const current = await completeEarlierWrites(now, deps);
  if (isOutcome(current)) return current;
  const kept = keepStored(request, current.token, now, deps);
  if (kept) return kept;
  const granted = await grantNewTokens(current, now, deps);
  if (isOutcome(granted)) return granted;
  return storeNewTokens(request, granted, current, now, deps);
}

/** The tokens read, and the id of the version they were read from (the compare-and-swap base). */
interface CurrentTokens {
  token: TokenSecret | undefined;
  versionId: string | undefined;
}

/** New tokens from Mautic, the grant that gave them, and Mautic's version (token-version.ts). */
interface Granted {
  tokens: MauticTokens;
  grant: 'refresh_token' | 'client_credentials';
  mauticVersion: string | undefined;
}

function isOutcome(value: object): value is RefreshOutcome {
  return 'action' in value;
}

/**
 * Reads the current tokens once every earlier write is complete: this container's unsaved
 * tokens first, then a half-finished write of any container. Both hold a refresh token Mautic
 * already rotated to, so a token call made before they are stored would spend the old one.
 */
async function completeEarlierWrites(
  now: number,
  deps: RefreshDeps,
): Promise<CurrentTokens | RefreshOutcome> {
  const pending = deps.unsaved.value;
  if (pending) {
    // Kept again if it fails; written over a racing run's drop of the refresh token it spent.
    deps.unsaved.value = undefined;
    const stored = await storeGranted(pending, deps);
    if (stored.result === 'failed') return failed(pending.token, now, deps, 'write_failed');
  }

  const current = await deps.vault.readToken();
  const healed = await healPendingWrite(current.versionId, deps);
  if (healed === 'failed') return failed(current.token, now, deps, 'write_failed');
  // Without knowing whether a half-finished write holds the rotated refresh token, a token call
  // could spend the old one: try again next run instead.
  if (healed === 'unknown') return failed(current.token, now, deps, 'pending_unreadable');
  return healed ?? current;
}

/**
 * The outcome of a run that needs no token call: a scheduled run whose tokens are not due
 * (`scheduledFreshness`), or a forced run that names stale tokens and finds others, still usable,
 * stored (so many callers that found the same tokens stale cause one refresh). Nothing when the
 * run must refresh.
 */
function keepStored(
  request: RefreshRequest,
  token: TokenSecret | undefined,
  now: number,
  deps: RefreshDeps,
): RefreshOutcome | undefined {
  if (!token) return undefined;
  const why = request.force
    ? forcedFreshness(token, now, request.staleUpdatedAt)
    : scheduledFreshness(token, now, {
        refreshAheadSeconds: deps.refreshAheadSeconds,
        scheduleSeconds: request.scheduleSeconds ?? LONGEST_SCHEDULE_SECONDS,
      });
  if (why === 'due') return undefined;
  if (why === 'newer_stored') {
    deps.logger.info('Forced refresh skipped: newer tokens than the caller had are stored', {
      reason: request.reason,
    });
  }
  reportLifetimes(token, now, deps.metrics);
  return { action: 'none', why, stored: storedOf(token) };
}

/** Reads the credential and makes the token call; a failure is the run's outcome. */
async function grantNewTokens(
  current: CurrentTokens,
  now: number,
  deps: RefreshDeps,
): Promise<Granted | RefreshOutcome> {
  const { token } = current;
  let client: ClientSecret;
  try {
    ({ client } = await deps.vault.readClient());
  } catch (error) {
    deps.logger.error('Cannot read the Mautic credential: run "npx mautic-relay credentials"', {
      error: describeError(error),
    });
    return failed(token, now, deps, 'client_secret_unreadable');
  }
  const mauticVersion = await currentMauticVersion(token, client, now, deps);
  // Most of the run's time goes to the token call: an answer given up on may be a rotated refresh
  // token lost for good (see `refreshTokens`).
  const remaining = deps.remainingMs?.() ?? DEFAULT_TOKEN_CALL_MS + WRITE_RESERVE_MS;
  const granter = deps.granterFor(client, Math.max(1_000, remaining - WRITE_RESERVE_MS));
  try {
    const granted = await callGranter(granter, client, usableRefreshToken(token, now), deps);
    if (granted) return withMauticVersion(granted, mauticVersion, client, deps);
    return needsAuthorize(token, now, deps, 'no usable refresh token is stored');
  } catch (error) {
    return grantFailed(error, current, now, deps);
  }
}

/** The stored refresh token, unless it is known to have expired. */
function usableRefreshToken(token: TokenSecret | undefined, now: number): string | undefined {
  return token?.refreshToken &&
    (!token.refreshTokenExpiresAt || Date.parse(token.refreshTokenExpiresAt) > now)
    ? token.refreshToken
    : undefined;
}

/**
 * The refresh grant while a refresh token is held, falling back to `client_credentials` when
 * Mautic refuses it and the credential allows that grant; `client_credentials` alone when no
 * refresh token is held. Nothing when neither applies: only `authorize` can help then.
 */
async function callGranter(
  granter: TokenGranter,
  client: ClientSecret,
  refreshToken: string | undefined,
  deps: RefreshDeps,
): Promise<Omit<Granted, 'mauticVersion'> | undefined> {
  if (refreshToken) {
    try {
      return { tokens: await granter.refresh(refreshToken), grant: 'refresh_token' };
    } catch (error) {
      if (!(isInvalidGrant(error) && client.grantType === 'client_credentials')) throw error;
      deps.logger.warn('The refresh token was refused; falling back to client_credentials');
      return { tokens: await granter.clientCredentials(), grant: 'client_credentials' };
    }
  }
  if (client.grantType !== 'client_credentials') return undefined;
  return { tokens: await granter.clientCredentials(), grant: 'client_credentials' };
}

/**
 * The outcome of a failed token call. A refused refresh token (`invalid_grant`) is removed from
 * the secret; Mautic refusing the credential is logged with its fix; anything else (network,
 * 5xx) waits for the next run.
 */
async function grantFailed(
  error: unknown,
  { token, versionId }: CurrentTokens,
  now: number,
  deps: RefreshDeps,
): Promise<RefreshOutcome> {
  if (isInvalidGrant(error) && token) {
    // A racing run may have spent it and be storing what Mautic rotated it to: theirs are kept,
    // and nobody is paged. Only a refusal no newer tokens follow is a loss.
    const racing = await racingWrite(versionId, deps, (ms) => canWait(ms, deps));
    if (typeof racing === 'string') return failed(token, now, deps, racing);
    if (racing) return superseded(racing.token);
    // Dropping the dead refresh token is what stops further calls until `authorize` is run;
    // if the write fails it is kept and retried before any token call.
    const { refreshToken: _dead, refreshTokenExpiresAt: _expiry, ...rest } = token;
    const dropped = await writeOrKeep(
      { token: rest, requestToken: requestTokenFor(versionId, rest), basedOn: versionId },
      deps,
    );
    if (dropped === 'superseded') return superseded((await deps.vault.readToken()).token);
    return needsAuthorize(
      rest,
      now,
      deps,
      'Mautic refused the refresh token (invalid_grant: revoked, expired, or spent by a refresh whose answer was lost)',
    );
  }
  if (error instanceof MauticTokenError) {
    deps.logger.error(fixFor(error, deps), {
      reason: error.reason,
      status: error.status,
      error: error.message,
    });
    return failed(token, now, deps, error.reason);
  }
  const detail = transientDetail(error);
  // The token call changes nothing in Mautic: whether it "possibly applied" is no concern here.
  deps.logger.warn(
    `Token refresh failed: Mautic's token endpoint ${detail}; check the Mautic base URL and that Mautic answers from here. The next run tries again`,
    { error: describeError(error) },
  );
  return failed(token, now, deps, 'transient', detail);
}

/** Whether `ms` more can be spent waiting and still leave the time a write needs. */
function canWait(ms: number, deps: RefreshDeps): boolean {
  return deps.remainingMs === undefined || deps.remainingMs() - ms > WRITE_RESERVE_MS;
}

/**
 * Stores new tokens at once as a new version, compare-and-swapped against the version read, and
 * reports them. Someone else's write in between (`authorize`) wins: theirs are kept; but not a
 * racing run's drop of the refresh token this call spent: ours go on top of it (`storeGranted`).
 */
async function storeNewTokens(
  request: RefreshRequest,
  { tokens, grant, mauticVersion }: Granted,
  { token, versionId }: CurrentTokens,
  now: number,
  deps: RefreshDeps,
): Promise<RefreshOutcome> {
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
    ...(mauticVersion ? { mauticVersion } : {}),
  };
  const stored = await storeGranted(
    {
      token: next,
      requestToken: requestTokenFor(versionId, next),
      basedOn: versionId,
      spent: token,
    },
    deps,
  );
  if (stored.result === 'superseded') return superseded(stored.theirs);
  if (stored.result === 'failed') return failed(token, now, deps, 'write_failed');
  deps.metrics.addMetric('TokenRefreshed', 'Count', 1);
  reportLifetimes(next, now, deps.metrics);
  deps.logger.info('Mautic tokens refreshed', {
    grant,
    forced: request.force,
    reason: request.reason,
    accessTokenExpiresAt: next.accessTokenExpiresAt,
  });
  return { action: 'refreshed', grant, stored: storedOf(next) };
}

/** A run that found newer tokens stored by someone else (another run, `authorize`): theirs stay. */
function superseded(theirs: TokenSecret | undefined): RefreshOutcome {
  return { action: 'none', why: 'superseded', ...(theirs ? { stored: storedOf(theirs) } : {}) };
}

function storedOf(token: TokenSecret): StoredTokens {
  return { updatedAt: token.updatedAt, accessTokenExpiresAt: token.accessTokenExpiresAt };
}

function failed(
  token: Partial<TokenSecret> | undefined,
  now: number,
  deps: RefreshDeps,
  why: string,
  detail?: string,
): RefreshOutcome {
  deps.metrics.addMetric('TokenRefreshFailed', 'Count', 1);
  reportLifetimes(token, now, deps.metrics);
  return { action: 'failed', why, ...(detail === undefined ? {} : { detail }) };
}

function needsAuthorize(
  token: Omit<TokenSecret, 'refreshToken'> | undefined,
  now: number,
  deps: RefreshDeps,
  why: string,
): RefreshOutcome {
  deps.logger.error(
    `Mautic tokens cannot be refreshed: ${why}. Run "${deps.authorizeCommand ?? 'npx mautic-relay authorize'}" for this environment to authorize the relay again.`,
    { event: 'needs_authorize' },
  );
  // No refresh token is held: say so with 0, for the refresh-token alarm.
  deps.metrics.addMetric('RefreshTokenSecondsLeft', 'Seconds', 0);
  const accessOnly = token && { accessTokenExpiresAt: token.accessTokenExpiresAt };
  return failed(accessOnly, now, deps, 'needs_authorize');
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
