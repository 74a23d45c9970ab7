/**
 * Contract §1, Idempotency, through the real ingest handler, the real DynamoDB ledger on dynalite
 * and the real SQS adapter on fauxqs: a retried or replayed request takes effect once.
 */
import { CreateQueueCommand } from '@aws-sdk/client-sqs';
import { Webhook as SvixWebhook } from 'svix';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { DynamoDbRequestLedger } from '../../functions/adapters/dynamodb-request-ledger.ts';
import { SqsEventQueue } from '../../functions/adapters/sqs-event-queue.ts';
import { QueueUnavailableError } from '../../functions/core/errors.ts';
import type { EventQueue } from '../../functions/core/queue-ports.ts';
import { dynamoDbClient } from '../../infra/local/dynamodb-local.ts';
import { type LocalDynamoDb, newLedger, startLocalDynamoDb } from '../support/dedup.ts';
import {
  API_KEY,
  contact,
  httpApiEvent,
  ingestHandler,
  NOW,
  NOW_SECONDS,
  OTHER_SECRET,
  signedHeaders,
  WEBHOOK_SECRET,
} from '../support/ingest.ts';
import {
  type LocalSqs,
  queueCounts,
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

/** A fresh events queue on fauxqs and a fresh ledger table on dynalite. */
async function setUp(options: { windowSeconds?: number } = {}) {
  const { QueueUrl = '' } = await localSqs.sqs.send(
    new CreateQueueCommand({ QueueName: uniqueQueueName('dedup') }),
  );
  const { ledger } = await newLedger(db, options);
  const queue = new SqsEventQueue(localSqs.sqs, QueueUrl);
  const queued = async () => (await queueCounts(localSqs.sqs, QueueUrl)).visible;
  return { ledger, queue, queued };
}

const body = JSON.stringify([
  contact(1),
  { entity: 'companies', action: 'create', data: { companyname: 'Acme' } },
]);

describe('idempotent ingest', () => {
  it('answers a duplicate re-signed later, with the other secret of a rotation, with the first answer and queues nothing again', async () => {
    const { ledger, queue, queued } = await setUp();
    const handle = ingestHandler(queue, { ledger, secrets: [WEBHOOK_SECRET, OTHER_SECRET] });

    const first = await handle(
      httpApiEvent({ body, headers: signedHeaders(body, { id: 'msg_retry' }) }),
    );
    const retry = await handle(
      httpApiEvent({
        body,
        headers: signedHeaders(body, {
          id: 'msg_retry',
          timestamp: NOW_SECONDS + 120,
          secret: OTHER_SECRET,
        }),
      }),
    );

    expect(first).toEqual({
      status: 202,
      body: { accepted: 2, eventIds: ['msg_retry:0', 'msg_retry:1'] },
    });
    expect(retry).toEqual(first);
    expect(await queued()).toBe(2);
  });

  it('answers a byte-identical replay byte for byte, generated event ids included', async () => {
    const { ledger, queue, queued } = await setUp();
    const raw: string[] = [];
    const handle = ingestHandler(queue, { ledger, rawBodies: raw });
    const headers = {
      'content-type': 'application/json',
      authorization: `Bearer ${API_KEY}`,
      'idempotency-key': 'order-7781',
    };
    const request = httpApiEvent({ body, headers });

    const first = await handle(request);
    const replay = await handle(request);

    expect(first.status).toBe(202);
    expect(first.body.eventIds).toEqual(['generated-1', 'generated-2']);
    expect(replay.status).toBe(202);
    expect(raw[1]).toBe(raw[0]);
    expect(await queued()).toBe(2);
  });

  it('refuses the same id with another body: 422 idempotency_key_reused, nothing queued', async () => {
    const { ledger, queue, queued } = await setUp();
    const handle = ingestHandler(queue, { ledger });
    const other = JSON.stringify(contact(2));

    await handle(httpApiEvent({ body, headers: signedHeaders(body, { id: 'msg_same' }) }));
    const reused = await handle(
      httpApiEvent({ body: other, headers: signedHeaders(other, { id: 'msg_same' }) }),
    );

    expect(reused.status).toBe(422);
    expect(reused.body.error?.code).toBe('idempotency_key_reused');
    expect(await queued()).toBe(2);
  });

  it('lets one of concurrent duplicates through (202) and answers the others 409 request_in_progress', async () => {
    const { ledger, queue, queued } = await setUp();
    let release = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const entered: string[] = [];
    // The first request holds its claim while it queues; the duplicates arrive meanwhile.
    const slowQueue: EventQueue = {
      async enqueue(messages) {
        entered.push(messages[0]?.eventId ?? '');
        await gate;
        await queue.enqueue(messages);
      },
    };
    const handle = ingestHandler(slowQueue, { ledger });
    const request = () =>
      handle(httpApiEvent({ body, headers: signedHeaders(body, { id: 'msg_burst' }) }));

    const first = request();
    await vi.waitFor(() => expect(entered).toHaveLength(1), { timeout: 5_000 });
    const duplicates = await Promise.all([request(), request(), request(), request()]);
    release();
    const answers = [await first, ...duplicates];

    expect(answers.map((a) => a.status)).toEqual([202, 409, 409, 409, 409]);
    expect(duplicates[0]?.body.error?.code).toBe('request_in_progress');
    expect(entered).toHaveLength(1);
    expect(await queued()).toBe(2);
    // Once the first is done, a duplicate gets its answer.
    expect(await request()).toEqual(answers[0]);
  });

  it('takes the same id as new once the window has passed', async () => {
    vi.useFakeTimers({ toFake: ['Date'], now: NOW });
    const { ledger, queue, queued } = await setUp({ windowSeconds: 60 });
    const handle = ingestHandler(queue, { ledger, clock: { now: () => Date.now() } });
    const send = () =>
      handle(
        httpApiEvent({
          body,
          headers: signedHeaders(body, {
            id: 'msg_late',
            timestamp: Math.floor(Date.now() / 1000),
          }),
        }),
      );

    await send();
    vi.setSystemTime(NOW + 60_000);
    const inside = await send();
    vi.setSystemTime(NOW + 62_000);
    const after = await send();

    expect([inside.status, after.status]).toEqual([202, 202]);
    expect(await queued()).toBe(4);
  });

  it('frees the claim of an invocation that died before saving its answer, once its time is up', async () => {
    vi.useFakeTimers({ toFake: ['Date'], now: NOW });
    const { ledger, queue, queued } = await setUp();
    // An invocation that queued its events and then died: its claim stays IN_PROGRESS.
    let claimed = () => {};
    const claim = new Promise<void>((resolve) => {
      claimed = resolve;
    });
    const dying: EventQueue = {
      async enqueue(messages) {
        await queue.enqueue(messages);
        claimed();
        await new Promise(() => {}); // never returns, as a killed process never does
      },
    };
    const send = (q: EventQueue) =>
      ingestHandler(q, { ledger, timeoutMs: 3_000, clock: { now: () => Date.now() } })(
        httpApiEvent({
          body,
          headers: signedHeaders(body, {
            id: 'msg_crash',
            timestamp: Math.floor(Date.now() / 1000),
          }),
        }),
      );

    void send(dying);
    await claim;
    const during = await send(queue);
    vi.setSystemTime(NOW + 3_001);
    const after = await send(queue);

    expect(during.status).toBe(409);
    expect(after.status).toBe(202);
    // At least once: the events of the dead invocation were queued, and the retry queued them again.
    expect(await queued()).toBe(4);
  });

  it('keys API-key requests by the key and its Idempotency-Key, apart from signed ids, and does not de-duplicate without one', async () => {
    const { ledger, queue, queued } = await setUp();
    const otherKey = 'relay-second-api-key-987654321';
    const handle = ingestHandler(queue, { ledger, apiKeys: [API_KEY, otherKey] });
    const withKey = (key: string, idempotencyKey?: string) =>
      handle(
        httpApiEvent({
          body,
          headers: {
            'content-type': 'application/json',
            authorization: `Bearer ${key}`,
            ...(idempotencyKey === undefined ? {} : { 'idempotency-key': idempotencyKey }),
          },
        }),
      );

    const first = await withKey(API_KEY, 'msg_shared');
    const again = await withKey(API_KEY, 'msg_shared');
    const otherSender = await withKey(otherKey, 'msg_shared');
    const signed = await handle(
      httpApiEvent({ body, headers: signedHeaders(body, { id: 'msg_shared' }) }),
    );
    const plain1 = await withKey(API_KEY);
    const plain2 = await withKey(API_KEY);

    expect(again).toEqual(first);
    expect(otherSender.body.eventIds).not.toEqual(first.body.eventIds);
    expect(signed.body.eventIds).toEqual(['msg_shared:0', 'msg_shared:1']);
    expect([plain1.status, plain2.status]).toEqual([202, 202]);
    expect(plain2.body.eventIds).not.toEqual(plain1.body.eventIds);
    expect(await queued()).toBe(2 * 5);
  });

  it('answers 503 and queues nothing when the store cannot be reached, and logs why without secrets', async () => {
    const { queue, queued } = await setUp();
    const closed = await startLocalDynamoDb();
    const endpoint = closed.endpoint;
    await closed.close();
    const logger = recordingLogger();
    const ledger = new DynamoDbRequestLedger(dynamoDbClient(endpoint), 'dedup-gone', {
      windowSeconds: 86_400,
      logger,
    });
    const handle = ingestHandler(queue, { ledger });

    const signed = await handle(
      httpApiEvent({ body, headers: signedHeaders(body, { id: 'msg_down' }) }),
    );
    const keyed = await handle(
      httpApiEvent({
        body,
        headers: {
          'content-type': 'application/json',
          authorization: `Bearer ${API_KEY}`,
          'idempotency-key': 'down-1',
        },
      }),
    );

    // Bad input is answered without the store.
    const invalid = JSON.stringify({ entity: 'contacts', action: 'create', data: {} });
    const refused = await handle(
      httpApiEvent({ body: invalid, headers: signedHeaders(invalid, { id: 'msg_down' }) }),
    );
    const unauthenticated = await handle(
      httpApiEvent({ body, headers: { ...signedHeaders(body), 'webhook-signature': 'v1,AAAA' } }),
    );
    expect([refused.status, unauthenticated.status]).toEqual([422, 401]);
    for (const answer of [signed, keyed]) {
      expect(answer.status).toBe(503);
      expect(answer.body.error?.code).toBe('queue_unavailable');
    }
    expect(await queued()).toBe(0);
    expect(logger.lines).toHaveLength(2);
    const line = JSON.parse(logger.lines[0] ?? '{}');
    expect(line).toMatchObject({
      event: 'dedup_store_failed',
      requestId: 'request-42',
      code: 'ECONNREFUSED',
    });
    const logged = logger.lines.join('\n');
    for (const secret of [API_KEY, WEBHOOK_SECRET.slice(6), 'down-1', 'msg_down'])
      expect(logged).not.toContain(secret);
  });

  it('keeps the 202 when only saving the answer fails after queueing, logs it, and answers a retry 409 while the claim holds', async () => {
    const { queue, queued } = await setUp();
    const { tableName } = await newLedger(db);
    const client = dynamoDbClient(db.endpoint);
    // The claim (PutItem) succeeds; saving the answer (UpdateItem) is throttled.
    client.middlewareStack.add(
      (next, context) => async (args) => {
        if (context.commandName === 'UpdateItemCommand') {
          throw Object.assign(new Error('Rate of requests exceeds the allowed throughput.'), {
            name: 'ProvisionedThroughputExceededException',
          });
        }
        return next(args);
      },
      { step: 'initialize' },
    );
    const logger = recordingLogger();
    const ledger = new DynamoDbRequestLedger(client, tableName, { windowSeconds: 86_400, logger });
    const handle = ingestHandler(queue, { ledger });
    const request = () =>
      handle(httpApiEvent({ body, headers: signedHeaders(body, { id: 'msg_save_fails' }) }));

    const first = await request();
    const retry = await request();

    // The events are queued: a 503 ("safe to retry") would make the sender queue them twice.
    expect(first.status).toBe(202);
    expect(await queued()).toBe(2);
    expect(logger.lines.map((l) => JSON.parse(l).event)).toEqual(['dedup_store_failed']);
    expect(retry.status).toBe(409);
    expect(retry.body.error?.code).toBe('request_in_progress');
    expect(await queued()).toBe(2);
    client.destroy();
  });

  it('leaves the id free after a 4xx or a 503, so the corrected or retried request is accepted', async () => {
    const { ledger, queue, queued } = await setUp();
    const handle = ingestHandler(queue, { ledger });
    const bad = JSON.stringify({ entity: 'contacts', action: 'create', data: { email: 'nope' } });
    const good = JSON.stringify(contact(3));
    let failNext = true;
    const flaky: EventQueue = {
      async enqueue(messages) {
        if (failNext) {
          failNext = false;
          throw new QueueUnavailableError('down', { error: 'InternalError' });
        }
        await queue.enqueue(messages);
      },
    };

    const invalid = await handle(
      httpApiEvent({ body: bad, headers: signedHeaders(bad, { id: 'msg_fix' }) }),
    );
    const corrected = await handle(
      httpApiEvent({ body: good, headers: signedHeaders(good, { id: 'msg_fix' }) }),
    );
    const flakyHandle = ingestHandler(flaky, { ledger });
    const unavailable = await flakyHandle(
      httpApiEvent({ body: good, headers: signedHeaders(good, { id: 'msg_flaky' }) }),
    );
    const retried = await flakyHandle(
      httpApiEvent({ body: good, headers: signedHeaders(good, { id: 'msg_flaky' }) }),
    );

    expect([invalid.status, corrected.status]).toEqual([422, 202]);
    expect([unavailable.status, retried.status]).toEqual([503, 202]);
    expect(await queued()).toBe(2);
  });

  it('de-duplicates Svix-signed requests by svix-id', async () => {
    const { ledger, queue, queued } = await setUp();
    const handle = ingestHandler(queue, { ledger });
    const svix = new SvixWebhook(WEBHOOK_SECRET);
    const svixHeaders = (timestamp: number) => ({
      'content-type': 'application/json',
      'svix-id': 'msg_svix',
      'svix-timestamp': String(timestamp),
      'svix-signature': svix.sign('msg_svix', new Date(timestamp * 1000), body),
    });

    const first = await handle(httpApiEvent({ body, headers: svixHeaders(NOW_SECONDS) }));
    const retry = await handle(httpApiEvent({ body, headers: svixHeaders(NOW_SECONDS + 30) }));

    expect(first.body.eventIds).toEqual(['msg_svix:0', 'msg_svix:1']);
    expect(retry).toEqual(first);
    expect(await queued()).toBe(2);
  });
});
