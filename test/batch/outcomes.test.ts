/**
 * The batch function's outcomes (contract §1.6) through the real handler, against the simulator
 * and dynalite: one record per event of a batch, written before the queues are told (while its
 * messages are in flight, no later try of the same events can write), and never a condition of
 * delivery: a store that fails or hangs leaves every message settled as it would be without it.
 */
import { randomUUID } from 'node:crypto';
import type { SQSRecord } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { DynamoDbOutcomeStore } from '../../functions/adapters/dynamodb-outcome-store.ts';
import { createBatchHandler } from '../../functions/batch/handler.ts';
import { DEFAULT_DELIVERY_OPTIONS } from '../../functions/core/delivery/delivery-calls.ts';
import { currentOutcomes } from '../../functions/core/ingest/outcome-view.ts';
import { MauticApiClient } from '../../functions/core/mautic/mautic-api.ts';
import type { OutcomeStore } from '../../functions/core/ports.ts';
import type { DeliveryQueues } from '../../functions/core/queue-ports.ts';
import { lambdaContext } from '../../infra/local/lambda-context.ts';
import { startMauticSimulator } from '../../mautic-simulator/server.ts';
import { InMemoryActionLedger } from '../support/action-ledger.ts';
import { type LocalDynamoDb, startLocalDynamoDb } from '../support/dedup.ts';
import { recorder } from '../support/observe.ts';

let db: LocalDynamoDb;
beforeAll(async () => {
  db = await startLocalDynamoDb();
});
afterAll(async () => {
  await db.close();
});

const ACCEPTED = new Date().toISOString();

function record(n: number, event: Record<string, unknown>): SQSRecord {
  return {
    messageId: `m${n}`,
    receiptHandle: `rh${n}`,
    body: JSON.stringify({
      v: 1,
      eventId: `ev-${n}`,
      receivedAt: ACCEPTED,
      sender: 'webhook#1',
      ...event,
    }),
    attributes: {
      ApproximateReceiveCount: '1',
      SentTimestamp: String(Date.now()),
      SenderId: 'x',
      ApproximateFirstReceiveTimestamp: String(Date.now()),
    },
    messageAttributes: {},
    md5OfBody: '',
    eventSource: 'aws:sqs',
    eventSourceARN: 'arn:aws:sqs:eu-west-1:1:events.fifo',
    awsRegion: 'eu-west-1',
  } as SQSRecord;
}

/** Queues that receive nothing more and keep, in order, what the handler asked of them. */
function recordingQueues(steps: string[]): DeliveryQueues {
  return {
    deadLetter: async (letters) => {
      steps.push(`deadLetter ${letters.map((l) => l.eventId).join(' ')}`);
      return [];
    },
    delay: async (delays) => {
      steps.push(`delay ${delays.map((d) => d.message.messageId).join(' ')}`);
      return [];
    },
    receive: async () => [],
    remove: async () => [],
  };
}

async function handlerWith(outcomes: OutcomeStore | undefined, steps: string[]) {
  const sim = await startMauticSimulator();
  onTestFinished(() => sim.close());
  const observed = recorder();
  const handler = createBatchHandler({
    api: new MauticApiClient({ baseUrl: sim.url, fetch }),
    tokens: { accessToken: async () => sim.issueToken().accessToken },
    queues: recordingQueues(steps),
    outcomes,
    retry: { baseSeconds: 30, maxDelaySeconds: 900, horizonSeconds: 86_400, maxReceiveCount: 50 },
    logger: observed.logger,
    metrics: observed.metrics,
    clock: Date,
    sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
    random: () => 0.5,
    learnedLimit: { value: undefined },
    ledger: new InMemoryActionLedger(),
    options: {
      ...DEFAULT_DELIVERY_OPTIONS,
      baseBackoffMs: 5,
      maxBackoffMs: 10,
      maxDelaySeconds: 900,
      batchWindowMs: 0,
    },
  });
  const run = (records: SQSRecord[]) =>
    handler({ Records: records }, lambdaContext('batch', 20_000));
  return { sim, observed, run };
}

