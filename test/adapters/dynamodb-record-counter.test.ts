/**
 * The per-record event counters (contract §2, one busy record never stalls the others) on
 * dynalite through the real SDK: one item per record and minute, shared by every client.
 */
import { randomUUID } from 'node:crypto';
import { ScanCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DynamoDbRecordCounter } from '../../functions/adapters/dynamodb-record-counter.ts';
import { StoreUnavailableError } from '../../functions/core/errors.ts';
import { DEDUP_TTL_ATTRIBUTE } from '../../functions/shared/config.ts';
import { dynamoDbClient } from '../../infra/local/dynamodb-local.ts';
import { type LocalDynamoDb, startLocalDynamoDb } from '../support/dedup.ts';
import { recorder } from '../support/observe.ts';

const MINUTE = Date.parse('2026-11-21T12:00:00Z') / 60_000;
const RECORD = 'x8Kq3mB2c7YdI0uT9pZ1hVnLr5wEo4sAa6gFjC2kQe0';
const request = { requestId: 'req-7' };

let db: LocalDynamoDb;
beforeAll(async () => {
  db = await startLocalDynamoDb();
});
afterAll(async () => {
  await db.close();
});

async function counterOnNewTable() {
  const tableName = `counters-${randomUUID().slice(0, 8)}`;
  await db.createDedupTable(tableName);
  const log = recorder();
  const counter = new DynamoDbRecordCounter(db.client, tableName, { logger: log.logger });
  const items = async () =>
    (await db.client.send(new ScanCommand({ TableName: tableName }))).Items ?? [];
  return { tableName, counter, log, items };
}

describe('the DynamoDB record counter', () => {
  it('adds to this minute and answers it with the minute before, one item per record and minute', async () => {
    const { counter, items } = await counterOnNewTable();

    expect(await counter.add(RECORD, 3, MINUTE - 1, request)).toEqual({ current: 3, previous: 0 });
    expect(await counter.add(RECORD, 2, MINUTE, request)).toEqual({ current: 2, previous: 3 });
    expect(await counter.add(RECORD, 4, MINUTE, request)).toEqual({ current: 6, previous: 3 });
    expect(await counter.add('another', 1, MINUTE, request)).toEqual({ current: 1, previous: 0 });
    // Two minutes on, neither earlier minute is the one before.
    expect(await counter.add(RECORD, 1, MINUTE + 2, request)).toEqual({
      current: 1,
      previous: 0,
    });

    const stored = await items();
    expect(stored.map((item) => item.id?.S).sort()).toEqual(
      [
        `record-rate#${RECORD}#${MINUTE - 1}`,
        `record-rate#${RECORD}#${MINUTE}`,
        `record-rate#${RECORD}#${MINUTE + 2}`,
        `record-rate#another#${MINUTE}`,
      ].sort(),
    );
    // Swept by the table's TTL once no minute reads it any more: 3 minutes after it began.
    const item = stored.find((entry) => entry.id?.S === `record-rate#${RECORD}#${MINUTE}`);
    expect(item?.[DEDUP_TTL_ATTRIBUTE]?.N).toBe(String((MINUTE + 3) * 60));
    expect(item?.count?.N).toBe('6');
  });

  it('shares one count between clients, whatever runs at once', async () => {
    const { tableName, counter } = await counterOnNewTable();
    const other = dynamoDbClient(db.endpoint);
    const second = new DynamoDbRecordCounter(other, tableName, { logger: recorder().logger });
    try {
      const answers = await Promise.all(
        Array.from({ length: 20 }, (_, n) =>
          (n % 2 === 0 ? counter : second).add(RECORD, 1, MINUTE, request),
        ),
      );

      expect(answers.map((answer) => answer.current).sort((a, b) => a - b)).toEqual(
        Array.from({ length: 20 }, (_, n) => n + 1),
      );
    } finally {
      other.destroy();
    }
  });

  it('gives back to the minute added to, and creates nothing for a minute it never counted', async () => {
    const { counter, items } = await counterOnNewTable();
    await counter.add(RECORD, 5, MINUTE, request);

    await counter.giveBack(RECORD, 2, MINUTE);
    await counter.giveBack(RECORD, 1, MINUTE + 1);

    expect(await counter.add(RECORD, 0, MINUTE, request)).toEqual({ current: 3, previous: 0 });
    expect(await items()).toHaveLength(1);
  });

  it('fails with a StoreUnavailableError when the table cannot be used, logging its code and never the record', async () => {
    const { counter, log } = await counterOnNewTable();
    const missing = new DynamoDbRecordCounter(db.client, 'no-such-table', { logger: log.logger });

    await expect(missing.add(RECORD, 1, MINUTE, request)).rejects.toThrow(StoreUnavailableError);
    await expect(missing.giveBack(RECORD, 1, MINUTE)).rejects.toThrow(StoreUnavailableError);
    expect(log.events('dedup_store_failed').map((line) => line.fields)).toEqual([
      {
        event: 'dedup_store_failed',
        requestId: 'req-7',
        error: 'ResourceNotFoundException',
        code: 'ResourceNotFoundException',
      },
    ]);
    expect(log.text()).not.toContain(RECORD);
    await expect(counter.add(RECORD, 1, MINUTE, request)).resolves.toEqual({
      current: 1,
      previous: 0,
    });
  });
});
