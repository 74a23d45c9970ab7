/**
 * The outcome store (contract §1.6) on dynalite through the real SDK: records kept per event and
 * sender, with their TTL, written in BatchWriteItem calls of 25 and read in consistent
 * BatchGetItem calls; a `queued` that reaches the store after a `delivered` never hides it; a
 * store that fails or throttles never makes a write reject.
 */
import { randomUUID } from 'node:crypto';
import {
  type BatchWriteItemCommand,
  type DynamoDBClient,
  GetItemCommand,
  ScanCommand,
} from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DynamoDbOutcomeStore, keyOf } from '../../functions/adapters/dynamodb-outcome-store.ts';
import { currentOutcomes } from '../../functions/core/ingest/outcome-view.ts';
import type { OutcomeRecord } from '../../functions/core/outcome-records.ts';
import { dynamoDbClient } from '../../infra/local/dynamodb-local.ts';
import { type LocalDynamoDb, startLocalDynamoDb } from '../support/dedup.ts';

const NOW = Date.parse('2026-11-21T12:00:00.000Z');
const RETENTION = 259_200;

let db: LocalDynamoDb;
beforeAll(async () => {
  db = await startLocalDynamoDb();
});
afterAll(async () => {
  await db.close();
});

async function newStore(now = () => NOW, client: DynamoDBClient = db.client) {
  const tableName = `outcomes-${randomUUID().slice(0, 8)}`;
  await db.createOutcomeTable(tableName);
  const clock = { now };
  return {
    tableName,
    store: new DynamoDbOutcomeStore(client, tableName, { retentionSeconds: RETENTION, clock }),
  };
}

const at = (ms: number) => new Date(ms).toISOString();

function queued(eventId: string, sender = 'webhook#1', acceptedAt = NOW): OutcomeRecord {
  return {
    eventId,
    sender,
    slot: 'queued',
    status: 'queued',
    entity: 'contacts',
    action: 'create',
    acceptedAt: at(acceptedAt),
    updatedAt: at(acceptedAt),
    attempts: 0,
  };
}

function delivered(eventId: string, sender = 'webhook#1', acceptedAt = NOW): OutcomeRecord {
  return {
    ...queued(eventId, sender, acceptedAt),
    slot: 'state',
    status: 'delivered',
    updatedAt: at(acceptedAt + 1_000),
    attempts: 1,
    mauticIds: [41],
    httpStatus: 201,
    deliveredAt: at(acceptedAt + 900),
    callId: 'call-1',
  };
}

