import { createHash } from 'node:crypto';
import {
  IdempotencyAlreadyInProgressError,
  IdempotencyConfig,
  IdempotencyValidationError,
  makeIdempotent,
} from '@aws-lambda-powertools/idempotency';
import { DynamoDBPersistenceLayer } from '@aws-lambda-powertools/idempotency/dynamodb';
import { type DynamoDBClient, GetItemCommand, PutItemCommand } from '@aws-sdk/client-dynamodb';
import type {
  LedgerAnswer,
  LedgerOutcome,
  Logger,
  RequestIdentity,
  RequestLedger,
} from '../core/ports.ts';
import {
  DEDUP_STORE_FAILED_EVENT,
  DEDUP_TABLE_KEY,
  DEDUP_TTL_ATTRIBUTE,
} from '../shared/config.ts';
import { awsErrorCode } from './aws-error-code.ts';

/** Records are shared by every version of the function, whatever its name. */
const KEY_PREFIX = 'ingest';
/** A try's progress, apart from Powertools' records (`ingest#…`) and the action ledger's. */
const PROGRESS_PREFIX = 'ingest-progress#';
/** How long a claim lasts when the caller knows no deadline (Lambda always gives one). */
const CLAIM_WITHOUT_DEADLINE_MS = 30_000;

/** Thrown by the wrapped function so Powertools deletes the in-progress record. */
class NotRemembered extends Error {
  override name = 'NotRemembered';
}

/**
 * The request ledger on DynamoDB, through Powertools idempotency: a conditional put claims the
 * id (IN_PROGRESS, expiring with the invocation so a crashed one frees it), the answer is saved
 * as COMPLETED with the body's hash, and records expire after `windowSeconds` (Powertools checks
 * the expiry itself; the table's TTL only sweeps them away). Only answers marked `remember` are
 * kept: for any other, the in-progress record is deleted, so the id stays free.
 *
 * The progress of a try not remembered (the events a 503 had queued) is an item of its own,
 * `ingest-progress#<SHA-256 of the id>` with the body's hash, written while the try still holds
 * the claim and read by the next try once it holds it, so two tries never share one: a claim
 * is what orders them. It expires after `windowSeconds` as a record does (checked here too).
 */
export class DynamoDbRequestLedger implements RequestLedger {
  readonly #client: DynamoDBClient;
  readonly #tableName: string;
  readonly #store: DynamoDBPersistenceLayer;
  readonly #windowSeconds: number;
  readonly #logger: Logger;

