/**
 * Contract §2, one busy record never stalls the others, end to end on the ingest's side: real
 * HTTP on 127.0.0.1 to the local HTTP front, the ingest built by its own builder, the FIFO
 * queue on fauxqs and the de-duplication table on dynalite; two fronts with their own clients
 * stand for two ingest containers. The clock is the test's, so a minute passes at once.
 */
import { randomUUID } from 'node:crypto';
import { ScanCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { compileSources, parseSourcesDocument } from '../../functions/core/sources/sources.ts';
import { buildIngestHandler } from '../../functions/ingest/compose.ts';
import { ENV, loadIngestConfig } from '../../functions/shared/config.ts';
import { dynamoDbClient } from '../../infra/local/dynamodb-local.ts';
import { startHttpFront } from '../../infra/local/http-front.ts';
import { LineLogger } from '../../infra/local/line-logger.ts';
import { createQueuePair } from '../../infra/local/queue-pair.ts';
import { type LocalDynamoDb, startLocalDynamoDb } from '../support/dedup.ts';
import { API_KEY } from '../support/ingest.ts';
import {
  type LocalSqs,
  queueCounts,
  sqsClient,
  startLocalSqs,
  uniqueQueueName,
} from '../support/local-sqs.ts';
import { stripeEvent, stripeHeaders, stripeSource } from '../support/sources.ts';

/** Half a minute into 12:00 UTC. */
const START = Date.parse('2026-11-21T12:00:30Z');

let localSqs: LocalSqs;
let db: LocalDynamoDb;

beforeAll(async () => {
  [localSqs, db] = await Promise.all([startLocalSqs(), startLocalDynamoDb()]);
});

afterAll(async () => {
  await Promise.all([localSqs.stop(), db.close()]);
});

/**
 * `containers` ingest functions sharing a fresh FIFO queue and table (or the table named), each
 * behind its own HTTP front, with its own AWS clients; stopped when the test ends.
 */
async function relay(settings: Record<string, string>, options: { containers?: number } = {}) {
  const queues = await createQueuePair(localSqs.sqs, {
    name: uniqueQueueName('backlog'),
    maxReceiveCount: 5,
    visibilityTimeoutSeconds: 30,
  });
  const tableName = `dedup-${randomUUID().slice(0, 8)}`;
  await db.createDedupTable(tableName);
  const config = loadIngestConfig({
    [ENV.EVENTS_QUEUE_URL]: queues.queueUrl,
    [ENV.DEAD_LETTER_QUEUE_URL]: queues.deadLetterQueueUrl,
    [ENV.INGEST_API_KEYS]: API_KEY,
    [ENV.DEDUP_TABLE_NAME]: tableName,
    ...settings,
  });
  const clock = { at: START, now: () => clock.at };
  const lines: string[] = [];
  const sources = compileSources(
    parseSourcesDocument({ sources: { 'stripe-customers': stripeSource() } }),
  );
  const urls: string[] = [];
  for (let container = 0; container < (options.containers ?? 1); container++) {
    const sqs = sqsClient(localSqs.endpoint);
    const dynamodb = dynamoDbClient(db.endpoint);
    const logger = new LineLogger({ print: (line) => lines.push(line), debug: false });
    const handler = await buildIngestHandler(config, { sqs, dynamodb, logger, clock, sources });
    const front = await startHttpFront({ handler });
    onTestFinished(async () => {
      await front.close();
      sqs.destroy();
      dynamodb.destroy();
    });
    urls.push(front.url);
  }
  const queued = async () => (await queueCounts(localSqs.sqs, queues.queueUrl)).visible;
  const items = async () =>
    (await db.client.send(new ScanCommand({ TableName: tableName }))).Items ?? [];
  return { urls, clock, lines, queued, items };
}

/** POST /events with the API key (and an Idempotency-Key when given). */
async function post(url: string, events: unknown, idempotencyKey?: string) {
  return answer(
    await fetch(`${url}/events`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        authorization: `Bearer ${API_KEY}`,
        ...(idempotencyKey === undefined ? {} : { 'idempotency-key': idempotencyKey }),
      },
      body: JSON.stringify(events),
      signal: AbortSignal.timeout(10_000),
    }),
  );
}

async function answer(response: Response) {
  const body = (await response.json()) as {
    eventIds?: string[];
    error?: { code: string; message: string; details?: unknown[] };
  };
  return { status: response.status, retryAfter: response.headers.get('retry-after'), body };
}

const create = (email: string) => ({ entity: 'contacts', action: 'create', data: { email } });
const edit = (email: string) => ({
  entity: 'contacts',
  action: 'edit',
  match: { email },
  data: { city: 'Oslo' },
});
const company = { entity: 'companies', action: 'create', data: { companyname: 'Acme' } };

