import { type DynamoDBClient, GetItemCommand, UpdateItemCommand } from '@aws-sdk/client-dynamodb';
import { StoreUnavailableError } from '../core/errors.ts';
import type { Logger } from '../core/ports.ts';
import type { MinuteCounts, RecordCounter } from '../core/record-counter.ts';
import {
  DEDUP_STORE_FAILED_EVENT,
  DEDUP_TABLE_KEY,
  DEDUP_TTL_ATTRIBUTE,
} from '../shared/config.ts';
import { awsErrorCode } from './aws-error-code.ts';

/** Keeps the counters apart from the request ids and the action ledger in the same table. */
const KEY_PREFIX = 'record-rate#';
/**
 * A minute's item is read while it is the last minute, then never again: it may go two minutes
 * after its own ends (the table's TTL sweeps it later, within a day or two).
 */
const KEPT_MINUTES = 3;

/**
 * The per-record event counters on the de-duplication table (contract §2): one item per record
 * and minute, `record-rate#<message group>#<epoch minute>`, holding `count` and an expiry. An
 * add is one `UpdateItem` (`ADD`, answering the new count) of this minute's item and, at the
 * same time, one eventually consistent `GetItem` of the last minute's: one round trip, 1 write
 * and half a read unit per record and request. An item per minute, not one per record with
 * both minutes in it: a give-back then always lands on the minute it was added to, with no
 * condition, and nothing needs resetting when a minute turns.
 *
 * A failure is logged as the request ledger logs its own (`dedup_store_failed`, the error's
 * name and code, never the record), and thrown as a `StoreUnavailableError`.
 */
export class DynamoDbRecordCounter implements RecordCounter {
  readonly #client: DynamoDBClient;
  readonly #tableName: string;
  readonly #logger: Logger;

  constructor(client: DynamoDBClient, tableName: string, options: { logger: Logger }) {
    this.#client = client;
    this.#tableName = tableName;
    this.#logger = options.logger;
  }

  async add(
    record: string,
    events: number,
    minute: number,
    options: { requestId: string | undefined },
  ): Promise<MinuteCounts> {
    try {
      const [updated, last] = await Promise.all([
        this.#client.send(
          new UpdateItemCommand({
            TableName: this.#tableName,
            Key: this.#key(record, minute),
            UpdateExpression: 'ADD #count :events SET #expiration = :expiration',
            ExpressionAttributeNames: { '#count': 'count', '#expiration': DEDUP_TTL_ATTRIBUTE },
            ExpressionAttributeValues: {
              ':events': { N: String(events) },
              ':expiration': { N: String((minute + KEPT_MINUTES) * 60) },
            },
            ReturnValues: 'UPDATED_NEW',
          }),
        ),
        this.#client.send(
          new GetItemCommand({
            TableName: this.#tableName,
            Key: this.#key(record, minute - 1),
            ProjectionExpression: '#count',
            ExpressionAttributeNames: { '#count': 'count' },
          }),
        ),
      ]);
      return {
        current: Number(updated.Attributes?.count?.N ?? events),
        previous: Number(last.Item?.count?.N ?? 0),
      };
    } catch (error) {
      this.#logger.error('The de-duplication store failed counting a record', {
        event: DEDUP_STORE_FAILED_EVENT,
        requestId: options.requestId,
        error: error instanceof Error ? error.name : typeof error,
        code: awsErrorCode(error),
      });
      throw new StoreUnavailableError('The record counters could not be used', { cause: error });
    }
  }

  async giveBack(record: string, events: number, minute: number): Promise<void> {
    try {
      await this.#client.send(
        new UpdateItemCommand({
          TableName: this.#tableName,
          Key: this.#key(record, minute),
          UpdateExpression: 'ADD #count :events',
          // Never an item of its own: one swept away already has nothing left to give back to.
          ConditionExpression: 'attribute_exists(#id)',
          ExpressionAttributeNames: { '#count': 'count', '#id': DEDUP_TABLE_KEY },
          ExpressionAttributeValues: { ':events': { N: String(-events) } },
        }),
      );
    } catch (error) {
      if (error instanceof Error && error.name === 'ConditionalCheckFailedException') return;
      throw new StoreUnavailableError('A record counter could not be given back', {
        cause: error,
      });
    }
  }

  #key(record: string, minute: number) {
    return { [DEDUP_TABLE_KEY]: { S: `${KEY_PREFIX}${record}#${minute}` } };
  }
}
