/**
 * Contract §1.3 after a partial 503: the ingest sends a request's events in groups of
 * 10 at once, so one group can fail while the others are queued. The sender's retry of the whole
 * request must queue only what was not queued, also past SQS's own 5 minutes of
 * de-duplication. The real ingest handler, the real SQS adapter on a fauxqs FIFO queue (its
 * sends failing as a test says) and the real request ledger on dynalite.
 */
import type { SendMessageBatchCommandInput } from '@aws-sdk/client-sqs';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { DynamoDbRequestLedger } from '../../functions/adapters/dynamodb-request-ledger.ts';
import { SqsEventQueue } from '../../functions/adapters/sqs-event-queue.ts';
import { dynamoDbClient } from '../../infra/local/dynamodb-local.ts';
import { createQueuePair } from '../../infra/local/queue-pair.ts';
import { type LocalDynamoDb, newLedger, startLocalDynamoDb } from '../support/dedup.ts';
import {
  API_KEY,
  contact,
  httpApiEvent,
  ingestHandler,
  NOW,
  signedHeaders,
} from '../support/ingest.ts';
import {
  type LocalSqs,
  queueCounts,
  receiveUntil,
  sqsClient,
  startLocalSqs,
  uniqueQueueName,
} from '../support/local-sqs.ts';
import { recordingLogger } from '../support/observe.ts';

let localSqs: LocalSqs;
let db: LocalDynamoDb;

beforeAll(async () => {
  [localSqs, db] = await Promise.all([startLocalSqs(), startLocalDynamoDb()]);
});

afterAll(async () => {
  await Promise.all([localSqs.stop(), db.close()]);
});

afterEach(() => {
  vi.useRealTimers();
});

/** Past SQS's 5 minutes of FIFO de-duplication, well inside the ledger's window (a day). */
const SIX_MINUTES = 6 * 60_000;
/** 25 events, one record each: groups of 10, 10 and 5, sent at once. */
const body = JSON.stringify(Array.from({ length: 25 }, (_, i) => contact(i)));
const emailsOf = (from: number, to: number) =>
  Array.from({ length: to - from }, (_, i) => `user${from + i}@example.com`);

/**
 * A fresh FIFO events queue whose SendMessageBatch calls throw, as SQS unreachable does, while
 * `failing` names the email of one of their events; and what the queue holds.
 */
async function fifoQueue() {
  const pair = await createQueuePair(localSqs.sqs, {
    name: uniqueQueueName('partial'),
    maxReceiveCount: 5,
    visibilityTimeoutSeconds: 60,
  });
  const client = sqsClient(localSqs.endpoint);
  const failing = new Set<string>();
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const entries = (args.input as SendMessageBatchCommandInput).Entries ?? [];
      const emails = entries.map((entry) => JSON.parse(entry.MessageBody ?? '{}').data?.email);
      if (context.commandName === 'SendMessageBatchCommand' && emails.some((e) => failing.has(e)))
        throw Object.assign(new Error('We encountered an internal error.'), {
          name: 'InternalError',
        });
      return next(args);
    },
    { step: 'initialize' },
  );
  /** The event ids the queue holds, once each message (waits until `count` came, at most 5 s). */
  const held = async (count: number) => {
    const messages = await receiveUntil(localSqs.sqs, pair.queueUrl, count, { timeoutMs: 5_000 });
    return messages.map((message) => JSON.parse(message.Body ?? '{}').eventId as string);
  };
  const visible = async () => (await queueCounts(localSqs.sqs, pair.queueUrl)).visible;
  return { queue: new SqsEventQueue(client, pair.queueUrl), failing, held, visible, client };
}

const signed = (id: string) =>
  httpApiEvent({
    body,
    headers: signedHeaders(body, { id, timestamp: Math.floor(Date.now() / 1000) }),
  });

const keyed = (idempotencyKey: string, requestBody = body) =>
  httpApiEvent({
    body: requestBody,
    headers: {
      'content-type': 'application/json',
      authorization: `Bearer ${API_KEY}`,
      'idempotency-key': idempotencyKey,
    },
  });

