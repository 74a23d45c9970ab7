import { randomUUID } from 'node:crypto';
import {
  DeleteItemCommand,
  type DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import type { ActionLedger, Clock } from '../core/ports.ts';
import { DEDUP_TABLE_KEY, DEDUP_TTL_ATTRIBUTE } from '../shared/config.ts';

/** Keeps the ledger's items apart from the ingest's request ids in the same table. */
const KEY_PREFIX = 'action#';

/** SQS keeps a message 14 days at most, in the events queue as in the dead-letter queue. */
const LONGEST_QUEUE_STAY_SECONDS = 14 * 86_400;

/**
 * How long a key is remembered before the table's TTL may sweep it away: 42 days. An event
 * claimed on a delivery can stay in the events queue until its retry horizon ends, then in the
 * dead-letter queue, then, redriven, in the events queue again for a new horizon: three stays of
 * at most 14 days each. A key forgotten sooner would let that event add its points a second
 * time. An event dead-lettered and redriven once more after that is beyond it.
 */
export const ACTION_KEY_LIFETIME_SECONDS = 3 * LONGEST_QUEUE_STAY_SECONDS;

const CLAIMED = 'claimed';
const DONE = 'done';

/**
 * The action ledger on the de-duplication table, with plain conditional writes: a put that only
 * succeeds when the key is new claims it, an update marks it done, a delete conditioned on this
 * very claim (its id) frees it: a delete the SDK sends again after another delivery claimed the
 * key, or a release by one that never held the claim, frees nothing. Not Powertools idempotency: its in-progress record expires with the
 * invocation, so a claim whose invocation crashed would be freed and the action sent again,
 * which is exactly what must not happen to an action whose outcome is unknown.
 */
export class DynamoDbActionLedger implements ActionLedger {
  readonly #client: DynamoDBClient;
  readonly #tableName: string;
  readonly #clock: Clock;
  /** The id of each claim this ledger holds, by key: what a release may free. */
  readonly #claims = new Map<string, string>();

  constructor(client: DynamoDBClient, tableName: string, options: { clock: Clock }) {
    this.#client = client;
    this.#tableName = tableName;
    this.#clock = options.clock;
  }

  async claim(key: string): Promise<'claimed' | 'done' | 'unknown'> {
    // Undefined: the item went away between the put and the read (released, or swept), so the
    // key is free again: one more try, and after that the answer is not known.
    return (await this.#tryClaim(key)) ?? (await this.#tryClaim(key)) ?? 'unknown';
  }

  async complete(key: string): Promise<void> {
    this.#claims.delete(key);
    await this.#client.send(
      new UpdateItemCommand({
        TableName: this.#tableName,
        Key: this.#key(key),
        // The expiry is the claim's; an item that is somehow gone gets one, never none.
        UpdateExpression:
          'SET #status = :done, #expiration = if_not_exists(#expiration, :expiration)',
        ExpressionAttributeNames: { '#status': 'status', '#expiration': DEDUP_TTL_ATTRIBUTE },
        ExpressionAttributeValues: { ':done': { S: DONE }, ':expiration': this.#expiration() },
      }),
    );
  }

  async release(key: string): Promise<void> {
    const claimId = this.#claims.get(key);
    // Not a claim of this ledger's: another delivery's, which only it may free.
    if (claimId === undefined) return;
    try {
      await this.#client.send(
        new DeleteItemCommand({
          TableName: this.#tableName,
          Key: this.#key(key),
          // Never a key that is done (its action was applied), nor another delivery's claim.
          ConditionExpression: '#status = :claimed AND #claimId = :claimId',
          ExpressionAttributeNames: { '#status': 'status', '#claimId': 'claimId' },
          ExpressionAttributeValues: { ':claimed': { S: CLAIMED }, ':claimId': { S: claimId } },
        }),
      );
    } catch (error) {
      // Done, gone, or another's: either way nothing of this claim is left to free.
      if (!isConditionFailed(error)) throw error;
    }
    this.#claims.delete(key);
  }

  /** `undefined` when the key was taken but its item is gone by the time it is read. */
  async #tryClaim(key: string): Promise<'claimed' | 'done' | 'unknown' | undefined> {
    // Tells this put's own item from another's: the SDK retries a put whose answer was lost,
    // and the retry then finds the item the first try wrote.
    const claimId = randomUUID();
    this.#claims.set(key, claimId);
    try {
      await this.#client.send(
        new PutItemCommand({
          TableName: this.#tableName,
          Item: {
            ...this.#key(key),
            status: { S: CLAIMED },
            claimId: { S: claimId },
            [DEDUP_TTL_ATTRIBUTE]: this.#expiration(),
          },
          ConditionExpression: 'attribute_not_exists(#id)',
          ExpressionAttributeNames: { '#id': DEDUP_TABLE_KEY },
        }),
      );
      return 'claimed';
    } catch (error) {
      if (!isConditionFailed(error)) {
        this.#claims.delete(key);
        throw error;
      }
    }
    const { Item } = await this.#client.send(
      new GetItemCommand({ TableName: this.#tableName, Key: this.#key(key), ConsistentRead: true }),
    );
    const mine = Item?.claimId?.S === claimId && Item?.status?.S === CLAIMED;
    if (!mine) this.#claims.delete(key);
    if (Item === undefined) return undefined;
    if (Item.status?.S === DONE) return 'done';
    return mine ? 'claimed' : 'unknown';
  }

  #key(key: string) {
    return { [DEDUP_TABLE_KEY]: { S: `${KEY_PREFIX}${key}` } };
  }

  /** The table's TTL reads epoch seconds. */
  #expiration() {
    return { N: String(Math.floor(this.#clock.now() / 1000) + ACTION_KEY_LIFETIME_SECONDS) };
  }
}

/** The SDK's error for a write whose condition did not hold: the expected answer here. */
function isConditionFailed(error: unknown): boolean {
  return error instanceof Error && error.name === 'ConditionalCheckFailedException';
}