  constructor(
    client: DynamoDBClient,
    tableName: string,
    options: { windowSeconds: number; logger: Logger },
  ) {
    this.#client = client;
    this.#tableName = tableName;
    this.#store = new DynamoDBPersistenceLayer({
      tableName,
      awsSdkV3Client: client,
      keyAttr: DEDUP_TABLE_KEY,
      expiryAttr: DEDUP_TTL_ATTRIBUTE,
    });
    this.#windowSeconds = options.windowSeconds;
    this.#logger = options.logger;
  }

  async once<T extends LedgerAnswer>(
    identity: RequestIdentity,
    accept: (progress: string | undefined) => Promise<T>,
    options: { remainingTimeMs: number | undefined; requestId: string | undefined },
  ): Promise<LedgerOutcome<T>> {
    // One config per request: registerLambdaContext mutates it, and the local stack serves
    // requests concurrently in one process.
    const config = new IdempotencyConfig({
      eventKeyJmesPath: 'key',
      payloadValidationJmesPath: 'bodyHash',
      throwOnNoIdempotencyKey: true,
      expiresAfterSeconds: this.#windowSeconds,
      hashFunction: 'sha256',
    });
    // Only getRemainingTimeInMillis is read: the in-progress claim ends with the invocation, so
    // an invocation that dies holding it frees the id when its time is up. Never without one:
    // a claim with no expiry would hold the id for the whole window.
    const remaining = options.remainingTimeMs ?? CLAIM_WITHOUT_DEADLINE_MS;
    config.registerLambdaContext({
      getRemainingTimeInMillis: () => remaining,
    } as Parameters<IdempotencyConfig['registerLambdaContext']>[0]);
    let answered: T | undefined;
    let failed: { error: unknown } | undefined;
    const run = makeIdempotent(
      async (_identity: RequestIdentity) => {
        // A progress that cannot be read is the store failing: 503, nothing done.
        const progress = await this.#readProgress(identity);
        try {
          answered = await accept(progress);
        } catch (error) {
          failed = { error };
          throw error;
        }
        if (!answered.remember) {
          if (answered.progress !== undefined) {
            await this.#keepProgress(identity, answered.progress, options.requestId);
          }
          throw new NotRemembered();
        }
        return { status: answered.status, body: answered.body };
      },
      { persistenceStore: this.#store, config, keyPrefix: KEY_PREFIX },
    );
    try {
      const stored = (await run(identity)) as { status: number; body: string };
      if (answered !== undefined) return { kind: 'accepted', result: answered };
      return { kind: 'replayed', status: stored.status, body: stored.body };
    } catch (error) {
      // An unexpected failure of the work itself is the caller's (Powertools freed the id).
      if (failed !== undefined) throw failed.error;
      if (answered !== undefined) {
        // What the request did stands, whatever the store said afterwards. A COMPLETED record
        // that could not be saved leaves the claim IN_PROGRESS until the invocation's time is
        // up: a retry meanwhile gets 409, and after it the events are queued again.
        if (!(error instanceof NotRemembered)) this.#storeFailed(error, options.requestId);
        return { kind: 'accepted', result: answered };
      }
      if (error instanceof IdempotencyAlreadyInProgressError) return { kind: 'in_progress' };
      if (error instanceof IdempotencyValidationError) return { kind: 'reused' };
      this.#storeFailed(error, options.requestId);
      return { kind: 'unavailable' };
    }
  }

  /** The progress the last try of this request (same id and body) left, if it is still kept. */
  async #readProgress(identity: RequestIdentity): Promise<string | undefined> {
    const { Item: item } = await this.#client.send(
      new GetItemCommand({
        TableName: this.#tableName,
        Key: this.#progressKey(identity),
        ConsistentRead: true,
      }),
    );
    const expiry = Number(item?.[DEDUP_TTL_ATTRIBUTE]?.N);
    if (!(expiry > Date.now() / 1000) || item?.bodyHash?.S !== identity.bodyHash) return undefined;
    return item.progress?.S;
  }

  /**
   * Keeps a try's progress (at most 500 event ids of 128 characters: far below DynamoDB's 400 KB
   * an item). If that fails, the answer stands (503) and the next try starts from nothing: what
   * this one queued is queued again, at least once as after a crash.
   */
  async #keepProgress(
    identity: RequestIdentity,
    progress: string,
    requestId: string | undefined,
  ): Promise<void> {
    try {
      await this.#client.send(
        new PutItemCommand({
          TableName: this.#tableName,
          Item: {
            ...this.#progressKey(identity),
            bodyHash: { S: identity.bodyHash },
            progress: { S: progress },
            [DEDUP_TTL_ATTRIBUTE]: {
              N: String(Math.floor(Date.now() / 1000) + this.#windowSeconds),
            },
          },
        }),
      );
    } catch (error) {
      this.#storeFailed(error, requestId);
    }
  }

  #progressKey(identity: RequestIdentity) {
    const hash = createHash('sha256').update(identity.key).digest('base64url');
    return { [DEDUP_TABLE_KEY]: { S: `${PROGRESS_PREFIX}${hash}` } };
  }

  #storeFailed(error: unknown, requestId: string | undefined): void {
    const cause = error instanceof Error && error.cause instanceof Error ? error.cause : error;
    this.#logger.error('The de-duplication store failed', {
      event: DEDUP_STORE_FAILED_EVENT,
      requestId,
      error: error instanceof Error ? error.name : typeof error,
      cause: cause instanceof Error ? cause.name : typeof cause,
      code: awsErrorCode(cause),
    });
  }
}
