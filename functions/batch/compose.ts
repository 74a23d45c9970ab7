import type { Logger } from '@aws-lambda-powertools/logger';
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import type { Metrics } from '@aws-lambda-powertools/metrics';
import { logMetrics } from '@aws-lambda-powertools/metrics/middleware';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import type { SQSClient } from '@aws-sdk/client-sqs';
import middy from '@middy/core';
import type { Context, SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { DynamoDbActionLedger } from '../adapters/dynamodb-action-ledger.ts';
import { DynamoDbHealthStore } from '../adapters/dynamodb-mautic-health.ts';
import { DynamoDbOutcomeStore } from '../adapters/dynamodb-outcome-store.ts';
import { withoutSdkLogging } from '../adapters/sdk-clients.ts';
import { SecretsManagerTokenStore } from '../adapters/secrets-manager-token-store.ts';
import { SqsDeliveryQueues } from '../adapters/sqs-delivery-queues.ts';
import { DEFAULT_DELIVERY_OPTIONS } from '../core/delivery/delivery-calls.ts';
import { MauticHealth } from '../core/delivery/mautic-health.ts';
import { MauticItemTime } from '../core/delivery/mautic-item-time.ts';
import { MauticApiClient } from '../core/mautic/mautic-api.ts';
import type { Clock, FetchLike, RefreshRequester } from '../core/ports.ts';
import { TOKEN_POLL } from '../core/retry-policy.ts';
import { WaitingTokenSource } from '../core/tokens/token-wait.ts';
import type { BatchConfig } from '../shared/config.ts';
import { createBatchHandler } from './handler.ts';

const LAMBDA_MAX_TIMEOUT_MS = 900_000;
/** Lambda's event source hands at most this many messages of a FIFO queue (the stack's mapping). */
const FIFO_HAND_OVER = 10;

/** What the batch function talks to: in Lambda the AWS clients, locally the stand-ins. */
export interface BatchEdges {
  secrets: SecretsManagerClient;
  sqs: SQSClient;
  /** DynamoDB's client: the de-duplication table (the action ledger, Mautic's shared health), and the outcome table. */
  dynamodb: DynamoDBClient;
  /** The token refresher, run synchronously: a RequestResponse invoke in the cloud, a call locally. */
  refresher: RefreshRequester;
  logger: Logger;
  metrics: Metrics;
  fetch?: FetchLike;
  clock?: Clock;
}

/** Where each event's outcome is kept (contract §1.6); none when OUTCOME_RETENTION_SECONDS is 0. */
function outcomeStore(
  config: { outcomes: { tableName: string; retentionSeconds: number } | undefined },
  dynamodb: DynamoDBClient,
  clock: Clock,
): DynamoDbOutcomeStore | undefined {
  if (config.outcomes === undefined) return undefined;
  const { tableName, retentionSeconds } = config.outcomes;
  return new DynamoDbOutcomeStore(dynamodb, tableName, { retentionSeconds, clock });
}

/** Calls `tell` with each value the first time it is seen: a version logged once per container. */
function onceEach(tell: (value: string) => void): (value: string) => void {
  const seen = new Set<string>();
  return (value) => {
    if (seen.has(value)) return;
    seen.add(value);
    tell(value);
  };
}

/** Mautic's health, one view per container of the state every invocation shares in the table. */
function sharedHealth(
  config: Readonly<BatchConfig>,
  edges: BatchEdges,
  time: { clock: Clock; sleep: (ms: number) => Promise<void> },
): MauticHealth {
  const store = new DynamoDbHealthStore(edges.dynamodb, config.actionLedgerTableName);
  return new MauticHealth({ store, ...time, logger: edges.logger, settings: config.circuit });
}

/**
 * The batch function's composition root: validated configuration and the edges in, the Lambda
 * handler out. `index.ts` (Lambda) and the local stack both build the function with it.
 */
export function buildBatchHandler(config: Readonly<BatchConfig>, edges: BatchEdges) {
  const clock = edges.clock ?? Date;
  for (const client of [edges.sqs, edges.secrets, edges.dynamodb]) withoutSdkLogging(client);
  // Mautic's version, as its last answer named it: logged once per version, read by the delivery.
  const mauticVersion: { value?: string } = {};
  const logVersion = onceEach((version) =>
    edges.logger.info("Mautic's version", { event: 'mautic_version', mauticVersion: version }),
  );
  const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
  const handler = createBatchHandler({
    api: new MauticApiClient({
      baseUrl: config.mauticBaseUrl,
      fetch: edges.fetch ?? fetch,
      // Each call gets its own timeout from Mautic's pace (`call-budget.ts`), within the
      // invocation's deadline: the longest Lambda timeout is only an outer bound.
      timeoutMs: LAMBDA_MAX_TIMEOUT_MS,
      now: () => clock.now(),
      onVersion: (version) => {
        mauticVersion.value = version.slice(0, 64);
        logVersion(mauticVersion.value);
      },
    }),
    // Waits for the refresher instead of giving events back (contract §2).
    tokens: new WaitingTokenSource({
      reader: new SecretsManagerTokenStore(edges.secrets, config.tokenSecretId, {
        cacheMs: config.tokenCacheSeconds * 1000,
        clock,
      }),
      refresher: edges.refresher,
      clock,
      sleep,
      logger: edges.logger,
      // Delivery always says how long; this is for any other caller.
      defaultWaitMs: TOKEN_POLL.defaultWaitMs,
    }),
    queues: new SqsDeliveryQueues(edges.sqs, config, edges.logger),
    ledger: new DynamoDbActionLedger(edges.dynamodb, config.actionLedgerTableName, { clock }),
    outcomes: outcomeStore(config, edges.dynamodb, clock),
    retry: config.retry,
    logger: edges.logger,
    metrics: edges.metrics,
    clock,
    sleep,
    random: Math.random,
    // Lives as long as the container, like Mautic's limit it learned.
    learnedLimit: { value: undefined },
    backlog: { seen: false },
    itemTime: new MauticItemTime(),
    namedPause: {},
    mauticVersion,
    health: sharedHealth(config, edges, { clock, sleep }),
    options: {
      ...DEFAULT_DELIVERY_OPTIONS,
      batchSize: config.batchSize,
      concurrency: config.deliveryConcurrency,
      maxDelaySeconds: config.maxDelaySeconds,
      // A time Mautic names holds the container no longer than the longest delay after a 429.
      maxNamedPauseMs: config.maxDelaySeconds * 1000,
      batchWindowMs: config.batchWindowSeconds * 1000,
      // The mapping's batch size, as the stack sets it (and the local stack's pollers take).
      handOver: Math.min(FIFO_HAND_OVER, config.batchSize),
      callTimeoutCapMs: config.mauticTimeoutMs,
    },
  });
  return middy<SQSEvent, SQSBatchResponse, Error, Context>(handler)
    .use(injectLambdaContext(edges.logger))
    .use(logMetrics(edges.metrics));
}
