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
import { WaitingTokenSource } from '../core/token-wait.ts';
import { loadBatchConfig } from '../shared/config.ts';
import { createBatchHandler } from './handler.ts';

const config = loadBatchConfig(process.env);
const clock = { now: () => Date.now() };
const logger = new Logger();

export const handler = createBatchHandler({
  api: new MauticApiClient({
    baseUrl: config.mauticBaseUrl,
    fetch,
    timeoutMs: config.mauticTimeoutMs,
  }),
  tokens: new WaitingTokenSource({
    reader: new SecretsManagerTokenStore(new SecretsManagerClient({}), config.tokenSecretId, {
      cacheMs: config.tokenCacheSeconds * 1000,
      clock,
    }),
    // One attempt: a throttled invoke means the refresher is busy, and the caller polls instead.
    refresher: new LambdaRefreshRequester(
      new LambdaClient({ maxAttempts: 1 }),
      config.refreshFunctionName,
    ),
    clock,
    sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
    logger,
    defaultWaitMs: 10_000,
  }),
  queues: new SqsDeliveryQueues(new SQSClient({}), config),
  logger,
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
