/**
 * A create Mautic may have applied is never sent again (contract §2), also when its dead letter
 * could not be written at once: the action ledger marks it before its dead letter is sent, and
 * a redelivered create of an entity Mautic does not upsert is claimed there before any call. A
 * retry that Mautic certainly did not apply still goes out, once. The real batch handler, fed by
 * the local event source from fauxqs, the ledger on dynalite, Mautic the simulator.
 */
import { randomUUID } from 'node:crypto';
import { ScanCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DynamoDbActionLedger } from '../../functions/adapters/dynamodb-action-ledger.ts';
import { SqsDeliveryQueues } from '../../functions/adapters/sqs-delivery-queues.ts';
import { createBatchHandler } from '../../functions/batch/handler.ts';
import { DEFAULT_DELIVERY_OPTIONS } from '../../functions/core/delivery/delivery-calls.ts';
import { MauticApiClient } from '../../functions/core/mautic/mautic-api.ts';
import type { DeliveryQueues } from '../../functions/core/queue-ports.ts';
import { createQueuePair } from '../../infra/local/queue-pair.ts';
import { SqsEventSource } from '../../infra/local/sqs-event-source.ts';
import { type MauticSimulator, startMauticSimulator } from '../../mautic-simulator/server.ts';
import { type LocalDynamoDb, startLocalDynamoDb } from '../support/dedup.ts';
import {
  type LocalSqs,
  queueCounts,
  receiveUntil,
  sendBodies,
  startLocalSqs,
  uniqueQueueName,
} from '../support/local-sqs.ts';
import { recorder } from '../support/observe.ts';

let localSqs: LocalSqs;
let db: LocalDynamoDb;
const running: Array<{ sim: MauticSimulator; source: SqsEventSource }> = [];

beforeAll(async () => {
  [localSqs, db] = await Promise.all([startLocalSqs(), startLocalDynamoDb()]);
});

afterAll(async () => {
  await Promise.all([localSqs.stop(), db.close()]);
});

afterEach(async () => {
  for (const { sim, source } of running.splice(0)) {
    await source.stop();
    await sim.close();
  }
});

/** The relay's batch side, whose dead-letter queue refuses the first `refusedLetters` sends. */
async function startRelay(refusedLetters: number) {
  const observed = recorder();
  const sim = await startMauticSimulator();
  const { sqs } = localSqs;
  const pair = await createQueuePair(sqs, {
    name: uniqueQueueName('ambiguous'),
    maxReceiveCount: 10,
    visibilityTimeoutSeconds: 1,
  });
  const tableName = `actions-${randomUUID().slice(0, 8)}`;
  await db.createDedupTable(tableName);
  const real = new SqsDeliveryQueues(sqs, {
    eventsQueueUrl: pair.queueUrl,
    deadLetterQueueUrl: pair.deadLetterQueueUrl,
  });
  let refused = 0;
  // As SQS throttling the dead-letter queue: the letters are not sent, the events stay queued.
  const queues: DeliveryQueues = {
    receive: (...args) => real.receive(...args),
    remove: (...args) => real.remove(...args),
    delay: (...args) => real.delay(...args),
    deadLetter: async (letters, until) => {
      if (refused >= refusedLetters) return real.deadLetter(letters, until);
      refused++;
      return letters.map((letter) => letter.message.messageId);
    },
  };
  const token = sim.issueToken().accessToken;
  const handler = createBatchHandler({
    api: new MauticApiClient({ baseUrl: sim.url, fetch, timeoutMs: 2_000 }),
    tokens: { accessToken: async () => token },
    queues,
    retry: { baseSeconds: 1, maxDelaySeconds: 1, horizonSeconds: 3600, maxReceiveCount: 10 },
    logger: observed.logger,
    metrics: observed.metrics,
    clock: Date,
    sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
    random: Math.random,
    learnedLimit: { value: undefined },
    ledger: new DynamoDbActionLedger(db.client, tableName, { clock: Date }),
    options: {
      ...DEFAULT_DELIVERY_OPTIONS,
      // A time Mautic names goes back to the queue rather than being waited for here.
      maxInRunWaitMs: 0,
      maxDelaySeconds: 30,
      batchWindowMs: 100,
    },
  });
  const source = new SqsEventSource({
    sqs,
    queueUrl: pair.queueUrl,
    queueArn: pair.queueArn,
    handler,
    batchSize: 10,
    batchWindowMs: 0,
    functionTimeoutMs: 10_000,
  });
  running.push({ sim, source });
  return {
    sim,
    observed,
    tableName,
    async send(event: Record<string, unknown>): Promise<void> {
      const body = { v: 1, eventId: randomUUID(), receivedAt: new Date().toISOString() };
      await sendBodies(sqs, pair.queueUrl, [JSON.stringify({ ...body, sender: 't', ...event })]);
    },
    /** Polls until the events queue is empty, within a bounded time. */
    async drain(timeoutMs = 20_000): Promise<void> {
      const deadline = Date.now() + timeoutMs;
      while (Date.now() < deadline) {
        await source.pollOnce();
        const { visible, inFlight } = await queueCounts(sqs, pair.queueUrl);
        if (visible + inFlight === 0) return;
      }
      throw new Error('the events queue did not drain in time');
    },
    deadLetters: (count: number) =>
      receiveUntil(sqs, pair.deadLetterQueueUrl, count, { timeoutMs: 3_000 }),
  };
}

const createCalls = (sim: MauticSimulator) =>
  sim.requests.filter((r) => r.path === '/api/companies/batch/new');

describe('an ambiguous create whose dead letter SQS does not take at once', () => {
  it('is never sent to Mautic again: one company, one call, one dead letter ambiguous_result', async () => {
    const relay = await startRelay(2);
    // Mautic saves the company, then the connection drops before its answer.
    relay.sim.failAfterApply({ path: '/api/companies/batch/new' }, 'drop');

    await relay.send({ entity: 'companies', action: 'create', data: { companyname: 'Acme' } });
    await relay.drain();

    expect(relay.sim.records('companies')).toHaveLength(1);
    expect(createCalls(relay.sim)).toHaveLength(1);
    const letters = await relay.deadLetters(1);
    expect(letters.map((m) => m.MessageAttributes?.['relay.reason']?.StringValue)).toEqual([
      'ambiguous_result',
    ]);
  }, 30_000);
});

describe('a create retried through the queue', () => {
  it('goes out once when Mautic certainly did not apply it, and its claim is done', async () => {
    const relay = await startRelay(0);
    // A server that says when to come back took no request.
    relay.sim.inject(
      { path: '/api/companies/batch/new' },
      { status: 503, headers: { 'retry-after': '1' }, body: '' },
    );

    await relay.send({ entity: 'companies', action: 'create', data: { companyname: 'Beta' } });
    await relay.drain();

    expect(relay.sim.records('companies')).toHaveLength(1);
    expect(createCalls(relay.sim).map((r) => r.status)).toEqual([503, 201]);
    const { Items = [] } = await db.client.send(new ScanCommand({ TableName: relay.tableName }));
    expect(Items.map((item) => item.status?.S)).toEqual(['done']);
  }, 30_000);
});