describe('the batch function’s outcomes', () => {
  it('writes each event’s outcome before it tells the queues, with the ids Mautic gave', async () => {
    const tableName = `outcomes-${randomUUID().slice(0, 8)}`;
    await db.createOutcomeTable(tableName);
    const steps: string[] = [];
    const dynamo = new DynamoDbOutcomeStore(db.client, tableName, {
      retentionSeconds: 3600,
      clock: Date,
    });
    const store: OutcomeStore = {
      write: (records, until) => {
        steps.push(`outcomes ${records.map((r) => `${r.eventId}=${r.status}`).join(' ')}`);
        return dynamo.write(records, until);
      },
      read: (keys) => dynamo.read(keys),
    };
    const { sim, run } = await handlerWith(store, steps);
    const known = sim.seed('contacts', { email: 'known@example.com' });
    const acme = sim.seed('companies', { companyname: 'Acme' });
    // Every edit of companies fails: it goes back to the queue, delayed.
    sim.inject({ path: '/api/companies/batch/edit' }, { status: 502, body: '' }, 10);

    const answer = await run([
      record(1, { entity: 'contacts', action: 'create', data: { email: 'ann@example.com' } }),
      record(2, {
        entity: 'contacts',
        action: 'create',
        data: { email: 'ann@example.com', firstname: 'Ann' },
      }),
      record(3, { entity: 'contacts', action: 'edit', id: 999_999, data: { firstname: 'X' } }),
      record(4, { entity: 'companies', action: 'edit', id: acme.id, data: { city: 'Oslo' } }),
      record(5, { entity: 'contacts', action: 'edit', id: known.id, data: { city: 'Oslo' } }),
    ]);

    expect(answer.batchItemFailures.map((f) => f.itemIdentifier)).toEqual(['m4']);
    const [written, ...after] = steps;
    expect(written?.split(' ').sort()).toEqual(
      [
        'outcomes',
        'ev-1=coalesced',
        'ev-2=delivered',
        'ev-3=dead_lettered',
        'ev-4=retrying',
        'ev-5=delivered',
      ].sort(),
    );
    expect(after.sort()).toEqual(['deadLetter ev-3', 'delay m4']);

    const keys = [1, 2, 3, 4, 5].map((n) => ({ eventId: `ev-${n}`, sender: 'webhook#1' }));
    const byId = new Map(currentOutcomes(await dynamo.read(keys)).map((r) => [r.eventId, r]));
    const ann = sim.records('contacts').find((c) => c.email === 'ann@example.com');
    expect(byId.get('ev-1')).toMatchObject({ status: 'coalesced', into: 'ev-2' });
    expect(byId.get('ev-2')).toMatchObject({
      status: 'delivered',
      mauticIds: [ann?.id],
      httpStatus: 201,
      attempts: 1,
    });
    expect(byId.get('ev-3')).toMatchObject({
      status: 'dead_lettered',
      reason: 'mautic_rejected_item',
      httpStatus: 404,
    });
    expect(byId.get('ev-4')).toMatchObject({
      status: 'retrying',
      lastFailure: { class: 'mautic_server', httpStatus: 502 },
    });
    const next = Date.parse(byId.get('ev-4')?.nextAttemptAt ?? '');
    expect(next - Date.now()).toBeGreaterThan(10_000);
    expect(byId.get('ev-5')).toMatchObject({ status: 'delivered', mauticIds: [known.id] });
  });

  it('settles the batch as it would without outcomes when the store fails or hangs, and says so', async () => {
    const events = [
      record(1, { entity: 'contacts', action: 'create', data: { email: 'a@example.com' } }),
      record(2, { entity: 'contacts', action: 'edit', id: 999_999, data: { firstname: 'X' } }),
    ];
    const failing: OutcomeStore = {
      write: async () => {
        throw new Error('ServiceUnavailable');
      },
      read: async () => [],
    };
    const hanging: OutcomeStore = { write: () => new Promise(() => {}), read: async () => [] };
    const answers = [];
    for (const store of [undefined, failing, hanging]) {
      const steps: string[] = [];
      const { sim, observed, run } = await handlerWith(store, steps);
      const started = Date.now();
      answers.push({
        answer: await run(events),
        steps,
        created: sim.records('contacts').length,
        warned: observed.events('outcome_write_failed').length,
        counted: observed.metric('OutcomeWritesFailed'),
        tookMs: Date.now() - started,
      });
    }
    const [without, failed, hung] = answers;

    for (const run of [failed, hung]) {
      expect(run?.answer).toEqual(without?.answer);
      expect(run?.steps).toEqual(['deadLetter ev-2']);
      expect(run?.created).toBe(1);
      expect(run?.warned).toBe(1);
      expect(run?.counted).toBe(2);
    }
    expect(without?.warned).toBe(0);
    // A store that never answers holds the settling back no longer than its budget.
    expect(hung?.tookMs).toBeLessThan(5_000);
  });
});
