import type { Logger } from '@aws-lambda-powertools/logger';
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import type { Metrics } from '@aws-lambda-powertools/metrics';
import { logMetrics } from '@aws-lambda-powertools/metrics/middleware';
import middy from '@middy/core';
import { type RefreshDeps, type RefreshOutcome, refreshTokens } from '../core/token-refresh.ts';

export interface RefreshHandlerDeps extends Omit<RefreshDeps, 'logger' | 'metrics'> {
  logger: Logger;
  metrics: Metrics;
}

/**
 * The token refresher: run by an EventBridge schedule, or invoked by the batch function with
 * `{"force": true, "reason": "…"}` after a second 401. Reserved concurrency 1 makes it the
 * single writer of the token secret, so two refreshes never race on a single-use refresh token.
 */
export function createRefreshHandler(deps: RefreshHandlerDeps) {
  return middy<unknown, RefreshOutcome>()
    .use(injectLambdaContext(deps.logger))
    .use(logMetrics(deps.metrics))
    .handler((event) => refreshTokens(requestOf(event), deps));
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
