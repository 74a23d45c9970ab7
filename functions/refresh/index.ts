import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { loadRefreshConfig } from '../shared/config.ts';
import { buildRefreshHandler } from './compose.ts';

export const handler = buildRefreshHandler(loadRefreshConfig(process.env), {
  secrets: new SecretsManagerClient({}),
  logger: new Logger(),
  metrics: new Metrics(),
});
