import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import { LambdaClient } from '@aws-sdk/client-lambda';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SQSClient } from '@aws-sdk/client-sqs';
import { LambdaRefreshRequester } from '../adapters/lambda-refresh-requester.ts';
import { SecretsManagerTokenStore } from '../adapters/secrets-manager-token-store.ts';
import { SqsDeliveryQueues } from '../adapters/sqs-delivery-queues.ts';
import { DEFAULT_DELIVERY_OPTIONS } from '../core/delivery.ts';
import { MauticApiClient } from '../core/mautic-api.ts';
import { loadBatchConfig } from '../shared/config.ts';
import { createBatchHandler } from './handler.ts';

const config = loadBatchConfig(process.env);
const clock = { now: () => Date.now() };

export const handler = createBatchHandler({
  api: new MauticApiClient({
    baseUrl: config.mauticBaseUrl,
    fetch,
    timeoutMs: config.mauticTimeoutMs,
  }),
  tokens: new SecretsManagerTokenStore(new SecretsManagerClient({}), config.tokenSecretId, {
    cacheMs: config.tokenCacheSeconds * 1000,
    clock,
  }),
  refresher: new LambdaRefreshRequester(new LambdaClient({}), config.refreshFunctionName),
  queues: new SqsDeliveryQueues(new SQSClient({}), config),
  logger: new Logger(),
  metrics: new Metrics(),
  clock,
  sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
  random: Math.random,
  learnedLimit: { value: undefined },
  options: {
    ...DEFAULT_DELIVERY_OPTIONS,
    batchSize: config.batchSize,
    concurrency: config.deliveryConcurrency,
    maxDelaySeconds: config.maxDelaySeconds,
  },
});
