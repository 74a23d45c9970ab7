/**
 * Whether a refresher run needs a token call. A scheduled run renews the access token ahead of its
 * expiry, and at most once per 10 minutes, as AWS asks of writes to a secret, unless leaving it to
 * the next scheduled run would let the token lapse. A forced run (a missing, expired or refused
 * token) is not held back by the 10 minutes. The refresher (token-refresh.ts) applies this;
 * `cdk synth` (infra/aws/environments.ts) warns of a token lifetime and schedule that cannot keep
 * to the 10 minutes, and sets the AccessTokenAlarm below what a healthy refresher reports.
 */
import type { TokenSecret } from '../token-secret.ts';
import { usableFor } from './token-wait.ts';

/**
 * AWS asks for at most one PutSecretValue per secret every 10 minutes: each write makes a
 * version, and a secret keeps a limited number of them.
 */
export const MIN_SECRET_WRITE_INTERVAL_SECONDS = 600;

/**
 * The longest schedule the stack allows (`rate(10 minutes)`): what a scheduled run that is not
 * told its schedule assumes, which only makes it put off fewer renewals on the stack's schedules.
 */
export const LONGEST_SCHEDULE_SECONDS = 600;

/**
 * Kept on top of the schedule's period when a renewal is put off: EventBridge may start the next
 * run late, and its token call and write take time.
 */
const NEXT_RUN_SLACK_SECONDS = 60;

export interface FreshnessPolicy {
  /** Renew once the access token has less than max(this, half its lifetime) left. */
  refreshAheadSeconds: number;
  /** How often the refresher runs on its schedule. */
  scheduleSeconds: number;
}

/**
 * What a scheduled run does with the stored tokens: `fresh`, more than max(`refreshAheadSeconds`,
 * half the lifetime) left; `written_recently`, less, but written under 10 minutes ago and lasting
 * beyond the next scheduled run, which can renew them then; `due`, renew now.
 */
export function scheduledFreshness(
  token: Pick<TokenSecret, 'accessTokenExpiresAt' | 'updatedAt'>,
  now: number,
  policy: FreshnessPolicy,
): 'fresh' | 'written_recently' | 'due' {
  const writtenAt = Date.parse(token.updatedAt);
  const expiresAt = Date.parse(token.accessTokenExpiresAt);
  const msLeft = expiresAt - now;
  if (msLeft > aheadSeconds(expiresAt - writtenAt, policy) * 1000) return 'fresh';
  const recent = now - writtenAt < MIN_SECRET_WRITE_INTERVAL_SECONDS * 1000;
  return recent && msLeft > nextRunSeconds(policy) * 1000 ? 'written_recently' : 'due';
}

/**
 * What a forced run does with the stored tokens: `newer_stored` when the caller named the tokens
 * it found stale (`staleUpdatedAt`) and others, still usable, are stored (many callers that found
 * the same tokens stale cause one refresh); otherwise `due`, whenever they were written.
 */
export function forcedFreshness(
  token: TokenSecret,
  now: number,
  staleUpdatedAt: string | null | undefined,
): 'newer_stored' | 'due' {
  return staleUpdatedAt !== undefined && token.updatedAt !== staleUpdatedAt && usableFor(token, now)
    ? 'newer_stored'
    : 'due';
}

/**
 * Whether scheduled runs of `scheduledFreshness` keep to one write per 10 minutes with tokens of
 * `lifetimeSeconds`, whatever the runs' phase. A run `t` seconds after a write renews when
 * lifetime - t ≤ min(ahead, next run) with t under 10 minutes; runs fall anywhere, so some phase
 * writes early exactly when lifetime - 10 minutes < min(ahead, next run). That also covers tokens
 * that expire between two runs: every run renews them.
 */
export function keepsToWriteInterval(lifetimeSeconds: number, policy: FreshnessPolicy): boolean {
  const renewAt = Math.min(aheadSeconds(lifetimeSeconds * 1000, policy), nextRunSeconds(policy));
  return lifetimeSeconds - MIN_SECRET_WRITE_INTERVAL_SECONDS >= renewAt;
}

/**
 * The fewest seconds left a healthy scheduled run reports (AccessTokenSecondsLeft): a fresh run
 * more than the ahead time; one that puts the renewal off more than the next run needs, and more
 * than what 10 minutes leave of the lifetime; a renewal the new token's whole lifetime.
 */
export function fewestSecondsLeftOnSchedule(
  lifetimeSeconds: number,
  policy: FreshnessPolicy,
): number {
  return Math.min(
    lifetimeSeconds,
    aheadSeconds(lifetimeSeconds * 1000, policy),
    Math.max(lifetimeSeconds - MIN_SECRET_WRITE_INTERVAL_SECONDS, nextRunSeconds(policy)),
  );
}

/** Max(`refreshAheadSeconds`, half the lifetime), so short lifetimes renew too. */
function aheadSeconds(lifetimeMs: number, policy: FreshnessPolicy): number {
  return Math.max(policy.refreshAheadSeconds, lifetimeMs / 2000);
}

/** What a token must outlast for the renewal to be left to the next scheduled run. */
function nextRunSeconds(policy: FreshnessPolicy): number {
  return policy.scheduleSeconds + NEXT_RUN_SLACK_SECONDS;
}