describe('one busy record never stalls the others', () => {
  it('holds a record to its bound across two ingest containers; the request past it gets 429 with Retry-After and queues nothing, and other records keep flowing', async () => {
    const { urls, lines, queued } = await relay(
      { [ENV.MAX_RECORD_EVENTS_PER_MINUTE]: '5' },
      { containers: 2 },
    );
    const [first = '', second = ''] = urls;

    for (let n = 0; n < 5; n++) {
      expect((await post(n % 2 === 0 ? first : second, create('ann@example.com'))).status).toBe(
        202,
      );
    }
    // Ann, named another way, in a request with Bob: nothing of it may be queued.
    const refused = await post(second, [create('bob@example.com'), edit('Ann@Example.com')]);

    expect(refused).toEqual({
      status: 429,
      retryAfter: '42',
      body: { error: { code: 'record_backlog', message: expect.stringMatching(/5 events/) } },
    });
    expect(await queued()).toBe(5);
    expect((await post(first, create('bob@example.com'))).status).toBe(202);
    // Creates of new records name none: they are never counted.
    expect((await post(second, Array(7).fill(company))).status).toBe(202);
    expect(await queued()).toBe(13);
    // Bob had 1 counted, not 2: his count of the refused request was given back.
    for (let n = 0; n < 4; n++)
      expect((await post(first, edit('bob@example.com'))).status).toBe(202);
    expect((await post(first, edit('bob@example.com'))).status).toBe(429);
    const logged = lines.join('\n');
    expect(logged).toMatch(/event=record_backlog requestId=\S+ records=\["[\w-]{43}"\] limit=5/);
    expect(logged).not.toMatch(/ann@|bob@/i);
  });

  it('takes a refused request afresh when it is sent again: refused inside the window, accepted once the record has room, then replayed', async () => {
    const { urls, clock, queued } = await relay({ [ENV.MAX_RECORD_EVENTS_PER_MINUTE]: '2' });
    const [url = ''] = urls;
    await post(url, create('ann@example.com'), 'order-1');
    await post(url, create('ann@example.com'), 'order-2');

    const refused = await post(url, edit('ann@example.com'), 'order-3');
    const again = await post(url, edit('ann@example.com'), 'order-3');
    clock.at += Number(refused.retryAfter) * 1000;
    const accepted = await post(url, edit('ann@example.com'), 'order-3');
    const replayed = await post(url, edit('ann@example.com'), 'order-3');

    expect([refused.status, refused.retryAfter]).toEqual([429, '60']);
    expect([again.status, again.body.error?.code]).toEqual([429, 'record_backlog']);
    expect(accepted.status).toBe(202);
    expect(replayed).toEqual(accepted);
    expect(await queued()).toBe(3);
  });

  it('refuses (422) a request holding more events of one record than a minute takes, before counting anything', async () => {
    const { urls, queued, items } = await relay({ [ENV.MAX_RECORD_EVENTS_PER_MINUTE]: '2' });

    const refused = await post(urls[0] ?? '', [
      create('ann@example.com'),
      edit('ann@example.com'),
      edit('ANN@example.com'),
    ]);

    expect(refused.status).toBe(422);
    expect(refused.body.error).toEqual({
      code: 'invalid_event',
      message: 'The request could not be accepted.',
      details: [{ path: '', message: expect.stringMatching(/holds 3 events of one record/) }],
    });
    expect(await queued()).toBe(0);
    expect(await items()).toEqual([]);
  });

  it('holds a source’s events to the same bound', async () => {
    const { urls, clock, queued } = await relay({ [ENV.MAX_RECORD_EVENTS_PER_MINUTE]: '2' });
    const postStripe = async (id: string) => {
      const payload = stripeEvent(id, 'customer.updated', 'ann@example.com');
      const headers = stripeHeaders(payload, { timestamp: Math.floor(clock.at / 1000) });
      return answer(
        await fetch(`${urls[0]}/sources/stripe-customers`, {
          method: 'POST',
          headers,
          body: payload,
          signal: AbortSignal.timeout(10_000),
        }),
      );
    };

    const answers = [
      await postStripe('evt_1'),
      await postStripe('evt_2'),
      await postStripe('evt_3'),
    ];

    expect(answers.map((one) => one.status)).toEqual([202, 202, 429]);
    expect(answers[2]?.body.error?.code).toBe('record_backlog');
    expect(await queued()).toBe(2);
  });

  it('answers 503 and queues nothing when the counters’ table cannot be used; events that name no record need none', async () => {
    const { urls, lines, queued } = await relay({
      [ENV.MAX_RECORD_EVENTS_PER_MINUTE]: '5',
      [ENV.DEDUP_WINDOW_SECONDS]: '0',
      [ENV.DEDUP_TABLE_NAME]: 'no-such-table',
    });
    const [url = ''] = urls;

    const refused = await post(url, [company, create('ann@example.com')]);

    expect(refused.status).toBe(503);
    expect(refused.body.error?.code).toBe('queue_unavailable');
    expect(await queued()).toBe(0);
    expect(lines.join('\n')).toMatch(
      /event=dedup_store_failed requestId=\S+ error=ResourceNotFoundException/,
    );
    expect((await post(url, [company, company])).status).toBe(202);
    expect(await queued()).toBe(2);
  });

  it('bounds nothing with MAX_RECORD_EVENTS_PER_MINUTE=0, and writes no counter', async () => {
    const { urls, queued, items } = await relay({ [ENV.MAX_RECORD_EVENTS_PER_MINUTE]: '0' });

    for (let n = 0; n < 3; n++) {
      const answered = await post(urls[0] ?? '', Array(4).fill(edit('ann@example.com')));
      expect(answered.status).toBe(202);
    }

    expect(await queued()).toBe(12);
    expect((await items()).filter((item) => item.id?.S?.startsWith('record-rate#'))).toEqual([]);
  });
});
