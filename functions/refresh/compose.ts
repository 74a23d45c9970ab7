import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '@aws-lambda-powertools/logger';
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import type { Metrics } from '@aws-lambda-powertools/metrics';
import { logMetrics } from '@aws-lambda-powertools/metrics/middleware';
import type { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import middy from '@middy/core';
import type { Context } from 'aws-lambda';
import { SecretsManagerTokenVault } from '../adapters/secrets-manager-token-vault.ts';
import { MauticOAuthClient } from '../core/mautic/mautic-oauth.ts';
import type { Clock, FetchLike } from '../core/ports.ts';
import type { RefreshOutcome } from '../core/tokens/token-refresh.ts';
import type { RefreshConfig } from '../shared/config.ts';
import { createRefreshHandler } from './handler.ts';

/** What the refresher talks to: Secrets Manager (or its stand-in) and Mautic. */
export interface RefreshEdges {
  secrets: SecretsManagerClient;
  logger: Logger;
  metrics: Metrics;
  fetch?: FetchLike;
  clock?: Clock;
  /** The command that authorizes this relay again, as its log names it (the local stack's). */
  authorizeCommand?: string;
  /** What to do about a credential Mautic refuses, as its log says it (the local stack's). */
  credentialsFix?: string;
}

/**
 * The refresher's composition root: validated configuration and the edges in, the Lambda
 * handler out. `index.ts` (Lambda) and the local stack both build the function with it.
 */
export function buildRefreshHandler(config: Readonly<RefreshConfig>, edges: RefreshEdges) {
  const clock = edges.clock ?? Date;
  const handler = createRefreshHandler({
    vault: new SecretsManagerTokenVault(edges.secrets, config),
    // The token call's timeout follows the run's remaining time (see refreshTokens).
    granterFor: (client, timeoutMs) =>
      new MauticOAuthClient({ ...client, fetch: edges.fetch ?? fetch, clock, timeoutMs }),
    clock,
    logger: edges.logger,
    metrics: edges.metrics,
    refreshAheadSeconds: config.refreshAheadSeconds,
    refreshTokenLifetimeSeconds: config.refreshTokenLifetimeSeconds,
    authorizeCommand: edges.authorizeCommand,
    credentialsFix: edges.credentialsFix,
    sleep: (ms) => sleep(ms),
    // Tokens that could not be stored, kept for the life of the container.
    unsaved: { value: undefined },
  });
  return middy<unknown, RefreshOutcome, Error, Context>(handler)
    .use(injectLambdaContext(edges.logger))
    .use(logMetrics(edges.metrics));
}
