/**
 * The action ledger (contract §2: `addPoints` at most once per event) on dynalite through the
 * real SDK, and the in-memory one delivery tests use, held to the same cases so it cannot drift.
 */
import { randomUUID } from 'node:crypto';
import {
  DeleteItemCommand,
  GetItemCommand,
  PutItemCommand,
  ScanCommand,
} from '@aws-sdk/client-dynamodb';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  ACTION_KEY_LIFETIME_SECONDS,
  DynamoDbActionLedger,
} from '../../functions/adapters/dynamodb-action-ledger.ts';
import type { ActionLedger } from '../../functions/core/ports.ts';
import { DEDUP_TTL_ATTRIBUTE } from '../../functions/shared/config.ts';
import { dynamoDbClient } from '../../infra/local/dynamodb-local.ts';
import { InMemoryActionLedger } from '../support/action-ledger.ts';
import { type LocalDynamoDb, startLocalDynamoDb } from '../support/dedup.ts';

const NOW = Date.parse('2026-11-21T12:00:00.750Z');
const clock = { now: () => NOW };

let db: LocalDynamoDb;
beforeAll(async () => {
  db = await startLocalDynamoDb();
});
afterAll(async () => {
  await db.close();
});
afterEach(() => {
  vi.restoreAllMocks();
});

/** A ledger on a new table of `db`, so tests cannot see each other's keys. */
async function dynamoLedger(): Promise<{ ledger: DynamoDbActionLedger; tableName: string }> {
  const tableName = `actions-${randomUUID().slice(0, 8)}`;
  await db.createDedupTable(tableName);
  return { tableName, ledger: new DynamoDbActionLedger(db.client, tableName, { clock }) };
}

const behaviours: Array<[string, (ledger: ActionLedger) => Promise<void>]> = [
  [
    'claims a new key',
    async (ledger) => {
      expect(await ledger.claim('evt-1')).toBe('claimed');
    },
  ],
  [
    'answers unknown to a second claim whose outcome was never recorded',
    async (ledger) => {
      await ledger.claim('evt-1');
      expect(await ledger.claim('evt-1')).toBe('unknown');
      expect(await ledger.claim('evt-1')).toBe('unknown');
    },
  ],
  [
    'answers done once the claim is completed',
    async (ledger) => {
      await ledger.claim('evt-1');
      await ledger.complete('evt-1');
      expect(await ledger.claim('evt-1')).toBe('done');
    },
  ],
  [
    'frees a released key for the next claim',
    async (ledger) => {
      await ledger.claim('evt-1');
      await ledger.release('evt-1');
      expect(await ledger.claim('evt-1')).toBe('claimed');
    },
  ],
  [
    'keeps a completed key done when it is released',
    async (ledger) => {
      await ledger.claim('evt-1');
      await ledger.complete('evt-1');
      await ledger.release('evt-1');
      expect(await ledger.claim('evt-1')).toBe('done');
    },
  ],
  [
    'releases a key never claimed without a failure, and keeps keys apart',
    async (ledger) => {
      await ledger.release('evt-never');
      await ledger.claim('evt-1');
      await ledger.complete('evt-1');
      expect(await ledger.claim('evt-2')).toBe('claimed');
      expect(await ledger.claim('evt-never')).toBe('claimed');
    },
  ],
  [
    'gives a key to exactly one of two claims at once',
    async (ledger) => {
      const answers = await Promise.all([ledger.claim('evt-1'), ledger.claim('evt-1')]);
      expect(answers.sort()).toEqual(['claimed', 'unknown']);
    },
  ],
];

describe.each([
  ['DynamoDbActionLedger', async () => (await dynamoLedger()).ledger],
  ['InMemoryActionLedger', async () => new InMemoryActionLedger()],
])('%s', (_name, newLedger: () => Promise<ActionLedger>) => {
  it.each(behaviours)('%s', async (_behaviour, check) => {
    await check(await newLedger());
  });
});

