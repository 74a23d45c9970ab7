import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SecretsManagerTokenVault } from '../adapters/secrets-manager-token-vault.ts';
import { MauticOAuthClient } from '../core/mautic-oauth.ts';
import { loadRefreshConfig } from '../shared/config.ts';
import { createRefreshHandler } from './handler.ts';

const config = loadRefreshConfig(process.env);
const clock = { now: () => Date.now() };

export const handler = createRefreshHandler({
  vault: new SecretsManagerTokenVault(new SecretsManagerClient({}), config),
  // The token call's timeout comes from the run's remaining time (see refreshTokens).
  granterFor: (client, timeoutMs) => new MauticOAuthClient({ ...client, fetch, clock, timeoutMs }),
  clock,
  logger: new Logger(),
  metrics: new Metrics(),
  refreshAheadSeconds: config.refreshAheadSeconds,
  refreshTokenLifetimeSeconds: config.refreshTokenLifetimeSeconds,
  unsaved: { value: undefined },
});
