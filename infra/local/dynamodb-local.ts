import { CreateTableCommand, DescribeTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import dynalite from 'dynalite';
import { OUTCOME_TABLE } from '../../functions/core/ports.ts';
import { DEDUP_TABLE_KEY } from '../../functions/shared/config.ts';
import { listenOnLoopback } from './loopback.ts';

/** The tables' names in the local store. */
export const LOCAL_DEDUP_TABLE = 'mautic-relay-dedup';
const LOCAL_OUTCOME_TABLE = 'mautic-relay-outcomes';

/** dynalite, a DynamoDB implementation on npm, in memory on 127.0.0.1: the local de-duplication store. */
export interface LocalDynamoDb {
  /** `http://127.0.0.1:<port>`. */
  readonly endpoint: string;
  /** A client for it; destroyed by close(). */
  readonly client: DynamoDBClient;
  /** Creates a table shaped as the stack's de-duplication table (key `id`). */
  createDedupTable(name: string): Promise<void>;
  /** Creates a table shaped as the stack's outcome table (event id, and slot and sender). */
  createOutcomeTable(name: string): Promise<void>;
  close(): Promise<void>;
}

/** Starts dynalite on a free loopback port (or `port`); its data lives in memory until close(). */
export async function startLocalDynamoDb(port = 0): Promise<LocalDynamoDb> {
  // Tables are ACTIVE at once: dynalite's default 500 ms of CREATING would only slow start-up.
  const server = dynalite({ createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 });
  const bound = await listenOnLoopback(server, port);
  const endpoint = `http://127.0.0.1:${bound}`;
  const client = dynamoDbClient(endpoint);
  return {
    endpoint,
    client,
    async createDedupTable(name) {
      await client.send(
        new CreateTableCommand({
          TableName: name,
          BillingMode: 'PAY_PER_REQUEST',
          AttributeDefinitions: [{ AttributeName: DEDUP_TABLE_KEY, AttributeType: 'S' }],
          KeySchema: [{ AttributeName: DEDUP_TABLE_KEY, KeyType: 'HASH' }],
        }),
      );
      await untilActive(client, name);
    },
    async createOutcomeTable(name) {
      const { partitionKey, sortKey } = OUTCOME_TABLE;
      await client.send(
        new CreateTableCommand({
          TableName: name,
          BillingMode: 'PAY_PER_REQUEST',
          AttributeDefinitions: [
            { AttributeName: partitionKey, AttributeType: 'S' },
            { AttributeName: sortKey, AttributeType: 'S' },
          ],
          KeySchema: [
            { AttributeName: partitionKey, KeyType: 'HASH' },
            { AttributeName: sortKey, KeyType: 'RANGE' },
          ],
        }),
      );
      await untilActive(client, name);
    },
    async close() {
      client.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve, reject) =>
        server.close((error) => (error ? reject(error) : resolve())),
      );
    },
  };
}

/** A client for a local DynamoDB at `endpoint`, with the dummy credentials it accepts. */
export function dynamoDbClient(endpoint: string): DynamoDBClient {
  return new DynamoDBClient({
    endpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    // A local store that is down should fail fast, not after the SDK's three tries.
    maxAttempts: 1,
  });
}

/**
 * The local stack's tables: dynalite with the de-duplication table the ingest and the batch
 * function are given, and the outcome table (contract §1.6). It runs whatever the window: with
 * de-duplication off (0) the ingest keeps no request ids, but the batch function's action ledger
 * lives there too, as in the cloud; and the outcome table is made whatever the retention, as the
 * stack makes it.
 */
export async function startDedupStore(windowSeconds: number): Promise<{
  client: DynamoDBClient;
  /** Where the store listens, for clients of other threads. */
  endpoint: string;
  tableName: string;
  outcomeTableName: string;
  description: string;
  close(): Promise<void>;
}> {
  const store = await startLocalDynamoDb();
  try {
    await store.createDedupTable(LOCAL_DEDUP_TABLE);
    await store.createOutcomeTable(LOCAL_OUTCOME_TABLE);
  } catch (error) {
    await store.close();
    throw error;
  }
  const where = `dynalite at ${store.endpoint}`;
  return {
    client: store.client,
    endpoint: store.endpoint,
    tableName: LOCAL_DEDUP_TABLE,
    outcomeTableName: LOCAL_OUTCOME_TABLE,
    description:
      windowSeconds === 0
        ? `off (DEDUP_WINDOW_SECONDS=0); the action ledger in ${where}`
        : `${where}, request ids kept ${windowSeconds} s`,
    close: () => store.close(),
  };
}

/**
 * Waits until the table is ACTIVE: even with `createTableMs: 0` dynalite turns it ACTIVE in a
 * timer after answering CreateTable, so a write straight after could meet no table. Bounded:
 * 200 looks 5 ms apart. (The SDK's waiter would poll at its 20 s minimum.)
 */
async function untilActive(client: DynamoDBClient, name: string): Promise<void> {
  for (let look = 0; look < 200; look++) {
    const { Table } = await client.send(new DescribeTableCommand({ TableName: name }));
    if (Table?.TableStatus === 'ACTIVE') return;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  throw new Error(`The local table ${name} did not become ACTIVE`);
}
