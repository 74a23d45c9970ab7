import type { Logger } from '@aws-lambda-powertools/logger';
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import type { Metrics } from '@aws-lambda-powertools/metrics';
import { logMetrics } from '@aws-lambda-powertools/metrics/middleware';
import middy from '@middy/core';
import {
  type RefreshDeps,
  type RefreshOutcome,
  type RefreshRequest,
  refreshTokens,
} from '../core/token-refresh.ts';

export interface RefreshHandlerDeps extends Omit<RefreshDeps, 'logger' | 'metrics'> {
  logger: Logger;
  metrics: Metrics;
}

/**
 * The token refresher: run by an EventBridge schedule, or invoked (RequestResponse) by the batch
 * function with `{"force": true, "reason": "…", "staleUpdatedAt": "…"|null}` when its token is
 * missing, expired or refused, and by the operator's `refresh` command with no `staleUpdatedAt`.
 * It answers the outcome and when the stored tokens were written and expire, never the tokens. Reserved concurrency 1 makes it the
 * single writer of the token secret, so two refreshes never race on a single-use refresh token.
 */
export function createRefreshHandler(deps: RefreshHandlerDeps) {
  return middy<unknown, RefreshOutcome>()
    .use(injectLambdaContext(deps.logger))
    .use(logMetrics(deps.metrics))
    .handler((event, context) =>
      refreshTokens(requestOf(event), {
        ...deps,
        remainingMs: () => context.getRemainingTimeInMillis(),
      }),
    );
}

function requestOf(event: unknown): RefreshRequest {
  if (
    typeof event === 'object' &&
    event !== null &&
    (event as { force?: unknown }).force === true
  ) {
    const { reason, staleUpdatedAt } = event as { reason?: unknown; staleUpdatedAt?: unknown };
    return {
      force: true,
      reason: typeof reason === 'string' ? reason.slice(0, 100) : 'on_demand',
      ...(typeof staleUpdatedAt === 'string' || staleUpdatedAt === null ? { staleUpdatedAt } : {}),
    };
  }
  return { force: false, reason: 'schedule' };
}