describe('DynamoDbOutcomeStore', () => {
  it('keeps each record under the event and its sender, with a TTL of the retention, and reads it back', async () => {
    const { store, tableName } = await newStore();
    const record: OutcomeRecord = {
      ...delivered('ev-1'),
      status: 'dead_lettered',
      reason: 'no_match',
      detail: 'No contact matches match.email',
      httpStatus: null,
    };

    expect(await store.write([record], NOW + 5_000)).toBe(0);

    const { Item } = await db.client.send(
      new GetItemCommand({
        TableName: tableName,
        Key: { eventId: { S: 'ev-1' }, slot: { S: 'state#webhook#1' } },
      }),
    );
    expect(Item?.expiresAt).toEqual({ N: String(NOW / 1000 + RETENTION) });
    expect(Item?.httpStatus).toEqual({ NULL: true });
    expect(await store.read([{ eventId: 'ev-1', sender: 'webhook#1' }])).toEqual([record]);
  });

  it("finds nothing of another sender's event, nor of an unknown one", async () => {
    const { store } = await newStore();
    await store.write([queued('ev-1', 'webhook#1'), delivered('ev-1', 'webhook#1')], NOW + 5_000);

    expect(await store.read([{ eventId: 'ev-1', sender: 'api-key#1' }])).toEqual([]);
    expect(await store.read([{ eventId: 'ev-2', sender: 'webhook#1' }])).toEqual([]);
    expect(await store.read([{ eventId: 'ev-1', sender: 'webhook#1' }])).toHaveLength(2);
  });

  it('never lets a queued that reaches the store after the delivered hide it: each writer has its own record', async () => {
    const { store } = await newStore();
    // The batch function wrote first: the ingest's write was slower than the whole delivery.
    await store.write([delivered('ev-1')], NOW + 5_000);
    await store.write([queued('ev-1')], NOW + 5_000);

    const records = await store.read([{ eventId: 'ev-1', sender: 'webhook#1' }]);
    expect(currentOutcomes(records)).toEqual([delivered('ev-1')]);

    // The same id accepted again later: its new queued is newer than the old delivery.
    await store.write([queued('ev-1', 'webhook#1', NOW + 60_000)], NOW + 5_000);
    const again = await store.read([{ eventId: 'ev-1', sender: 'webhook#1' }]);
    expect(currentOutcomes(again)).toEqual([queued('ev-1', 'webhook#1', NOW + 60_000)]);
  });

  it('writes in BatchWriteItem calls of 25 and reads in BatchGetItem calls of 100 keys', async () => {
    const { store, tableName } = await newStore();
    const calls: string[] = [];
    db.client.middlewareStack.add(
      (next, context) => (args) => {
        calls.push(String(context.commandName));
        return next(args);
      },
      { step: 'initialize', name: 'countOutcomeCalls' },
    );
    try {
      const records = Array.from({ length: 60 }, (_, i) => queued(`ev-${i}`));
      expect(await store.write(records, NOW + 5_000)).toBe(0);
      const read = await store.read(records.map(({ eventId, sender }) => ({ eventId, sender })));

      expect(read).toHaveLength(60);
      expect(calls.filter((name) => name === 'BatchWriteItemCommand')).toHaveLength(3);
      // 60 events, each with its queued and state key: 120 keys.
      expect(calls.filter((name) => name === 'BatchGetItemCommand')).toHaveLength(2);
      const { Count } = await db.client.send(new ScanCommand({ TableName: tableName }));
      expect(Count).toBe(60);
    } finally {
      db.client.middlewareStack.remove('countOutcomeCalls');
    }
  });

  it('reads no record past its TTL that DynamoDB has not swept yet', async () => {
    let now = NOW;
    const { store } = await newStore(() => now);
    await store.write([queued('ev-1')], NOW + 5_000);

    now = NOW + RETENTION * 1000 - 1_000;
    expect(await store.read([{ eventId: 'ev-1', sender: 'webhook#1' }])).toHaveLength(1);
    now = NOW + RETENTION * 1000;
    expect(await store.read([{ eventId: 'ev-1', sender: 'webhook#1' }])).toEqual([]);
  });

  it('sends unprocessed items again, and resolves how many it could not write instead of rejecting', async () => {
    const writes: number[] = [];
    let throttled = 2;
    const throttling = {
      send: async (command: BatchWriteItemCommand) => {
        const items = Object.values(command.input.RequestItems ?? {})[0] ?? [];
        writes.push(items.length);
        // DynamoDB throttles part of a batch: it answers the rest as unprocessed.
        const left = throttled-- > 0 ? items.slice(0, 10) : [];
        const table = Object.keys(command.input.RequestItems ?? {})[0] ?? '';
        return { UnprocessedItems: left.length === 0 ? {} : { [table]: left } };
      },
    } as unknown as DynamoDBClient;
    const { store } = await newStore(() => NOW, throttling);

    expect(await store.write([queued('a'), queued('b'), ...fill(20)], NOW + 60_000)).toBe(0);
    expect(writes).toEqual([22, 10, 10]);

    throttled = 100;
    expect(await store.write(fill(22), NOW + 60_000)).toBe(10);

    const down = dynamoDbClient('http://127.0.0.1:9');
    const { store: unreachable } = await newStore(() => Date.now(), down);
    expect(await unreachable.write(fill(30), Date.now() + 5_000)).toBe(30);
    await expect(unreachable.read([{ eventId: 'a', sender: 'webhook#1' }])).rejects.toThrow();
    // Nothing is tried once the time is up.
    expect(await store.write(fill(3), NOW - 1)).toBe(3);
    down.destroy();
  });
});

function fill(count: number): OutcomeRecord[] {
  return Array.from({ length: count }, (_, i) => queued(`fill-${i}`));
}

describe('keyOf', () => {
  it("keys an event by its id, and a record by its slot and its sender's name", () => {
    expect(keyOf('msg_1:0', 'queued', 'api-key#2')).toEqual({
      eventId: 'msg_1:0',
      slot: 'queued#api-key#2',
    });
  });
});
