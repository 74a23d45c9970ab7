/**
 * Contract §6 on the real edges: `POST /sources/{name}` through the real ingest handler, the
 * SQS adapters on fauxqs's FIFO queues and the request ledger on dynalite. A provider's retry of
 * a webhook takes effect once; a mapping failure is a dead letter the `dead-letters` command
 * reads like any other, kept once.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SqsEventQueue } from '../../functions/adapters/sqs-event-queue.ts';
import { SqsSourceDeadLetters } from '../../functions/adapters/sqs-source-dead-letters.ts';
import type { RequestLedger } from '../../functions/core/ports.ts';
import { listDeadLetters } from '../../infra/cli/dead-letters.ts';
import { createQueuePair } from '../../infra/local/queue-pair.ts';
import { type LocalDynamoDb, newLedger, startLocalDynamoDb } from '../support/dedup.ts';
import { NOW, NOW_SECONDS } from '../support/ingest.ts';
import {
  type LocalSqs,
  queueCounts,
  receiveUntil,
  startLocalSqs,
  uniqueQueueName,
} from '../support/local-sqs.ts';
import { recorder } from '../support/observe.ts';
import {
  STRIPE_SECRET,
  sourceEvent,
  sourcesHandler,
  stripeEvent,
  stripeHeaders,
  stripeSource,
} from '../support/sources.ts';

let localSqs: LocalSqs;
let db: LocalDynamoDb;

beforeAll(async () => {
  [localSqs, db] = await Promise.all([startLocalSqs(), startLocalDynamoDb()]);
});

afterAll(async () => {
  await Promise.all([localSqs.stop(), db.close()]);
});

const STRIPE = 'stripe-customers';

/** Fresh FIFO queues on fauxqs, a fresh ledger on dynalite, and the handler over them. */
async function setUp(
  sources: Record<string, unknown>,
  options: { ledger?: boolean; deadLetterQueueUrl?: string } = {},
) {
  const pair = await createQueuePair(localSqs.sqs, {
    name: uniqueQueueName('sources'),
    maxReceiveCount: 5,
    visibilityTimeoutSeconds: 30,
  });
  const ledger: RequestLedger | undefined =
    options.ledger === false ? undefined : (await newLedger(db)).ledger;
  const log = recorder();
  let now = NOW;
  const handle = sourcesHandler({
    document: { sources },
    queue: new SqsEventQueue(localSqs.sqs, pair.queueUrl),
    deadLetters: new SqsSourceDeadLetters(
      localSqs.sqs,
      options.deadLetterQueueUrl ?? pair.deadLetterQueueUrl,
    ),
    logger: log.logger,
    clock: { now: () => now },
    ...(ledger ? { ledger } : {}),
  });
  /** Posts the payload as Stripe sends it `laterSeconds` after the first try: signed anew. */
  const postStripe = (payload: string, laterSeconds = 0) => {
    now = NOW + laterSeconds * 1000;
    const headers = stripeHeaders(payload, { timestamp: NOW_SECONDS + laterSeconds });
    return handle(sourceEvent(STRIPE, payload, headers));
  };
  return { pair, log, postStripe };
}

const invalidEmail = stripeSource({
  map: "{ 'entity': 'contacts', 'action': 'create', 'data': { 'email': data.object.name } }",
});