describe('DynamoDbActionLedger on the table', () => {
  it('stores the key under action#, claimed, with an expiry in epoch seconds for the TTL', async () => {
    const { ledger, tableName } = await dynamoLedger();

    await ledger.claim('evt-1');
    const claimed = await db.client.send(new ScanCommand({ TableName: tableName }));
    await ledger.complete('evt-1');
    const done = await db.client.send(new ScanCommand({ TableName: tableName }));

    const item = {
      id: { S: 'action#evt-1' },
      claimId: { S: expect.stringMatching(/^[0-9a-f-]{36}$/) },
      [DEDUP_TTL_ATTRIBUTE]: { N: String(Math.floor(NOW / 1000) + ACTION_KEY_LIFETIME_SECONDS) },
    };
    expect(claimed.Items).toEqual([{ ...item, status: { S: 'claimed' } }]);
    expect(done.Items).toEqual([{ ...item, status: { S: 'done' } }]);
  });

  it('answers claimed when the SDK retries a put whose answer was lost', async () => {
    const { ledger } = await dynamoLedger();
    const send = db.client.send.bind(db.client);
    vi.spyOn(db.client, 'send').mockImplementation((async (command: unknown) => {
      // The first try reaches the table, its answer does not come back, the retry finds the item.
      if (command instanceof PutItemCommand) await send(command);
      return send(command as PutItemCommand);
    }) as typeof db.client.send);

    expect(await ledger.claim('evt-1')).toBe('claimed');
    vi.restoreAllMocks();
    expect(await ledger.claim('evt-1')).toBe('unknown');
  });

  it('remembers a key longer than three stays in SQS (14 days each)', () => {
    expect(ACTION_KEY_LIFETIME_SECONDS).toBeGreaterThanOrEqual(3 * 14 * 86_400);
  });

  it('claims again once when the item goes away between its put and its read', async () => {
    const { ledger, tableName } = await dynamoLedger();
    await ledger.claim('evt-1');
    const send = db.client.send.bind(db.client);
    let reads = 0;
    vi.spyOn(db.client, 'send').mockImplementation((async (command: unknown) => {
      if (command instanceof GetItemCommand && reads++ === 0) {
        await send(
          new DeleteItemCommand({ TableName: tableName, Key: { id: { S: 'action#evt-1' } } }),
        );
      }
      return send(command as GetItemCommand);
    }) as typeof db.client.send);

    expect(await ledger.claim('evt-1')).toBe('claimed');
    expect(reads).toBe(1);
  });

  it('answers unknown when the item goes away twice: the key is not known to be free', async () => {
    const { ledger, tableName } = await dynamoLedger();
    await ledger.claim('evt-1');
    const send = db.client.send.bind(db.client);
    let reads = 0;
    vi.spyOn(db.client, 'send').mockImplementation((async (command: unknown) => {
      if (command instanceof GetItemCommand) {
        reads++;
        return { $metadata: {} };
      }
      return send(command as GetItemCommand);
    }) as typeof db.client.send);

    expect(await ledger.claim('evt-1')).toBe('unknown');
    expect(reads).toBe(2);
    const left = await send(
      new GetItemCommand({ TableName: tableName, Key: { id: { S: 'action#evt-1' } } }),
    );
    expect(left.Item?.status?.S).toBe('claimed');
  });

  it('throws when the table cannot be written', async () => {
    const ledger = new DynamoDbActionLedger(db.client, 'no-such-table', { clock });

    await expect(ledger.claim('evt-1')).rejects.toThrow(
      expect.objectContaining({ name: 'ResourceNotFoundException' }),
    );
    await expect(ledger.complete('evt-1')).rejects.toThrow(
      expect.objectContaining({ name: 'ResourceNotFoundException' }),
    );
    // No claim of its own was made: a release has nothing to free, and asks nothing.
    await expect(ledger.release('evt-1')).resolves.toBeUndefined();
  });

  it('throws when the store is down', async () => {
    const own = await startLocalDynamoDb();
    const client = dynamoDbClient(own.endpoint);
    await own.createDedupTable('actions');
    const ledger = new DynamoDbActionLedger(client, 'actions', { clock });
    // A claim of its own, which only a store that answers can free.
    expect(await ledger.claim('evt-0')).toBe('claimed');
    await own.close();
    try {
      await expect(ledger.release('evt-0')).rejects.toThrow();
      await expect(ledger.claim('evt-1')).rejects.toThrow();
      await expect(ledger.complete('evt-1')).rejects.toThrow();
    } finally {
      client.destroy();
    }
  });
});

describe('InMemoryActionLedger', () => {
  it('shows its entries and every call, and fails the next call of a method once, as told', async () => {
    const ledger = new InMemoryActionLedger();
    ledger.failNext('claim');
    ledger.failNext('complete', new Error('store down'));

    await expect(ledger.claim('evt-1')).rejects.toThrow('The action ledger failed to claim');
    expect(await ledger.claim('evt-1')).toBe('claimed');
    await expect(ledger.complete('evt-1')).rejects.toThrow('store down');
    expect(ledger.entries()).toEqual(new Map([['evt-1', 'claimed']]));
    await ledger.complete('evt-1');
    await ledger.claim('evt-2');
    ledger.failNext('release');
    await expect(ledger.release('evt-2')).rejects.toThrow('The action ledger failed to release');

    expect(ledger.entries()).toEqual(
      new Map([
        ['evt-1', 'done'],
        ['evt-2', 'claimed'],
      ]),
    );
    expect(ledger.calls.map(({ method, key }) => `${method} ${key}`)).toEqual([
      'claim evt-1',
      'claim evt-1',
      'complete evt-1',
      'complete evt-1',
      'claim evt-2',
      'release evt-2',
    ]);
  });
});
