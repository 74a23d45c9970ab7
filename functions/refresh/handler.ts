import { type RefreshDeps, type RefreshOutcome, refreshTokens } from '../core/token-refresh.ts';

export type RefreshHandler = (event: unknown) => Promise<RefreshOutcome>;

/**
 * The token refresher: run by an EventBridge schedule, or invoked by the batch function with
 * `{"force": true, "reason": "…"}` after a second 401. Reserved concurrency 1 makes it the
 * single writer of the token secret, so two refreshes never race on a single-use refresh token.
 */
export function createRefreshHandler(deps: RefreshDeps): RefreshHandler {
  return (event) => refreshTokens(requestOf(event), deps);
}

function requestOf(event: unknown): { force: boolean; reason: string } {
  if (
    typeof event === 'object' &&
    event !== null &&
    (event as { force?: unknown }).force === true
  ) {
    const reason = (event as { reason?: unknown }).reason;
    return { force: true, reason: typeof reason === 'string' ? reason.slice(0, 100) : 'on_demand' };
  }
  return { force: false, reason: 'schedule' };
}
