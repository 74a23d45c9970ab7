/**
 * The action ledger frees only its own claim: a release is conditioned on the claim's id, so a
 * delete the SDK sends again (its first answer lost) after another delivery claimed the key,
 * or a release by a delivery that never held the claim, leaves that claim in place, and the
 * event is never applied twice. On dynalite through the real SDK.
 */
import { randomUUID } from 'node:crypto';
import { DeleteItemCommand, type DeleteItemCommandInput } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DynamoDbActionLedger } from '../../functions/adapters/dynamodb-action-ledger.ts';
import { dynamoDbClient } from '../../infra/local/dynamodb-local.ts';
import { type LocalDynamoDb, startLocalDynamoDb } from '../support/dedup.ts';

const clock = { now: () => Date.parse('2026-11-21T12:00:00Z') };
let db: LocalDynamoDb;

beforeAll(async () => {
  db = await startLocalDynamoDb();
});
afterAll(async () => {
  await db.close();
});

async function table(): Promise<string> {
  const name = `claims-${randomUUID().slice(0, 8)}`;
  await db.createDedupTable(name);
  return name;
}

describe('releasing a claim in the action ledger', () => {
  it('leaves another delivery’s claim when a delete is sent again after it claimed the key', async () => {
    const tableName = await table();
    // The first delivery's own client, whose delete requests are kept as the SDK would resend them.
    const client = dynamoDbClient(db.endpoint);
    const deletes: DeleteItemCommandInput[] = [];
    client.middlewareStack.add(
      (next, context) => async (args) => {
        if (context.commandName === 'DeleteItemCommand') {
          deletes.push(structuredClone(args.input as DeleteItemCommandInput));
        }
        return next(args);
      },
      { step: 'initialize', name: 'keepDeletes' },
    );
    try {
      const first = new DynamoDbActionLedger(client, tableName, { clock });
      const second = new DynamoDbActionLedger(db.client, tableName, { clock });
      const third = new DynamoDbActionLedger(db.client, tableName, { clock });

      expect(await first.claim('addPoints k')).toBe('claimed');
      await first.release('addPoints k');
      expect(await second.claim('addPoints k')).toBe('claimed');
      // The first release's delete again, as the SDK retries one whose answer was lost.
      expect(deletes).toHaveLength(1);
      await expect(
        db.client.send(new DeleteItemCommand(deletes[0] as DeleteItemCommandInput)),
      ).rejects.toThrow(expect.objectContaining({ name: 'ConditionalCheckFailedException' }));

      // The second delivery's claim stands: a third delivery may not send the action.
      expect(await third.claim('addPoints k')).toBe('unknown');
    } finally {
      client.destroy();
    }
  });

  it('frees nothing for a delivery that never held the claim', async () => {
    const tableName = await table();
    const holder = new DynamoDbActionLedger(db.client, tableName, { clock });
    const other = new DynamoDbActionLedger(db.client, tableName, { clock });

    expect(await holder.claim('addPoints k')).toBe('claimed');
    await other.release('addPoints k');

    expect(await other.claim('addPoints k')).toBe('unknown');
    await holder.release('addPoints k');
    expect(await other.claim('addPoints k')).toBe('claimed');
  });
});
