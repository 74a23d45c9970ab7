import {
  type RefreshDeps,
  type RefreshOutcome,
  type RefreshRequest,
  refreshTokens,
} from '../core/tokens/token-refresh.ts';

export type RefreshHandler = (
  event: unknown,
  context?: { getRemainingTimeInMillis(): number },
) => Promise<RefreshOutcome>;

/**
 * The token refresher: run by an EventBridge schedule, whose input says its period
 * (`{"scheduleSeconds": 300}`: a run leaves recently written tokens to the next one), or
 * invoked (RequestResponse) by the batch function with
 * `{"force": true, "reason": "…", "staleUpdatedAt": "…"|null}` when its token is missing, expired
 * or refused, and by the operator's `refresh` command with no `staleUpdatedAt`.
 * It answers the outcome and when the stored tokens were written and expire, never the tokens.
 * Where the environment reserves concurrency (`reservedConcurrency`), one run at a time; where it
 * does not, runs may overlap and race on the single-use refresh token, and the compare-and-swap
 * writes keep the rotated one (functions/core/tokens/token-refresh.ts; test/refresh/race.test.ts).
 */
export function createRefreshHandler(deps: RefreshDeps): RefreshHandler {
  return (event, context) =>
    refreshTokens(requestOf(event), {
      ...deps,
      // The token call gets most of what is left (see refreshTokens).
      ...(context ? { remainingMs: () => context.getRemainingTimeInMillis() } : {}),
    });
}

function requestOf(event: unknown): RefreshRequest {
  const { force, reason, staleUpdatedAt, scheduleSeconds } = (
    typeof event === 'object' && event !== null ? event : {}
  ) as Record<string, unknown>;
  if (force === true) {
    return {
      force: true,
      reason: typeof reason === 'string' ? reason.slice(0, 100) : 'on_demand',
      ...(typeof staleUpdatedAt === 'string' || staleUpdatedAt === null ? { staleUpdatedAt } : {}),
    };
  }
  // Without a period (a rule with no input), the longest schedule the stack allows is assumed.
  return typeof scheduleSeconds === 'number' &&
    Number.isInteger(scheduleSeconds) &&
    scheduleSeconds > 0
    ? { force: false, reason: 'schedule', scheduleSeconds }
    : { force: false, reason: 'schedule' };
}