describe('a source on the real queues and ledger', () => {
  it('queues a webhook once however often Stripe retries it, and refuses its key with another body', async () => {
    const { pair, postStripe } = await setUp({ [STRIPE]: stripeSource() });
    const payload = stripeEvent('evt_20', 'customer.created', 'ann@example.com');

    const first = await postStripe(payload);
    const retried = await postStripe(payload, 60);
    const reused = await postStripe(
      stripeEvent('evt_20', 'customer.created', 'other@example.com'),
      120,
    );

    expect(first.body).toEqual({ accepted: 1, eventIds: [`${STRIPE}:evt_20:0`] });
    expect(retried.raw).toBe(first.raw);
    expect(reused).toMatchObject({
      status: 422,
      body: { error: { code: 'idempotency_key_reused' } },
    });
    const [message] = await receiveUntil(localSqs.sqs, pair.queueUrl, 1, { timeoutMs: 3_000 });
    expect(JSON.parse(message?.Body ?? '{}')).toMatchObject({
      eventId: `${STRIPE}:evt_20:0`,
      sender: `source:${STRIPE}`,
      data: { email: 'ann@example.com' },
    });
    expect(await queueCounts(localSqs.sqs, pair.queueUrl)).toEqual({ visible: 0, inFlight: 1 });
  });

  it('keeps a mapping failure once, as a dead letter the dead-letters command lists like any other', async () => {
    const { pair, postStripe, log } = await setUp({ [STRIPE]: invalidEmail });
    const payload = stripeEvent('evt_21', 'customer.created', 'bob@example.com');

    const first = await postStripe(payload);
    const retried = await postStripe(payload, 30);
    const listed = await listDeadLetters(
      localSqs.sqs,
      pair.deadLetterQueueUrl,
      { limit: 10 },
      { showData: false, now: Date.now, hideSeconds: 5 },
    );

    expect(first.body).toEqual({ accepted: 0, eventIds: [], deadLettered: `${STRIPE}:evt_21` });
    expect(retried.raw).toBe(first.raw);
    expect(listed).toMatchObject({ count: 1, byReason: { mapping_failed: 1 }, complete: true });
    expect(listed.items).toEqual([
      {
        eventId: `${STRIPE}:evt_21`,
        entity: null,
        action: null,
        reason: 'mapping_failed',
        // The source's name, where the listing would otherwise show no entity or action.
        source: STRIPE,
        status: null,
        detail: expect.stringMatching(
          /^map: yields an event the ingest refuses: .*\(at \/0\/data\/email\)$/,
        ),
        firstReceivedAt: new Date(NOW).toISOString(),
        deadLetteredAt: expect.any(String),
      },
    ]);
    const [letter] = await receiveUntil(localSqs.sqs, pair.deadLetterQueueUrl, 1, {
      timeoutMs: 3_000,
    });
    const attributes = Object.fromEntries(
      Object.entries(letter?.MessageAttributes ?? {}).map(([name, value]) => [
        name,
        value.StringValue,
      ]),
    );
    expect(attributes).toEqual({
      'relay.reason': 'mapping_failed',
      'relay.detail': listed.items[0]?.detail,
      'relay.eventId': `${STRIPE}:evt_21`,
      'relay.firstReceivedAt': new Date(NOW).toISOString(),
      'relay.source': STRIPE,
    });
    expect(JSON.parse(letter?.Body ?? '{}')).toMatchObject({
      v: 1,
      source: STRIPE,
      body: JSON.parse(payload),
      headers: { 'content-type': 'application/json; charset=utf-8' },
    });
    const kept = `${letter?.Body}${JSON.stringify(attributes)}${log.text()}`;
    expect(kept).not.toContain(STRIPE_SECRET);
    expect(kept).not.toContain('stripe-signature');
    expect(kept).not.toMatch(/v1=[0-9a-f]{64}/);
  });

  it('keeps a retried failure once without de-duplication too: the letter’s deduplication id is its id', async () => {
    const { pair, postStripe } = await setUp({ [STRIPE]: invalidEmail }, { ledger: false });
    const payload = stripeEvent('evt_22', 'customer.created', 'cy@example.com');

    const answers = [await postStripe(payload), await postStripe(payload, 45)];

    expect(answers.map((answer) => answer.body.deadLettered)).toEqual([
      `${STRIPE}:evt_22`,
      `${STRIPE}:evt_22`,
    ]);
    const letters = await receiveUntil(localSqs.sqs, pair.deadLetterQueueUrl, 2, {
      timeoutMs: 1_500,
    });
    expect(letters).toHaveLength(1);
  });

  it('answers 503 when the dead-letter queue cannot take the letter, logging why without the payload', async () => {
    const { pair, postStripe, log } = await setUp(
      { [STRIPE]: invalidEmail },
      { deadLetterQueueUrl: `${localSqs.endpoint}/000000000000/missing-dlq.fifo` },
    );
    const payload = stripeEvent('evt_23', 'customer.created', 'dee@example.com');

    const answer = await postStripe(payload);
    // Nothing was remembered: the retry is handled anew.
    const again = await postStripe(payload, 10);

    expect(answer).toMatchObject({ status: 503, body: { error: { code: 'queue_unavailable' } } });
    expect(again.status).toBe(503);
    const [line] = log.events('queue_unavailable');
    expect(line?.fields).toMatchObject({ source: STRIPE, error: expect.any(String) });
    expect(log.text()).not.toContain('dee@example.com');
    expect(await queueCounts(localSqs.sqs, pair.queueUrl)).toEqual({ visible: 0, inFlight: 0 });
  });
});
