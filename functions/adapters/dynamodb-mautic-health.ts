import {
  type DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  type PutItemCommandInput,
} from '@aws-sdk/client-dynamodb';
import { HEALTH_ITEM_KEY, type HealthState, parseHealthState } from '../core/health-state.ts';
import type { HealthStore } from '../core/ports.ts';
import { DEDUP_TABLE_KEY } from '../shared/config.ts';

/**
 * Mautic's shared health (`circuit.ts`) as one item of the de-duplication table: the state as
 * JSON and a version that every write raises by one, on the condition that the stored version is
 * still the one read (optimistic locking: no lock to leak when an invocation dies). Reads are
 * strongly consistent, so a writer that lost reads what won.
 */
export class DynamoDbHealthStore implements HealthStore {
  readonly #client: DynamoDBClient;
  readonly #tableName: string;
  readonly #callTimeoutMs: number;

  /**
   * `callTimeoutMs`: a call that has not answered by then fails, as a store that failed (the
   * health is best effort: `MauticHealth` goes on alone). The SDK's client has no timeout of its
   * own, and a batch's health flush comes before its deletes: a call that hung would hold the
   * invocation, and with it the deletes of what Mautic took, until Lambda ended it.
   */
  constructor(client: DynamoDBClient, tableName: string, callTimeoutMs = HEALTH_CALL_TIMEOUT_MS) {
    this.#client = client;
    this.#tableName = tableName;
    this.#callTimeoutMs = callTimeoutMs;
  }

  async read(): Promise<{ state: HealthState; version: number } | undefined> {
    const { Item } = await this.#client.send(
      new GetItemCommand({ TableName: this.#tableName, Key: key(), ConsistentRead: true }),
      { abortSignal: AbortSignal.timeout(this.#callTimeoutMs) },
    );
    if (Item === undefined) return undefined;
    const version = Number(Item.version?.N ?? 0);
    // A state this release cannot read (another's) is started afresh, at its version, so that
    // the next write can still replace it.
    const state = parseHealthState(Item.state?.S) ?? { ...AFRESH, since: Date.now() };
    return { state, version };
  }

  async write(state: HealthState, version: number): Promise<boolean> {
    const input: PutItemCommandInput = {
      TableName: this.#tableName,
      Item: {
        ...key(),
        state: { S: JSON.stringify(state) },
        version: { N: String(version + 1) },
      },
      ...(version === 0
        ? {
            ConditionExpression: 'attribute_not_exists(#id)',
            ExpressionAttributeNames: { '#id': DEDUP_TABLE_KEY },
          }
        : {
            ConditionExpression: '#version = :version',
            ExpressionAttributeNames: { '#version': 'version' },
            ExpressionAttributeValues: { ':version': { N: String(version) } },
          }),
    };
    try {
      await this.#client.send(new PutItemCommand(input), {
        abortSignal: AbortSignal.timeout(this.#callTimeoutMs),
      });
      return true;
    } catch (error) {
      if (error instanceof Error && error.name === 'ConditionalCheckFailedException') return false;
      throw error;
    }
  }
}

/** How long a call to the health's item may take (a read or write answers in milliseconds). */
const HEALTH_CALL_TIMEOUT_MS = 2_000;

const AFRESH: HealthState = { circuit: 'closed', since: 0, failures: [], slots: {} };

/** Beside the ingest's request ids and the action ledger's keys; no TTL attribute: never swept. */
function key() {
  return { [DEDUP_TABLE_KEY]: { S: HEALTH_ITEM_KEY } };
}
