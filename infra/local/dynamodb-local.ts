import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { CreateTableCommand, DescribeTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import dynalite from 'dynalite';
import { OUTCOME_TABLE } from '../../functions/core/ports.ts';
import { DEDUP_TABLE_KEY } from '../../functions/shared/config.ts';
import { listenOnLoopback } from '../../mautic-simulator/loopback.ts';

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
    // A local store that is down should fail fast, not after the SDK's three tries; but one
    // more try, as the cloud's clients make: under load, a reused keep-alive socket the store
    // had just closed failed a request (ECONNRESET) and a sender got 503.
    maxAttempts: 2,
  });
}

/** Marks the thread started below, so another worker importing this module starts none. */
const DYNALITE_THREAD = 'mautic-relay:dynalite-thread';
const THREAD_TIMEOUT_MS = 20_000;

if (!isMainThread && parentPort && workerData === DYNALITE_THREAD) {
  const port = parentPort;
  try {
    const store = await startLocalDynamoDb();
    port.once(
      'message',
      () => void store.close().finally(() => port.postMessage({ closed: true })),
    );
    await store.createDedupTable(LOCAL_DEDUP_TABLE);
    await store.createOutcomeTable(LOCAL_OUTCOME_TABLE);
    port.postMessage({ endpoint: store.endpoint });
  } catch (error) {
    port.postMessage({ error: error instanceof Error ? error.message : String(error) });
  }
}

/**
 * The local stack's tables: dynalite with the de-duplication table the ingest and the batch
 * function are given, and the outcome table (contract §1.6). It runs whatever the window: with
 * de-duplication off (0) the ingest keeps no request ids, but the batch function's action ledger
 * lives there too, as in the cloud; and the outcome table is made whatever the retention, as the
 * stack makes it. On a worker thread of its own: DynamoDB is not on the functions' CPU in the
 * cloud, and every event's outcomes, written by both functions, would otherwise take the batch
 * handler's event loop (200 records, a batch's, took dynalite 90 ms to 0.5 s of it).
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
  const worker = new Worker(new URL(import.meta.url), { workerData: DYNALITE_THREAD });
  let closed: () => void = () => {};
  const endpoint = await new Promise<string>((resolve, reject) => {
    const fail = (error: Error) => {
      clearTimeout(timer);
      void worker.terminate();
      reject(error);
    };
    const timer = setTimeout(
      () => fail(new Error(`dynalite did not start within ${THREAD_TIMEOUT_MS} ms`)),
      THREAD_TIMEOUT_MS,
    );
    worker.on('message', (message: { endpoint?: string; error?: string; closed?: true }) => {
      if (message.closed) return closed();
      if (message.error !== undefined) return fail(new Error(message.error));
      clearTimeout(timer);
      resolve(message.endpoint ?? '');
    });
    worker.once('error', fail);
  });
  const client = dynamoDbClient(endpoint);
  const where = `dynalite at ${endpoint}`;
  return {
    client,
    endpoint,
    tableName: LOCAL_DEDUP_TABLE,
    outcomeTableName: LOCAL_OUTCOME_TABLE,
    description:
      windowSeconds === 0
        ? `off (DEDUP_WINDOW_SECONDS=0); the action ledger in ${where}`
        : `${where}, request ids kept ${windowSeconds} s`,
    async close() {
      client.destroy();
      // Bounded: a thread that does not say it closed is ended all the same.
      await new Promise<void>((resolve) => {
        closed = resolve;
        worker.postMessage('close');
        setTimeout(resolve, THREAD_TIMEOUT_MS).unref();
      });
      await worker.terminate();
    },
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
