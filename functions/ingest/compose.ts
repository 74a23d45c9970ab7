import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Logger } from '@aws-lambda-powertools/logger';
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import type { SQSClient } from '@aws-sdk/client-sqs';
import { DynamoDbOutcomeStore } from '../adapters/dynamodb-outcome-store.ts';
import { DynamoDbRecordCounter } from '../adapters/dynamodb-record-counter.ts';
import { DynamoDbRequestLedger } from '../adapters/dynamodb-request-ledger.ts';
import { withoutSdkLogging } from '../adapters/sdk-clients.ts';
import { SecretsManagerIngestCredentials } from '../adapters/secrets-manager-ingest-credentials.ts';
import { SecretsManagerSourceSecrets } from '../adapters/secrets-manager-source-secrets.ts';
import { SqsEventQueue } from '../adapters/sqs-event-queue.ts';
import { SqsSourceDeadLetters } from '../adapters/sqs-source-dead-letters.ts';
import { ConfigError, describeError, SourceConfigError } from '../core/errors.ts';
import { parseCredentials } from '../core/ingest/webhook-auth.ts';
import type { Clock, IngestCredentials } from '../core/ports.ts';
import { loadSourceCompiler } from '../core/sources/source-compiler.ts';
import {
  compileSourcesText,
  ReloadableSourceRegistry,
  StoredSecretSources,
} from '../core/sources/source-registry.ts';
import {
  type CompiledSource,
  parseSourcesDocument,
  type SourceRegistry,
} from '../core/sources/sources.ts';
import type { IngestConfig } from '../shared/config.ts';
import { createIngestHandler } from './handler.ts';

/** What the ingest function talks to: in Lambda the AWS clients, locally the stand-ins. */
export interface IngestEdges {
  sqs: SQSClient;
  /** Needed when the configuration names a webhook secret, or sources, in Secrets Manager. */
  secrets?: SecretsManagerClient;
  /**
   * DynamoDB's client: needed for the de-duplication table unless DEDUP_WINDOW_SECONDS and
   * MAX_RECORD_EVENTS_PER_MINUTE are 0, and for the outcome table unless
   * OUTCOME_RETENTION_SECONDS is 0.
   */
  dynamodb?: DynamoDBClient;
  /**
   * The local stack's sources (`openSourcesFile`); in the cloud they come from the configuration.
   * @default none
   */
  sources?: SourceRegistry;
  logger: Logger;
  clock?: Clock;
}

/**
 * The ingest function's composition root: validated configuration and the edges in, the Lambda
 * handler out. `index.ts` (Lambda) and the local stack both build the function with it.
 * Credentials and source secrets stored in Secrets Manager are loaded before it resolves, so a
 * bad secret, or a sources document that does not compile, stops the function at cold start,
 * not at the first request.
 */
export async function buildIngestHandler(config: Readonly<IngestConfig>, edges: IngestEdges) {
  const { logger } = edges;
  for (const client of [edges.sqs, edges.secrets, edges.dynamodb])
    if (client) withoutSdkLogging(client);
  const clock = edges.clock ?? Date;
  const credentials = await ingestCredentials(config, edges, clock);
  const stored = await storedSources(config, edges, clock);
  const { ledger, recordCounter } = dedupTable(config, edges);
  const outcomes = outcomeStore(config, edges, clock);
  const sources = stored ?? edges.sources;
  // A payload a source cannot map is kept on the dead-letter queue (contract §6).
  if (sources !== undefined && config.deadLetterQueueUrl === undefined) {
    throw new ConfigError('Invalid configuration: DEAD_LETTER_QUEUE_URL is required with sources');
  }
  const handler = createIngestHandler({
    credentials,
    queue: new SqsEventQueue(edges.sqs, config.eventsQueueUrl),
    clock,
    newId: randomUUID,
    limits: {
      maxBodyBytes: config.maxBodyBytes,
      maxEvents: config.maxEvents,
      entities: new Set(config.entities),
      contactMatchFields: new Set(config.contactMatchFields),
      maxRecordEventsPerMinute: config.maxRecordEventsPerMinute,
    },
    ledger,
    outcomes,
    recordCounter,
    sources,
    sourceDeadLetters:
      config.deadLetterQueueUrl === undefined
        ? undefined
        : new SqsSourceDeadLetters(edges.sqs, config.deadLetterQueueUrl),
    logger,
  }).use(injectLambdaContext(logger));
  // Before each request, so a secret set or rotated is used within the cache period, no deploy.
  if (stored) handler.use({ before: () => stored.refresh() });
  return handler;
}

/** Where each event's outcome is kept (contract §1.6); none when OUTCOME_RETENTION_SECONDS is 0. */
function outcomeStore(config: Readonly<IngestConfig>, edges: IngestEdges, clock: Clock) {
  if (config.outcomes === undefined) return undefined;
  if (!edges.dynamodb) throw new Error('A DynamoDB client is needed for OUTCOME_TABLE_NAME');
  const { tableName, retentionSeconds } = config.outcomes;
  return new DynamoDbOutcomeStore(edges.dynamodb, tableName, { retentionSeconds, clock });
}