describe('a retry after a partial 503', () => {
  it('queues only the group that failed, past SQS de-duplication: each of 25 events once', async () => {
    vi.useFakeTimers({ toFake: ['Date'], now: NOW });
    const { queue, failing, held, visible, client } = await fifoQueue();
    const { ledger } = await newLedger(db);
    const handle = ingestHandler(queue, { ledger, clock: { now: () => Date.now() } });
    for (const email of emailsOf(10, 20)) failing.add(email);

    const first = await handle(signed('msg_partial'));
    failing.clear();
    vi.setSystemTime(NOW + SIX_MINUTES);
    const retry = await handle(signed('msg_partial'));
    const replay = await handle(signed('msg_partial'));

    expect(first.status).toBe(503);
    expect(first.body.error?.code).toBe('queue_unavailable');
    const ids = Array.from({ length: 25 }, (_, i) => `msg_partial:${i}`);
    expect(retry).toEqual({ status: 202, body: { accepted: 25, eventIds: ids } });
    expect(replay).toEqual(retry);
    expect(await visible()).toBe(25);
    expect((await held(25)).sort()).toEqual([...ids].sort());
    client.destroy();
  });

  it('answers the ids the queue holds when they were generated, over tries that fail in turn', async () => {
    const { queue, failing, held, visible, client } = await fifoQueue();
    const { ledger } = await newLedger(db);
    const handle = ingestHandler(queue, { ledger });

    // The first try queues 0–9; the second, sending only 10–24, queues 10–19.
    for (const email of emailsOf(10, 25)) failing.add(email);
    const first = await handle(keyed('order-25'));
    for (const email of emailsOf(10, 20)) failing.delete(email);
    const second = await handle(keyed('order-25'));
    failing.clear();
    const third = await handle(keyed('order-25'));

    expect([first.status, second.status, third.status]).toEqual([503, 503, 202]);
    expect(third.body.accepted).toBe(25);
    // An API-key request's ids are new at every try: the answer names those of the try that
    // queued each event, the queue holds each event once, under that id.
    expect(await visible()).toBe(25);
    const queuedIds = await held(25);
    expect([...(third.body.eventIds ?? [])].sort()).toEqual([...queuedIds].sort());
    const generated = (from: number, to: number) =>
      Array.from({ length: to - from }, (_, i) => `generated-${from + i}`);
    // Each try made 25 ids: the first's 1–10, the second's 36–45, the third's 71–75.
    expect(third.body.eventIds).toEqual([
      ...generated(1, 11),
      ...generated(36, 46),
      ...generated(71, 76),
    ]);
    client.destroy();
  });

  it('queues a corrected request (another body, the same id) whole: it is a request of its own', async () => {
    const { queue, failing, visible, client } = await fifoQueue();
    const { ledger } = await newLedger(db);
    const handle = ingestHandler(queue, { ledger });
    const corrected = JSON.stringify(Array.from({ length: 25 }, (_, i) => contact(100 + i)));

    for (const email of emailsOf(10, 20)) failing.add(email);
    const first = await handle(keyed('order-fix'));
    failing.clear();
    const other = await handle(keyed('order-fix', corrected));

    expect([first.status, other.status]).toEqual([503, 202]);
    expect(await visible()).toBe(15 + 25);
    client.destroy();
  });

  it.each([
    ['kept', 'PutItemCommand', [503, 202], 15 + 25],
    ['read', 'GetItemCommand', [503, 503], 0],
  ] as const)(
    'when the progress cannot be %s: 503 dedup_store_failed, then at least once',
    async (_, failingCommand, statuses, count) => {
      const { queue, failing, visible, client } = await fifoQueue();
      const { tableName } = await newLedger(db);
      const dynamodb = dynamoDbClient(db.endpoint);
      // Only the progress item's calls fail; Powertools' claim and answer go through.
      dynamodb.middlewareStack.add(
        (next, context) => async (args) => {
          const key = args.input as {
            Key?: { id?: { S?: string } };
            Item?: { id?: { S?: string } };
          };
          const id = key.Key?.id?.S ?? key.Item?.id?.S ?? '';
          if (context.commandName === failingCommand && id.startsWith('ingest-progress#'))
            throw Object.assign(new Error('Throughput exceeds the current capacity.'), {
              name: 'ThrottlingException',
              $metadata: { httpStatusCode: 400 },
            });
          return next(args);
        },
        { step: 'initialize' },
      );
      const logger = recordingLogger();
      const ledger = new DynamoDbRequestLedger(dynamodb, tableName, {
        windowSeconds: 86_400,
        logger,
      });
      const handle = ingestHandler(queue, { ledger });

      for (const email of emailsOf(10, 20)) failing.add(email);
      const first = await handle(keyed('order-store'));
      failing.clear();
      const retry = await handle(keyed('order-store'));

      expect([first.status, retry.status]).toEqual(statuses);
      // Kept: the retry queues the whole request again; read: nothing is queued unchecked.
      expect(await visible()).toBe(count);
      const events = logger.lines.map((line) => JSON.parse(line));
      expect(events[0]).toMatchObject({ event: 'dedup_store_failed', code: 'ThrottlingException' });
      expect(logger.lines.join('\n')).not.toContain('order-store');
      client.destroy();
      dynamodb.destroy();
    },
  );
});
