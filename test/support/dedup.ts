/**
 * dynalite for tests: the local stack's de-duplication store, reached through the real SDK, and
 * a fresh table per test so tests cannot see each other's request ids.
 */
import { randomUUID } from 'node:crypto';
import { DynamoDbRequestLedger } from '../../functions/adapters/dynamodb-request-ledger.ts';
import type { Logger } from '../../functions/core/ports.ts';
import { type LocalDynamoDb, startLocalDynamoDb } from '../../infra/local/dynamodb-local.ts';

export { type LocalDynamoDb, startLocalDynamoDb };

const silentLogger: Logger = { info: () => {}, warn: () => {}, error: () => {} };

/** A ledger on a new table of `db`. */
export async function newLedger(
  db: LocalDynamoDb,
  options: { windowSeconds?: number; logger?: Logger } = {},
): Promise<{ ledger: DynamoDbRequestLedger; tableName: string }> {
  const tableName = `dedup-${randomUUID().slice(0, 8)}`;
  await db.createDedupTable(tableName);
  return {
    tableName,
    ledger: new DynamoDbRequestLedger(db.client, tableName, {
      windowSeconds: options.windowSeconds ?? 86_400,
      logger: options.logger ?? silentLogger,
    }),
  };
}
