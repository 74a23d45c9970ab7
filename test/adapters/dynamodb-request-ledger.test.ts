/**
 * The DynamoDB request ledger against dynalite through the real SDK: what is stored, and what
 * happens when the store fails at each step.
 */
import { ScanCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { DynamoDbRequestLedger } from '../../functions/adapters/dynamodb-request-ledger.ts';
import { DEDUP_TTL_ATTRIBUTE } from '../../functions/shared/config.ts';
import { dynamoDbClient } from '../../infra/local/dynamodb-local.ts';
import { type LocalDynamoDb, newLedger, startLocalDynamoDb } from '../support/dedup.ts';
import { recordingLogger } from '../support/observe.ts';

const NOW = Date.parse('2026-11-21T12:00:00Z');
const identity = { key: 'webhook:msg_ledger', bodyHash: 'aGFzaA==' };
const options = { remainingTimeMs: 5_000, requestId: 'req-1' };
const accepted = (status = 202) => ({ status, body: '{"accepted":1}', remember: status === 202 });

let db: LocalDynamoDb;
beforeAll(async () => {
  db = await startLocalDynamoDb();
});
afterAll(async () => {
  await db.close();
});
afterEach(() => {
  vi.useRealTimers();
});

describe('DynamoDbRequestLedger', () => {
  it('stores a hashed key, the body hash, the answer and an expiry for the table TTL, never the raw id', async () => {
    vi.useFakeTimers({ toFake: ['Date'], now: NOW });
    const { ledger, tableName } = await newLedger(db, { windowSeconds: 600 });

    await ledger.once(identity, async () => accepted(), options);
    const { Items = [] } = await db.client.send(new ScanCommand({ TableName: tableName }));

    expect(Items).toHaveLength(1);
    const item = Items[0] ?? {};
    expect(item.status?.S).toBe('COMPLETED');
    expect(item[DEDUP_TTL_ATTRIBUTE]?.N).toBe(String(NOW / 1000 + 600));
    expect(item.id?.S).toMatch(/^ingest#[A-Za-z0-9+/=]{44}$/);
    expect(JSON.stringify(Items)).not.toContain('msg_ledger');
  });

  it('rethrows an unexpected failure of the work and leaves the id free', async () => {
    const { ledger } = await newLedger(db);

    await expect(
      ledger.once(
        identity,
        async () => {
          throw new TypeError('broken');
        },
        options,
      ),
    ).rejects.toThrow('broken');
    const next = await ledger.once(identity, async () => accepted(), options);

    expect(next.kind).toBe('accepted');
  });

  it.each([
    [202, 'saving the answer'],
    [503, 'freeing the id'],
  ])('keeps a %i answer when the store fails while %s, and logs the failure', async (status) => {
    const own = await startLocalDynamoDb();
    await own.createDedupTable('dedup-after');
    const logger = recordingLogger();
    const ledger = new DynamoDbRequestLedger(dynamoDbClient(own.endpoint), 'dedup-after', {
      windowSeconds: 86_400,
      logger,
    });

    const outcome = await ledger.once(
      identity,
      async () => {
        await own.close(); // the store goes away while the events are being queued
        return accepted(status);
      },
      options,
    );

    expect(outcome).toEqual({ kind: 'accepted', result: accepted(status) });
    expect(logger.lines.map((line) => JSON.parse(line))).toEqual([
      expect.objectContaining({ event: 'dedup_store_failed', requestId: 'req-1' }),
    ]);
  });

  it('answers in_progress while a claim is held and frees it when the claiming invocation runs out of time', async () => {
    vi.useFakeTimers({ toFake: ['Date'], now: NOW });
    const { ledger } = await newLedger(db);
    const held = { key: 'webhook:msg_held', bodyHash: 'x' };
    let entered = () => {};
    const inside = new Promise<void>((resolve) => {
      entered = resolve;
    });
    void ledger.once(
      held,
      async () => {
        entered();
        return new Promise<never>(() => {});
      },
      { remainingTimeMs: 2_000, requestId: 'dies' },
    );
    await inside;

    const during = await ledger.once(held, async () => accepted(), options);
    vi.setSystemTime(NOW + 2_001);
    const after = await ledger.once(held, async () => accepted(), options);

    expect(during).toEqual({ kind: 'in_progress' });
    expect(after.kind).toBe('accepted');
  });

  it('bounds a claim made without a deadline to 30 s', async () => {
    vi.useFakeTimers({ toFake: ['Date'], now: NOW });
    const { ledger, tableName } = await newLedger(db);
    let entered = () => {};
    const inside = new Promise<void>((resolve) => {
      entered = resolve;
    });
    void ledger.once(
      identity,
      async () => {
        entered();
        return new Promise<never>(() => {});
      },
      { remainingTimeMs: undefined, requestId: 'no-deadline' },
    );
    await inside;
    const { Items = [] } = await db.client.send(new ScanCommand({ TableName: tableName }));

    expect(Items[0]?.in_progress_expiration?.N).toBe(String(NOW + 30_000));
  });

  it("keeps a 503's progress for the next try of the same body only, within the window", async () => {
    vi.useFakeTimers({ toFake: ['Date'], now: NOW });
    const { ledger, tableName } = await newLedger(db, { windowSeconds: 600 });
    const partial = { status: 503, body: '{}', remember: false, progress: '["a",null]' };
    const seen: Array<string | undefined> = [];
    const accept = async (progress: string | undefined) => {
      seen.push(progress);
      return partial;
    };

    await ledger.once(identity, accept, options);
    await ledger.once(identity, accept, options);
    vi.setSystemTime(NOW + 600_001);
    await ledger.once(identity, accept, options);
    await ledger.once({ ...identity, bodyHash: 'b3RoZXI=' }, accept, options);
    const { Items = [] } = await db.client.send(new ScanCommand({ TableName: tableName }));

    // The first try has none; the second gets the first's; past the window (the second's
    // progress kept at NOW), none; another body, none.
    expect(seen).toEqual([undefined, '["a",null]', undefined, undefined]);
    expect(Items).toHaveLength(1);
    expect(Items[0]?.id?.S).toMatch(/^ingest-progress#[A-Za-z0-9_-]{43}$/);
    expect(JSON.stringify(Items)).not.toContain('msg_ledger');
  });

  it('tells a reused id (another body) from a replay', async () => {
    const { ledger } = await newLedger(db);

    await ledger.once(identity, async () => accepted(), options);
    const replay = await ledger.once(identity, async () => accepted(), options);
    const reused = await ledger.once(
      { ...identity, bodyHash: 'b3RoZXI=' },
      async () => accepted(),
      options,
    );

    expect(replay).toEqual({ kind: 'replayed', status: 202, body: '{"accepted":1}' });
    expect(reused).toEqual({ kind: 'reused' });
  });
});
