/**
 * Mautic's shared health in the de-duplication table, on dynalite through the real SDK, and the
 * in-memory store the delivery tests use, held to the same cases so it cannot drift: versioned
 * writes (a writer that read an older version loses), and what an unreadable item becomes.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type Socket } from 'node:net';
import { DynamoDBClient, GetItemCommand, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { DynamoDbHealthStore } from '../../functions/adapters/dynamodb-mautic-health.ts';
import { closedHealth } from '../../functions/core/delivery/circuit.ts';
import { HEALTH_ITEM_KEY } from '../../functions/core/health-state.ts';
import type { HealthStore } from '../../functions/core/ports.ts';
import { type LocalDynamoDb, startLocalDynamoDb } from '../support/dedup.ts';
import { InMemoryHealthStore } from '../support/health-store.ts';

const T0 = Date.parse('2026-12-01T10:00:00Z');

let db: LocalDynamoDb;
beforeAll(async () => {
  db = await startLocalDynamoDb();
});
afterAll(async () => {
  await db.close();
});

async function dynamoStore(): Promise<{ store: DynamoDbHealthStore; tableName: string }> {
  const tableName = `health-${randomUUID().slice(0, 8)}`;
  await db.createDedupTable(tableName);
  return { tableName, store: new DynamoDbHealthStore(db.client, tableName) };
}

const open = { ...closedHealth(T0), circuit: 'open' as const, nextProbeAt: T0 + 5_000 };

const behaviours: Array<[string, (store: HealthStore) => Promise<void>]> = [
  [
    'has nothing stored at first',
    async (store) => {
      expect(await store.read()).toBeUndefined();
    },
  ],
  [
    'stores the first state at version 1, and a second writer that read nothing loses',
    async (store) => {
      expect(await store.write(open, 0)).toBe(true);
      expect(await store.write(closedHealth(T0), 0)).toBe(false);
      expect(await store.read()).toEqual({ state: open, version: 1 });
    },
  ],
  [
    'takes a write on the version read and refuses one on an older version',
    async (store) => {
      await store.write(closedHealth(T0), 0);
      expect(await store.write(open, 1)).toBe(true);
      expect(await store.write(closedHealth(T0 + 1), 1)).toBe(false);
      expect(await store.read()).toEqual({ state: open, version: 2 });
    },
  ],
];

describe.each([
  ['DynamoDbHealthStore on dynalite', async () => (await dynamoStore()).store],
  ['InMemoryHealthStore', async (): Promise<HealthStore> => new InMemoryHealthStore()],
])('%s', (_, make) => {
  it.each(behaviours)('%s', async (_name, behaviour) => {
    await behaviour(await make());
  });
});

describe('DynamoDbHealthStore', () => {
  it('keeps one item with no TTL attribute, so the table never sweeps it', async () => {
    const { store, tableName } = await dynamoStore();
    await store.write(open, 0);

    const { Item } = await db.client.send(
      new GetItemCommand({ TableName: tableName, Key: { id: { S: HEALTH_ITEM_KEY } } }),
    );
    expect(Object.keys(Item ?? {}).sort()).toEqual(['id', 'state', 'version']);
  });

  it('reads an item it cannot parse (another release’s) as closed, at its version, so the next write replaces it', async () => {
    const { store, tableName } = await dynamoStore();
    await db.client.send(
      new PutItemCommand({
        TableName: tableName,
        Item: {
          id: { S: HEALTH_ITEM_KEY },
          state: { S: '{"circuit":"sideways"}' },
          version: { N: '7' },
        },
      }),
    );

    const read = await store.read();
    expect(read).toMatchObject({ state: { circuit: 'closed', failures: [] }, version: 7 });
    expect(await store.write(open, 7)).toBe(true);
  });

  it('fails a read and a write that get no answer, rather than wait for one', async () => {
    // A DynamoDB that takes each connection and never answers.
    const sockets = new Set<Socket>();
    const silent = createServer((socket) => sockets.add(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    onTestFinished(async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => silent.close(resolve));
    });
    const address = silent.address();
    if (address === null || typeof address === 'string') throw new Error('no port');
    const client = new DynamoDBClient({
      endpoint: `http://127.0.0.1:${address.port}`,
      region: 'us-east-1',
      credentials: { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'example' },
      maxAttempts: 1,
    });
    onTestFinished(() => client.destroy());
    // Compressed: 2 s as shipped.
    const store = new DynamoDbHealthStore(client, 'health', 200);

    await expect(store.read()).rejects.toThrow(/abort/i);
    await expect(store.write(open, 1)).rejects.toThrow(/abort/i);
    expect(sockets.size).toBeGreaterThan(0);
  }, 10_000);
});
