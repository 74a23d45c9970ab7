import { setTimeout as sleep } from 'node:timers/promises';
import {
  type AttributeValue,
  BatchGetItemCommand,
  BatchWriteItemCommand,
  type DynamoDBClient,
  type WriteRequest,
} from '@aws-sdk/client-dynamodb';
import { marshall, unmarshall } from '@aws-sdk/util-dynamodb';
import {
  type Clock,
  OUTCOME_TABLE,
  type OutcomeKey,
  type OutcomeRecord,
  type OutcomeStore,
} from '../core/ports.ts';

/** DynamoDB's most items per BatchWriteItem, and keys per BatchGetItem. */
const WRITE_BATCH = 25;
const READ_BATCH = 100;
/** Pauses before the items or keys DynamoDB left unprocessed (throttled) are sent again. */
const UNPROCESSED_RETRY_MS = [25, 100, 400];

type Item = Record<string, AttributeValue>;

/**
 * The outcome store on its own DynamoDB table (infra/aws/storage.ts): each record an item keyed
 * by the event's id and `<slot>#<sender>`, with a TTL of the retention from its write. Writes go
 * in BatchWriteItem calls of 25, all at once, items DynamoDB leaves unprocessed sent again while
 * time allows; reads in consistent BatchGetItem calls of 100 keys. An item past its TTL that
 * DynamoDB has not swept yet (it may take days) is not read.
 */
export class DynamoDbOutcomeStore implements OutcomeStore {
  readonly #client: DynamoDBClient;
  readonly #tableName: string;
  readonly #retentionSeconds: number;
  readonly #clock: Clock;

  constructor(
    client: DynamoDBClient,
    tableName: string,
    options: { retentionSeconds: number; clock: Clock },
  ) {
    this.#client = client;
    this.#tableName = tableName;
    this.#retentionSeconds = options.retentionSeconds;
    this.#clock = options.clock;
  }

  async write(records: ReadonlyArray<OutcomeRecord>, until: number): Promise<number> {
    const expiresAt = Math.floor(this.#clock.now() / 1000) + this.#retentionSeconds;
    const requests = records.map((record) => ({ PutRequest: { Item: toItem(record, expiresAt) } }));
    const groups: WriteRequest[][] = [];
    for (let i = 0; i < requests.length; i += WRITE_BATCH)
      groups.push(requests.slice(i, i + WRITE_BATCH));
    const left = await Promise.all(groups.map((group) => this.#writeGroup(group, until)));
    return left.reduce((sum, count) => sum + count, 0);
  }

  /** One BatchWriteItem and its unprocessed items again; resolves how many were not written. */
  async #writeGroup(group: WriteRequest[], until: number): Promise<number> {
    let pending = group;
    for (let attempt = 0; pending.length > 0; attempt++) {
      const left = until - this.#clock.now();
      if (left <= 0) return pending.length;
      try {
        const { UnprocessedItems } = await this.#client.send(
          new BatchWriteItemCommand({ RequestItems: { [this.#tableName]: pending } }),
          { abortSignal: AbortSignal.timeout(left) },
        );
        pending = UnprocessedItems?.[this.#tableName] ?? [];
      } catch {
        return pending.length;
      }
      const pause = UNPROCESSED_RETRY_MS[attempt];
      if (pending.length > 0 && pause === undefined) return pending.length;
      if (pending.length > 0) await sleep(pause);
    }
    return 0;
  }

  async read(keys: ReadonlyArray<OutcomeKey>): Promise<OutcomeRecord[]> {
    const itemKeys = keys.flatMap(({ eventId, sender }) =>
      (['queued', 'state'] as const).map((slot) => marshall(keyOf(eventId, slot, sender))),
    );
    const groups: Item[][] = [];
    for (let i = 0; i < itemKeys.length; i += READ_BATCH)
      groups.push(itemKeys.slice(i, i + READ_BATCH));
    const items = (await Promise.all(groups.map((group) => this.#readGroup(group)))).flat();
    const now = Math.floor(this.#clock.now() / 1000);
    return items.flatMap((item) => {
      const record = fromItem(item);
      return record === undefined || record.expiresAt <= now ? [] : [record.record];
    });
  }

  /** One BatchGetItem and its unprocessed keys again; throws when some stay unread. */
  async #readGroup(group: Item[]): Promise<Item[]> {
    const found: Item[] = [];
    let pending = group;
    for (let attempt = 0; pending.length > 0; attempt++) {
      const { Responses, UnprocessedKeys } = await this.#client.send(
        new BatchGetItemCommand({
          RequestItems: { [this.#tableName]: { Keys: pending, ConsistentRead: true } },
        }),
      );
      found.push(...(Responses?.[this.#tableName] ?? []));
      pending = UnprocessedKeys?.[this.#tableName]?.Keys ?? [];
      const pause = UNPROCESSED_RETRY_MS[attempt];
      if (pending.length > 0 && pause === undefined) {
        throw new Error(`DynamoDB left ${pending.length} outcome keys unread`);
      }
      if (pending.length > 0) await sleep(pause);
    }
    return found;
  }
}

/** An item's key: the event, and `<slot>#<sender>`. */
export function keyOf(eventId: string, slot: OutcomeRecord['slot'], sender: string) {
  return { [OUTCOME_TABLE.partitionKey]: eventId, [OUTCOME_TABLE.sortKey]: `${slot}#${sender}` };
}

function toItem(record: OutcomeRecord, expiresAt: number): Item {
  const { slot, ...rest } = record;
  return marshall(
    { ...rest, ...keyOf(record.eventId, slot, record.sender), [OUTCOME_TABLE.ttl]: expiresAt },
    { removeUndefinedValues: true },
  );
}

/** A stored item as a record, with its expiry; undefined for an item of another shape. */
export function fromItem(item: Item): { record: OutcomeRecord; expiresAt: number } | undefined {
  const values = unmarshall(item) as Record<string, unknown>;
  const key = values[OUTCOME_TABLE.sortKey];
  const slot = typeof key === 'string' ? key.slice(0, key.indexOf('#')) : '';
  if (slot !== 'queued' && slot !== 'state') return undefined;
  const { [OUTCOME_TABLE.ttl]: expiresAt, [OUTCOME_TABLE.sortKey]: _, ...record } = values;
  return {
    record: { ...(record as Omit<OutcomeRecord, 'slot'>), slot },
    expiresAt: typeof expiresAt === 'number' ? expiresAt : Number.POSITIVE_INFINITY,
  };
}