/**
 * What the ingest keeps in the de-duplication table: the request ledger (unless
 * DEDUP_WINDOW_SECONDS is 0) and the records' counters (unless MAX_RECORD_EVENTS_PER_MINUTE is).
 */
function dedupTable(config: Readonly<IngestConfig>, edges: IngestEdges) {
  const { dynamodb: client, logger } = edges;
  const tableName = config.dedupTableName;
  const needed = config.dedupWindowSeconds > 0 || config.maxRecordEventsPerMinute > 0;
  if (needed && (!client || tableName === undefined))
    throw new Error(
      'A DynamoDB client and DEDUP_TABLE_NAME are needed (DEDUP_WINDOW_SECONDS, MAX_RECORD_EVENTS_PER_MINUTE)',
    );
  if (!client || tableName === undefined) return { ledger: undefined, recordCounter: undefined };
  return {
    ledger:
      config.dedupWindowSeconds > 0
        ? new DynamoDbRequestLedger(client, tableName, {
            windowSeconds: config.dedupWindowSeconds,
            logger,
          })
        : undefined,
    recordCounter:
      config.maxRecordEventsPerMinute > 0
        ? new DynamoDbRecordCounter(client, tableName, { logger })
        : undefined,
  };
}

async function ingestCredentials(
  config: Readonly<IngestConfig>,
  edges: IngestEdges,
  clock: Clock,
): Promise<() => Promise<IngestCredentials>> {
  if (config.webhookSecretId === undefined) {
    const fixed = parseCredentials({
      webhookSecrets: config.webhookSecrets,
      apiKeys: config.apiKeys,
    });
    return async () => fixed;
  }
  if (!edges.secrets) throw new Error('A Secrets Manager client is needed for WEBHOOK_SECRET_ID');
  const stored = new SecretsManagerIngestCredentials(edges.secrets, config.webhookSecretId, {
    cacheMs: config.credentialsCacheSeconds * 1000,
    clock,
    onReloadError: (error) =>
      edges.logger.error('Could not reload the webhook secret; still using the last good one', {
        error: describeError(error),
      }),
  });
  await stored.load();
  return () => stored.load();
}

/**
 * The cloud's sources (SOURCES_DOCUMENT), their secrets read now from Secrets Manager and again
 * after CREDENTIALS_CACHE_SECONDS, as the sender credentials are; undefined without a document.
 */
async function storedSources(
  config: Readonly<IngestConfig>,
  edges: IngestEdges,
  clock: Clock,
): Promise<StoredSecretSources | undefined> {
  if (config.sources === undefined) return undefined;
  if (!edges.secrets) throw new Error('A Secrets Manager client is needed for SOURCES_DOCUMENT');
  let document: unknown;
  try {
    document = JSON.parse(config.sources.document);
  } catch (error) {
    throw new ConfigError(`Invalid configuration: SOURCES_DOCUMENT is not JSON`, { cause: error });
  }
  await loadSourceCompiler();
  const sources = new StoredSecretSources(parseSourcesDocument(document), {
    store: new SecretsManagerSourceSecrets(edges.secrets, config.sources.secretPrefix),
    cacheMs: config.credentialsCacheSeconds * 1000,
    clock,
    logger: edges.logger,
  });
  await sources.refresh();
  return sources;
}

/** The local stack's SOURCES_FILE, open: its sources, and a way to read it again. */
export interface SourcesFile {
  readonly registry: SourceRegistry;
  /** The names of the sources in effect. */
  names(): string[];
  /**
   * Reads the file again: a valid version takes effect for the next request and its names are
   * returned; an invalid one throws a `ConfigError` naming the problem, and the previous stays.
   */
  reload(): string[];
}

/**
 * Loads JSONata, then reads and compiles the local stack's SOURCES_FILE (contract §6), whose
 * sources hold their own secrets. Rejects with a `ConfigError` naming the file, the source and
 * the problem when it cannot work (never a secret): `npm start` refuses to start on it.
 */
export async function openSourcesFile(path: string): Promise<SourcesFile> {
  await loadSourceCompiler();
  const registry = new ReloadableSourceRegistry(readSourcesFile(path));
  return {
    registry,
    names: () => registry.names(),
    reload() {
      registry.replace(readSourcesFile(path));
      return registry.names();
    },
  };
}

function readSourcesFile(path: string): ReadonlyMap<string, CompiledSource> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? describeError(error);
    throw new ConfigError(`SOURCES_FILE ${path} cannot be read (${code})`);
  }
  try {
    return compileSourcesText(text);
  } catch (error) {
    if (!(error instanceof SourceConfigError)) throw error;
    throw new ConfigError(`SOURCES_FILE ${path}: ${error.message}`, { cause: error });
  }
}
