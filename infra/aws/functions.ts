import { Annotations, Duration, type Stack } from 'aws-cdk-lib';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import * as iam from 'aws-cdk-lib/aws-iam';
import { SqsEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import { metricsNamespace } from '../../functions/core/metrics.ts';
import type { RetryPolicy } from '../../functions/core/retry-policy.ts';
import { ENV } from '../../functions/shared/config.ts';
import { secretNames } from '../../functions/shared/secret-names.ts';
import { type RelaySettings, refreshPolicy, secretWriteWarning } from './environments.ts';
import { RelayFunction, type RelayFunctionProps } from './relay-function.ts';
import type { RelayQueues, RelaySecrets } from './storage.ts';

/** The most messages Lambda's event source takes from a FIFO queue per invocation. */
const FIFO_EVENT_SOURCE_BATCH_SIZE = 10;

export interface RelayFunctions {
  readonly ingest: RelayFunction;
  readonly batch: RelayFunction;
  readonly refresh: RelayFunction;
}

/** What the functions work on. */
export interface FunctionResources {
  readonly queues: RelayQueues;
  readonly secrets: RelaySecrets;
  readonly dedupTable: dynamodb.Table;
  /** Each event's outcome (contract §1.6). */
  readonly outcomeTable: dynamodb.Table;
  readonly retry: RetryPolicy;
}

/**
 * The three functions, each allowed exactly what it needs on exactly its own resources. The
 * refresher comes first: the batch function is given its name.
 */
export function relayFunctions(
  stack: Stack,
  settings: RelaySettings,
  resources: FunctionResources,
): RelayFunctions {
  const common = {
    metricsNamespace: metricsNamespace(settings.name),
    logRetention: settings.logRetentionDays,
    logLevel: settings.logLevel,
  };
  const refresh = refreshFunction(stack, settings, common, resources.secrets);
  const batch = batchFunction(stack, settings, common, { ...resources, refresh });
  const ingest = ingestFunction(stack, settings, common, resources);
  return { ingest, batch, refresh };
}

type Common = Pick<RelayFunctionProps, 'metricsNamespace' | 'logRetention' | 'logLevel'>;

/** The token refresher, on its schedule: the single writer of the token secret. */
function refreshFunction(
  stack: Stack,
  settings: RelaySettings,
  common: Common,
  secrets: RelaySecrets,
): RelayFunction {
  const refresh = new RelayFunction(stack, 'Refresh', {
    ...common,
    name: 'refresh',
    serviceName: 'refresh',
    timeout: Duration.seconds(30),
    // One run at a time where the account allows a reservation; without one, runs that race
    // are kept apart by the compare-and-swap writes (functions/core/tokens/token-refresh.ts).
    ...(settings.reservedConcurrency ? { reservedConcurrentExecutions: 1 } : {}),
  });
  refresh.useSecret(ENV.CLIENT_SECRET_ID, secrets.client);
  // Put a pending version, then move AWSCURRENT to it only from the version read.
  refresh.useSecret(ENV.TOKEN_SECRET_ID, secrets.token, [
    'secretsmanager:GetSecretValue',
    'secretsmanager:PutSecretValue',
    'secretsmanager:UpdateSecretVersionStage',
  ]);
  const schedule = new events.Rule(stack, 'RefreshSchedule', {
    schedule: events.Schedule.expression(settings.refreshSchedule),
    targets: [
      new targets.LambdaFunction(refresh.function, {
        retryAttempts: 0,
        // Its period: a run leaves tokens written under 10 minutes ago to the next one, while
        // they outlast it (functions/core/tokens/token-freshness.ts).
        event: events.RuleTargetInput.fromObject({
          scheduleSeconds: refreshPolicy(settings).scheduleSeconds,
        }),
      }),
    ],
  });
  const warning = secretWriteWarning(settings);
  if (warning) Annotations.of(schedule).addWarningV2('mautic-relay:token-secret-writes', warning);
  return refresh;
}

/**
 * The batch function on the events queue: delivers to Mautic, dead-letters, asks for tokens,
 * and keeps its action ledger and Mautic's shared health in the de-duplication table.
 */
function batchFunction(
  stack: Stack,
  settings: RelaySettings,
  common: Common,
  {
    queues,
    secrets,
    dedupTable,
    outcomeTable,
    retry,
    refresh,
  }: FunctionResources & { refresh: RelayFunction },
): RelayFunction {
  const batch = new RelayFunction(stack, 'Batch', {
    ...common,
    name: 'batch',
    serviceName: 'batch',
    timeout: Duration.seconds(settings.batchTimeoutSeconds),
    // At least the event source's maximum concurrency: an account-wide throttle must not make
    // the mapping's invokes fail, each failure costing every event of the batch a receive. Only
    // where the account's quota allows it (environments.ts, reservedConcurrency).
    ...(settings.reservedConcurrency
      ? { reservedConcurrentExecutions: settings.maxConcurrency }
      : {}),
    environment: {
      [ENV.MAUTIC_BASE_URL]: settings.mauticBaseUrl,
      [ENV.EVENTS_QUEUE_URL]: queues.events.queueUrl,
      [ENV.DEAD_LETTER_QUEUE_URL]: queues.deadLetter.queueUrl,
      [ENV.REFRESH_FUNCTION_NAME]: refresh.function.functionName,
      [ENV.BATCH_SIZE]: String(settings.batchSize),
      [ENV.BATCH_WINDOW_SECONDS]: String(settings.batchingWindowSeconds),
      [ENV.RETRY_BASE_SECONDS]: String(retry.baseSeconds),
      [ENV.RETRY_MAX_DELAY_SECONDS]: String(retry.maxDelaySeconds),
      [ENV.RETRY_HORIZON_SECONDS]: String(retry.horizonSeconds),
      [ENV.MAX_RECEIVE_COUNT]: String(retry.maxReceiveCount),
      // The pacing's ceiling of calls in flight: every invocation the event source may run.
      [ENV.MAX_CONCURRENCY]: String(settings.maxConcurrency),
      [ENV.DEDUP_TABLE_NAME]: dedupTable.tableName,
      ...outcomeEnvironment(settings, outcomeTable),
    },
  });
  // From a FIFO queue the event source hands over at most 10 messages and has no batching
  // window: the function receives the rest of its batch itself, for BATCH_WINDOW_SECONDS.
  // The event source grants the batch role Receive, Delete, ChangeMessageVisibility,
  // GetQueueAttributes and GetQueueUrl on the events queue: all the function needs of it, its own
  // receives included (a batch call, DeleteMessageBatch say, needs its single call's action).
  batch.function.addEventSource(
    new SqsEventSource(queues.events, {
      batchSize: Math.min(FIFO_EVENT_SOURCE_BATCH_SIZE, settings.batchSize),
      reportBatchItemFailures: true,
      maxConcurrency: settings.maxConcurrency,
    }),
  );
  // Dead letters go in batches: SendMessageBatch needs sqs:SendMessage.
  allow(batch, ['sqs:SendMessage'], queues.deadLetter.queueArn);
  batch.useSecret(ENV.TOKEN_SECRET_ID, secrets.token);
  allow(batch, ['lambda:InvokeFunction'], refresh.function.functionArn);
  // The action ledger (addPoints at most once): claim (conditional put), read a claim it lost
  // (get), mark it done (update), free it after a call that was not applied (delete). Mautic's
  // shared health: one item, read (get) and written on the version read (conditional put).
  allow(
    batch,
    ['dynamodb:DeleteItem', 'dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem'],
    dedupTable.tableArn,
  );
  // Each batch's outcomes, 25 a call: written, never read.
  if (settings.outcomeRetentionSeconds > 0)
    allow(batch, ['dynamodb:BatchWriteItem'], outcomeTable.tableArn);
  return batch;
}

/** The outcome table and its retention, as both functions read them (0: they keep none). */
function outcomeEnvironment(settings: RelaySettings, outcomeTable: dynamodb.Table) {
  return {
    [ENV.OUTCOME_TABLE_NAME]: outcomeTable.tableName,
    [ENV.OUTCOME_RETENTION_SECONDS]: String(settings.outcomeRetentionSeconds),
  };
}

/** The ingest function behind the API: checks requests, remembers their ids, enqueues events. */
function ingestFunction(
  stack: Stack,
  settings: RelaySettings,
  common: Common,
  { queues, secrets, dedupTable, outcomeTable }: FunctionResources,
): RelayFunction {
  const ingest = new RelayFunction(stack, 'Ingest', {
    ...common,
    name: 'ingest',
    serviceName: 'ingest',
    timeout: Duration.seconds(10),
    environment: {
      [ENV.EVENTS_QUEUE_URL]: queues.events.queueUrl,
      [ENV.DEDUP_TABLE_NAME]: dedupTable.tableName,
      [ENV.DEDUP_WINDOW_SECONDS]: String(settings.dedupWindowSeconds),
      [ENV.MAX_RECORD_EVENTS_PER_MINUTE]: String(settings.maxRecordEventsPerMinute),
      ...(settings.entities === 'standard' ? {} : { [ENV.ENTITIES]: settings.entities.join(',') }),
      [ENV.CONTACT_MATCH_FIELDS]: settings.contactMatchFields.join(','),
      ...outcomeEnvironment(settings, outcomeTable),
      ...(settings.sources.length === 0
        ? {}
        : {
            [ENV.SOURCES_DOCUMENT]: settings.sourcesDocument,
            [ENV.SOURCES_SECRET_PREFIX]: secretNames(settings.name).sourcePrefix,
            [ENV.DEAD_LETTER_QUEUE_URL]: queues.deadLetter.queueUrl,
          }),
    },
  });
  // What Powertools idempotency does: claim (conditional put), read a claim it lost (get),
  // save the answer (update), free the id after a failure (delete); the ledger's progress of a
  // partial 503 (put, get); the records' counters (update, get). Nothing else.
  allow(
    ingest,
    ['dynamodb:DeleteItem', 'dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem'],
    dedupTable.tableArn,
  );
  allow(ingest, ['sqs:SendMessage'], queues.events.queueArn);
  // Each accepted event's `queued` (a source's ignored payload too), and GET /events' reads.
  if (settings.outcomeRetentionSeconds > 0) {
    allow(ingest, ['dynamodb:BatchGetItem', 'dynamodb:BatchWriteItem'], outcomeTable.tableArn);
  }
  // A source's payload that cannot be mapped is kept there, as a dead letter (contract §6).
  if (settings.sources.length > 0) {
    allow(ingest, ['sqs:SendMessage'], queues.deadLetter.queueArn);
  }
  ingest.useSecret(ENV.WEBHOOK_SECRET_ID, secrets.webhook);
  // Each source's own secret, found by name (SOURCES_SECRET_PREFIX): read, and only these.
  for (const secret of secrets.sources.values())
    allow(ingest, ['secretsmanager:GetSecretValue'], secret.secretArn);
  return ingest;
}

function allow(fn: RelayFunction, actions: string[], resource: string): void {
  fn.role.addToPolicy(new iam.PolicyStatement({ actions, resources: [resource] }));
}
