import { DescribeTableCommand } from '@aws-sdk/client-dynamodb';
import { describe, expect, it } from 'vitest';
import { DEFAULT_ENTITIES } from '../../functions/shared/config.ts';
import {
  LOCAL_DEDUP_TABLE,
  startDedupStore,
  startLocalDynamoDb,
} from '../../infra/local/dynamodb-local.ts';
import { loadLocalConfig } from '../../infra/local/local-config.ts';

describe('the local de-duplication store', () => {
  it('serves the real SDK on 127.0.0.1 and refuses connections once closed', async () => {
    const db = await startLocalDynamoDb();
    expect(db.endpoint).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    await db.createDedupTable('dedup-local');
    const table = await db.client.send(new DescribeTableCommand({ TableName: 'dedup-local' }));
    expect(table.Table?.TableStatus).toBe('ACTIVE');
    expect(table.Table?.KeySchema).toEqual([{ AttributeName: 'id', KeyType: 'HASH' }]);
    const { endpoint } = db;
    await db.close();

    await expect(fetch(endpoint)).rejects.toThrow();
  });

  it('starts with its table whatever the window: the action ledger needs it with de-duplication off', async () => {
    const on = await startDedupStore(60);
    const off = await startDedupStore(0);
    try {
      expect(on.description).toMatch(
        /^dynalite at http:\/\/127\.0\.0\.1:\d+, request ids kept 60 s$/,
      );
      expect(off.description).toMatch(
        /^off \(DEDUP_WINDOW_SECONDS=0\); the action ledger in dynalite at http:\/\/127\.0\.0\.1:\d+$/,
      );
      for (const store of [on, off]) {
        expect(store.tableName).toBe(LOCAL_DEDUP_TABLE);
        const table = await store.client.send(
          new DescribeTableCommand({ TableName: LOCAL_DEDUP_TABLE }),
        );
        expect(table.Table?.TableStatus).toBe('ACTIVE');
        // And the outcome table, shaped as the stack's.
        const outcomes = await store.client.send(
          new DescribeTableCommand({ TableName: store.outcomeTableName }),
        );
        expect(outcomes.Table?.KeySchema).toEqual([
          { AttributeName: 'eventId', KeyType: 'HASH' },
          { AttributeName: 'slot', KeyType: 'RANGE' },
        ]);
      }
    } finally {
      await on.close();
      await off.close();
    }
    // Its thread is gone once closed: nothing listens there any more.
    await expect(fetch(on.endpoint)).rejects.toThrow();
  });

  it('reads OUTCOME_RETENTION_SECONDS for npm start: three days by default, 0 keeping none', () => {
    expect(loadLocalConfig({}).OUTCOME_RETENTION_SECONDS).toBe(259_200);
    expect(loadLocalConfig({ OUTCOME_RETENTION_SECONDS: '0' }).OUTCOME_RETENTION_SECONDS).toBe(0);
    expect(() => loadLocalConfig({ OUTCOME_RETENTION_SECONDS: 'soon' })).toThrow(
      /OUTCOME_RETENTION_SECONDS must be a whole number/,
    );
  });

  it('reads DEDUP_WINDOW_SECONDS and ENTITIES for npm start, with the contract defaults', () => {
    expect(loadLocalConfig({})).toMatchObject({
      DEDUP_WINDOW_SECONDS: 86_400,
      ENTITIES: [...DEFAULT_ENTITIES],
    });
    expect(loadLocalConfig({ DEDUP_WINDOW_SECONDS: '0', ENTITIES: 'contacts' })).toMatchObject({
      DEDUP_WINDOW_SECONDS: 0,
      ENTITIES: ['contacts'],
    });
    expect(() => loadLocalConfig({ DEDUP_WINDOW_SECONDS: '-1', ENTITIES: 'a/b' })).toThrow(
      /ENTITIES|DEDUP_WINDOW_SECONDS/,
    );
  });
});
