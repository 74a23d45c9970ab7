import { randomBytes } from 'node:crypto';
import { resolve } from 'node:path';
import { Metrics } from '@aws-lambda-powertools/metrics';
import { CreateSecretCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { GetQueueAttributesCommand, SQSClient } from '@aws-sdk/client-sqs';
import * as z from 'zod';
import { buildBatchHandler } from '../../functions/batch/compose.ts';
import { ConfigError } from '../../functions/core/errors.ts';
import { MAX_RETRY_HORIZON_SECONDS, retryPolicy } from '../../functions/core/retry-policy.ts';
import { openSourcesFile } from '../../functions/ingest/compose.ts';
import { buildRefreshHandler } from '../../functions/refresh/compose.ts';
import {
  commaList,
  contactMatchFieldList,
  DEFAULTS,
  dedupWindow,
  ENV,
  entityList,
  integer,
  loadBatchConfig,
  loadIngestConfig,
  loadRefreshConfig,
  outcomeRetention,
  secretNames,
} from '../../functions/shared/config.ts';
import {
  DEFAULT_SIMULATOR_CLIENT,
  type MauticSimulator,
  startMauticSimulator,
} from '../../mautic-simulator/server.ts';
import { endpointsPathIn, writeLocalEndpoints } from '../cli/local-endpoints.ts';
import { startControlServer } from './control.ts';
import { startDedupStore } from './dynamodb-local.ts';
import { startFauxqsThread } from './fauxqs-thread.ts';
import { startIngestThread } from './ingest-thread.ts';
import { lambdaContext } from './lambda-context.ts';
import { LineLogger } from './line-logger.ts';
import { LocalRefresher } from './local-refresher.ts';
import { startSecretsManagerFake } from './secrets-manager-fake.ts';
import { createQueuePair, FIFO_MAX_BATCH_SIZE, SqsEventSource } from './sqs-event-source.ts';

/** Contract §3, and a few knobs beyond it (documented in docs/configuration.md). */
const localSchema = z
  .object({
    PORT: integer(0, 65_535, 3000),
    MAUTIC_BASE_URL: z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' }).optional(),
    MAUTIC_CLIENT_ID: z.string().optional(),
    MAUTIC_CLIENT_SECRET: z.string().optional(),
    MAUTIC_GRANT_TYPE: z
      .enum(['client_credentials', 'authorization_code'])
      .default('client_credentials'),
    WEBHOOK_SECRET: commaList,
    INGEST_API_KEYS: commaList,
    BATCH_SIZE: integer(1, 200, DEFAULTS.batchSize),
    BATCH_WINDOW_SECONDS: integer(0, 300, DEFAULTS.batchWindowSeconds),
    // Unset: derived from the retry settings (contract §3), as the stack derives it.
    MAX_RECEIVE_COUNT: integer(1, 1000, 0).transform((value) => value || undefined),
    RETRY_BASE_SECONDS: integer(1, 43_200, DEFAULTS.retryBaseSeconds),
    RETRY_MAX_DELAY_SECONDS: integer(1, 43_200, DEFAULTS.retryMaxDelaySeconds),
    RETRY_HORIZON_SECONDS: integer(1, MAX_RETRY_HORIZON_SECONDS, DEFAULTS.retryHorizonSeconds),
    MAX_CONCURRENCY: integer(1, 20, 2),
    VISIBILITY_TIMEOUT_SECONDS: integer(1, 43_200, 30),
    BATCH_TIMEOUT_SECONDS: integer(1, 900, 10),
    REFRESH_INTERVAL_SECONDS: integer(1, 86_400, 300),
    TOKEN_CACHE_SECONDS: integer(0, 3600, DEFAULTS.tokenCacheSeconds),
    LOG_LEVEL: z.enum(['DEBUG', 'INFO']).default('INFO'),
    /** The port `authorize --local` listens on; the embedded simulator registers its redirect URI. */
    AUTHORIZE_PORT: integer(1, 65_535, 8765),
    ENTITIES: entityList,
    CONTACT_MATCH_FIELDS: contactMatchFieldList,
    DEDUP_WINDOW_SECONDS: dedupWindow,
    /** How long each event's outcome is kept (contract §1.6); 0 keeps none. */
    OUTCOME_RETENTION_SECONDS: outcomeRetention,
    /** The sources document (contract §6), with its secrets; read again when it changes. */
    SOURCES_FILE: z.string().min(1).optional(),
  })
  .superRefine((env, ctx) => {
    if (env.MAUTIC_BASE_URL && (!env.MAUTIC_CLIENT_ID || !env.MAUTIC_CLIENT_SECRET)) {
      ctx.addIssue({
        code: 'custom',
        path: ['MAUTIC_CLIENT_ID'],
        message: 'and MAUTIC_CLIENT_SECRET are required with MAUTIC_BASE_URL',
      });
    }
    if (env.BATCH_TIMEOUT_SECONDS > env.VISIBILITY_TIMEOUT_SECONDS) {
      ctx.addIssue({
        code: 'custom',
        path: ['BATCH_TIMEOUT_SECONDS'],
        message: 'must not exceed VISIBILITY_TIMEOUT_SECONDS',
      });
    }
  });
export type LocalConfig = z.output<typeof localSchema>;

/** Reads the local stack's environment, naming every bad variable. */
export function loadLocalConfig(env: Readonly<Record<string, string | undefined>>): LocalConfig {
  const result = localSchema.safeParse(env);
  if (result.success) return result.data;
  throw new ConfigError(
    `Invalid configuration: ${result.error.issues.map((i) => `${i.path.join('.')} ${i.message}`).join('; ')}`,
  );
}

export interface LocalStack {
  readonly ingestUrl: string;
  /** Stops taking requests, finishes the batches in hand, then stops everything. */
  stop(): Promise<void>;
}

/**
 * The whole relay on one machine (contract §3): the real ingest, batch and refresh handlers, with
 * local edges in place of AWS: an HTTP front for API Gateway, fauxqs for SQS (events queue and
 * dead-letter queue with the stack's redrive), pollers that feed the batch handler as the event
 * source mapping does, a Secrets Manager stand-in for the token store, the refresher on a timer
 * and on demand, and, with no MAUTIC_BASE_URL, the Mautic simulator.
 */
export async function startLocalStack(
  config: LocalConfig,
  print: (line: string) => void,
  options: { endpointsDir?: string } = {},
): Promise<LocalStack> {
  const stops: Array<() => Promise<void>> = [];
  const stopAll = async () => {
    for (const stop of stops.splice(0).reverse()) await stop().catch(() => {});
  };
  try {
    return await start(config, print, stops, stopAll, options);
  } catch (error) {
    await stopAll();
    throw error;
  }
}

async function start(
  config: LocalConfig,
  print: (line: string) => void,
  stops: Array<() => Promise<void>>,
  stopAll: () => Promise<void>,
  options: { endpointsDir?: string },
): Promise<LocalStack> {
  // First, before anything starts: a SOURCES_FILE that cannot work is refused, naming the source
  // and the problem. The ingest thread compiles it again for itself (compiled expressions cannot
  // cross to a thread), then watches it.
  const sourcesFile = config.SOURCES_FILE === undefined ? undefined : resolve(config.SOURCES_FILE);
  const sourceNames = sourcesFile === undefined ? [] : openSourcesFile(sourcesFile).names();
  const logger = new LineLogger({ print, debug: config.LOG_LEVEL === 'DEBUG' });
  // Metrics are the cloud's business; locally the line logger tells what happened.
  process.env.POWERTOOLS_METRICS_DISABLED = 'true';
  const metrics = new Metrics({ namespace: 'MauticBatchRelay/local', serviceName: 'local' });
  const retry = retryPolicy({
    baseSeconds: config.RETRY_BASE_SECONDS,
    maxDelaySeconds: config.RETRY_MAX_DELAY_SECONDS,
    horizonSeconds: config.RETRY_HORIZON_SECONDS,
    maxReceiveCount: config.MAX_RECEIVE_COUNT,
  });
  const localAws = {
    region: 'us-east-1',
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
  };

  let simulator: MauticSimulator | undefined;
  let credential: {
    baseUrl: string;
    clientId: string;
    clientSecret: string;
    grantType: LocalConfig['MAUTIC_GRANT_TYPE'];
  };
  if (config.MAUTIC_BASE_URL) {
    credential = {
      baseUrl: config.MAUTIC_BASE_URL,
      clientId: config.MAUTIC_CLIENT_ID ?? '',
      clientSecret: config.MAUTIC_CLIENT_SECRET ?? '',
      grantType: config.MAUTIC_GRANT_TYPE,
    };
  } else {
    const sim = await startMauticSimulator({
      clients: [
        {
          ...DEFAULT_SIMULATOR_CLIENT,
          // What `authorize --local` sends, so the authorization_code flow can be tried here.
          redirectUris: [`http://127.0.0.1:${config.AUTHORIZE_PORT}/callback`],
        },
      ],
    });
    simulator = sim;
    stops.push(() => sim.close());
    credential = {
      baseUrl: sim.url,
      clientId: DEFAULT_SIMULATOR_CLIENT.clientId,
      clientSecret: DEFAULT_SIMULATOR_CLIENT.clientSecret,
      grantType: config.MAUTIC_GRANT_TYPE,
    };
  }

  const secretsFake = await startSecretsManagerFake();
  stops.push(() => secretsFake.close());
  const secrets = new SecretsManagerClient({ ...localAws, endpoint: secretsFake.endpoint });
  stops.push(async () => secrets.destroy());
  const names = secretNames('local');
  const ids = { clientSecretId: names.client, tokenSecretId: names.token };
  await secrets.send(
    new CreateSecretCommand({ Name: ids.clientSecretId, SecretString: JSON.stringify(credential) }),
  );
  await secrets.send(new CreateSecretCommand({ Name: ids.tokenSecretId, SecretString: '{}' }));

  // On a thread of its own: the batch handler keeps this loop, the ingest one of its own.
  const fauxqs = await startFauxqsThread();
  stops.push(() => fauxqs.stop());
  const sqs = new SQSClient({ ...localAws, endpoint: `http://127.0.0.1:${fauxqs.port}` });
  stops.push(async () => sqs.destroy());
  // Runs after the pollers have stopped: say what the in-memory queues still held.
  stops.push(async () => {
    const left = await queueCounts(sqs, queues.queueUrl);
    const dead = await queueCounts(sqs, queues.deadLetterQueueUrl);
    if (left > 0)
      print(`${events(left)} still queued; the local queues live in memory, so they are gone.`);
    if (dead > 0) print(`${events(dead)} in the dead-letter queue.`);
  });
  const queues = await createQueuePair(sqs, {
    name: 'mautic-relay-events',
    maxReceiveCount: retry.maxReceiveCount,
    visibilityTimeoutSeconds: config.VISIBILITY_TIMEOUT_SECONDS,
  });

  // The refresher runs one at a time, as reserved concurrency 1 makes it in the cloud.
  const refresh = buildRefreshHandler(
    loadRefreshConfig({
      [ENV.CLIENT_SECRET_ID]: ids.clientSecretId,
      [ENV.TOKEN_SECRET_ID]: ids.tokenSecretId,
    }),
    { secrets, logger, metrics, authorizeCommand: authorizeCommand(config.AUTHORIZE_PORT) },
  );
  const refresher = new LocalRefresher(
    (event) => refresh(event, lambdaContext('refresh', 30_000)),
    logger,
    config.REFRESH_INTERVAL_SECONDS,
  );
  await refresher.scheduled();
  const timer = setInterval(
    () => void refresher.scheduled(),
    config.REFRESH_INTERVAL_SECONDS * 1000,
  );
  stops.push(async () => {
    clearInterval(timer);
    await refresher.idle();
  });

  // The de-duplication table (issue 13) and the action ledger's (issue 22): dynalite, living as
  // long as the local stack. Started before the batch function and so stopped after it: the
  // batches it finishes on the way out still use the ledger.
  const dedup = await startDedupStore(config.DEDUP_WINDOW_SECONDS);
  stops.push(() => dedup.close());
  // Each event's outcome (contract §1.6), in the same dynalite, written by both functions.
  const outcomeSettings = {
    [ENV.OUTCOME_TABLE_NAME]: dedup.outcomeTableName,
    [ENV.OUTCOME_RETENTION_SECONDS]: String(config.OUTCOME_RETENTION_SECONDS),
  };
  const batch = buildBatchHandler(
    loadBatchConfig({
      [ENV.MAUTIC_BASE_URL]: credential.baseUrl,
      [ENV.TOKEN_SECRET_ID]: ids.tokenSecretId,
      [ENV.EVENTS_QUEUE_URL]: queues.queueUrl,
      [ENV.DEAD_LETTER_QUEUE_URL]: queues.deadLetterQueueUrl,
      [ENV.REFRESH_FUNCTION_NAME]: 'local-refresher',
      [ENV.BATCH_SIZE]: String(config.BATCH_SIZE),
      [ENV.BATCH_WINDOW_SECONDS]: String(config.BATCH_WINDOW_SECONDS),
      [ENV.TOKEN_CACHE_SECONDS]: String(config.TOKEN_CACHE_SECONDS),
      [ENV.RETRY_BASE_SECONDS]: String(config.RETRY_BASE_SECONDS),
      [ENV.RETRY_MAX_DELAY_SECONDS]: String(config.RETRY_MAX_DELAY_SECONDS),
      [ENV.RETRY_HORIZON_SECONDS]: String(config.RETRY_HORIZON_SECONDS),
      [ENV.MAX_RECEIVE_COUNT]: String(retry.maxReceiveCount),
      [ENV.DEDUP_TABLE_NAME]: dedup.tableName,
      ...outcomeSettings,
    }),
    {
      secrets,
      sqs,
      dynamodb: dedup.client,
      // Like the RequestResponse invoke: a call into the one-at-a-time refresher.
      refresher,
      logger,
      metrics,
    },
  );
  // One mapping with the function's concurrency: its pollers gather ahead of the invocations,
  // and make their SQS calls without the SDK's CPU cost, which is not the function's in the cloud.
  // As Lambda's mapping on a FIFO queue: batches of at most 10, no window; the batch function
  // receives the rest of its BATCH_SIZE itself within BATCH_WINDOW_SECONDS.
  const mappingSqs = fauxqs.mappingSqs();
  stops.push(async () => mappingSqs.destroy());
  const poller = new SqsEventSource({
    sqs: mappingSqs,
    queueUrl: queues.queueUrl,
    queueArn: queues.queueArn,
    handler: batch,
    batchSize: Math.min(FIFO_MAX_BATCH_SIZE, config.BATCH_SIZE),
    batchWindowMs: 0,
    functionTimeoutMs: config.BATCH_TIMEOUT_SECONDS * 1000,
    maxConcurrency: config.MAX_CONCURRENCY,
    onError: (error) => logger.warn('Polling the events queue failed', { error: String(error) }),
  });
  poller.start();
  stops.push(() => poller.stop());

  const generatedSecret = config.WEBHOOK_SECRET.length === 0;
  const webhookSecrets = generatedSecret
    ? [`whsec_${randomBytes(32).toString('base64')}`]
    : config.WEBHOOK_SECRET;
  // --- operator commands (issue 14): the sender credentials live in the Secrets Manager
  // stand-in and the ingest reads them as in the cloud (WEBHOOK_SECRET_ID, a 1 s cache), so
  // `npx mautic-relay senders … --local` changes them while the stack runs.
  await secrets.send(
    new CreateSecretCommand({
      Name: names.webhook,
      // The `senders` format (functions/core/sender-credentials.ts), created now.
      SecretString: JSON.stringify({
        senders: [
          ...webhookSecrets.map((secret, i) => ({
            id: `webhook-secret-${i + 1}`,
            kind: 'webhook_secret',
            secret,
            createdAt: new Date().toISOString(),
          })),
          ...config.INGEST_API_KEYS.map((secret, i) => ({
            id: `api-key-${i + 1}`,
            kind: 'api_key',
            secret,
            createdAt: new Date().toISOString(),
          })),
        ],
      }),
    }),
  );
  const ingestConfig = loadIngestConfig({
    [ENV.EVENTS_QUEUE_URL]: queues.queueUrl,
    [ENV.WEBHOOK_SECRET_ID]: names.webhook,
    [ENV.CREDENTIALS_CACHE_SECONDS]: '1',
    [ENV.ENTITIES]: config.ENTITIES.join(','),
    [ENV.CONTACT_MATCH_FIELDS]: config.CONTACT_MATCH_FIELDS.join(','),
    [ENV.DEDUP_WINDOW_SECONDS]: String(config.DEDUP_WINDOW_SECONDS),
    [ENV.DEDUP_TABLE_NAME]: dedup.tableName,
    ...outcomeSettings,
    // Where a source's payload that cannot be mapped is kept (contract §6), as in the cloud.
    ...(sourcesFile === undefined
      ? {}
      : { [ENV.DEAD_LETTER_QUEUE_URL]: queues.deadLetterQueueUrl }),
  });
  // On a thread of its own, as a function of its own: requests and deliveries do not wait on
  // each other's event loop.
  const front = await startIngestThread(
    {
      config: ingestConfig,
      sqsEndpoint: `http://127.0.0.1:${fauxqs.port}`,
      secretsEndpoint: secretsFake.endpoint,
      dynamodbEndpoint: dedup.endpoint,
      port: config.PORT,
      debug: config.LOG_LEVEL === 'DEBUG',
      ...(sourcesFile === undefined ? {} : { sourcesFile }),
    },
    print,
  );
  stops.push(() => front.close());
  const ingestUrl = `${front.url}/events`;

  // For the operator commands' --local: a control endpoint (refresh now), and below, the file
  // that says where everything is.
  const control = await startControlServer({ refresher, logger });
  stops.push(() => control.close());

  print(`Mautic batch relay, local stack`);
  print(
    `  Mautic:        ${simulator ? `${credential.baseUrl} (embedded simulator)` : credential.baseUrl}`,
  );
  print(
    `  queues:        fauxqs FIFO (a message group per record), batches of ${config.BATCH_SIZE} within ${config.BATCH_WINDOW_SECONDS} s; failures retried for ${retry.horizonSeconds} s (delays ${retry.baseSeconds}–${retry.maxDelaySeconds} s, at most ${retry.maxReceiveCount} receives)`,
  );
  print(
    `  token store:   Secrets Manager stand-in at ${secretsFake.endpoint} (refresh every ${config.REFRESH_INTERVAL_SECONDS} s)`,
  );
  print(`  de-duplication: ${dedup.description}`);
  print(
    `  outcomes:      ${config.OUTCOME_RETENTION_SECONDS === 0 ? 'off (OUTCOME_RETENTION_SECONDS=0)' : `kept ${config.OUTCOME_RETENTION_SECONDS} s in dynalite at ${dedup.endpoint} (GET ${front.url}/events/ID, npx mautic-relay events --local)`}`,
  );
  if (sourcesFile !== undefined) {
    print(
      `  sources:       ${sourceNames.join(', ') || 'none'} (POST ${front.url}/sources/NAME; ${sourcesFile}, read again when it changes)`,
    );
  }
  if (generatedSecret) print(`  webhook secret (generated): ${webhookSecrets[0]}`);
  if (credential.grantType === 'authorization_code') {
    // The tokens come from a person approving the relay; until then events wait in the queue.
    print('Authorize the relay (authorization_code), then it delivers:');
    print(`  ${authorizeCommand(config.AUTHORIZE_PORT)}`);
  }
  print('Send a signed sample event:');
  print(
    `  echo '{"entity":"contacts","action":"create","data":{"email":"ann@example.com","firstname":"Ann"}}' | ${generatedSecret ? `WEBHOOK_SECRET=${webhookSecrets[0]} ` : ''}npx mautic-relay send --url ${ingestUrl}`,
  );
  // Where `npx mautic-relay … --local` finds this stack.
  if (options.endpointsDir !== undefined) {
    const removeEndpoints = writeLocalEndpoints(endpointsPathIn(options.endpointsDir), {
      ingestUrl,
      sqsEndpoint: `http://127.0.0.1:${fauxqs.port}`,
      queueUrl: queues.queueUrl,
      deadLetterQueueUrl: queues.deadLetterQueueUrl,
      secretsEndpoint: secretsFake.endpoint,
      tokenSecretId: ids.tokenSecretId,
      clientSecretId: ids.clientSecretId,
      webhookSecretId: names.webhook,
      ...(sourcesFile === undefined ? {} : { sourcesFile }),
      entities: config.ENTITIES,
      contactMatchFields: config.CONTACT_MATCH_FIELDS,
      controlUrl: control.url,
      dynamodbEndpoint: dedup.endpoint,
      outcomeTableName: dedup.outcomeTableName,
      outcomeRetentionSeconds: config.OUTCOME_RETENTION_SECONDS,
      pid: process.pid,
      startedAt: new Date().toISOString(),
    });
    // Pushed last, so it runs first: the commands stop finding the stack as soon as it stops.
    stops.push(async () => removeEndpoints());
  }
  print(
    'Operator commands: npx mautic-relay status --local (dead-letters, redrive, events, senders)',
  );
  print(`Ready: ingest listening on ${ingestUrl} (Ctrl-C to stop)`);

  let stopping: Promise<void> | undefined;
  return {
    ingestUrl,
    stop: () => {
      stopping ??= stopAll();
      return stopping;
    },
  };
}

async function queueCounts(sqs: SQSClient, queueUrl: string): Promise<number> {
  const { Attributes = {} } = await sqs.send(
    new GetQueueAttributesCommand({
      QueueUrl: queueUrl,
      AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
    }),
  );
  return (
    Number(Attributes.ApproximateNumberOfMessages ?? 0) +
    Number(Attributes.ApproximateNumberOfMessagesNotVisible ?? 0)
  );
}

/** "1 event was", "2 events were". */
function events(count: number): string {
  return count === 1 ? '1 event was' : `${count} events were`;
}

/** The operator command that authorizes this stack (its redirect URI's port, when not 8765). */
function authorizeCommand(port: number): string {
  return `npx mautic-relay authorize --local${port === 8765 ? '' : ` --port ${port}`}`;
}
