/**
 * Contract §1.6 through the real ingest handler behind the local HTTP front, on dynalite: the
 * ingest writes each event's `queued` beside its sends, and `GET /events/{eventId}` and `GET
 * /events?ids=` answer what became of events, authenticated exactly as `POST /events` is, for
 * the sender that sent them only; a source's ignored or unmappable payload is kept under its id.
 * An outcome store that fails or hangs never costs a 202.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { DynamoDbOutcomeStore } from '../../functions/adapters/dynamodb-outcome-store.ts';
import { credentialIdOf, parseCredentials } from '../../functions/core/ingest/webhook-auth.ts';
import type { OutcomeRecord, OutcomeStore } from '../../functions/core/ports.ts';
import { compileSources, parseSourcesDocument } from '../../functions/core/sources/sources.ts';
import { createIngestHandler } from '../../functions/ingest/handler.ts';
import { dynamoDbClient } from '../../infra/local/dynamodb-local.ts';
import { startHttpFront } from '../../infra/local/http-front.ts';
import { type LocalDynamoDb, startLocalDynamoDb } from '../support/dedup.ts';
import {
  API_KEY,
  INGEST_LIMITS,
  NOW,
  OTHER_SECRET,
  recordingQueue,
  signedHeaders,
  WEBHOOK_SECRET,
} from '../support/ingest.ts';
import { recorder } from '../support/observe.ts';
import {
  recordingDeadLetters,
  stripeEvent,
  stripeHeaders,
  stripeSource,
} from '../support/sources.ts';

const STRIPE = 'stripe-customers';
const clock = { now: () => NOW };
let db: LocalDynamoDb;

beforeAll(async () => {
  db = await startLocalDynamoDb();
});
afterAll(async () => {
  await db.close();
});

async function newStore(): Promise<DynamoDbOutcomeStore> {
  const tableName = `outcomes-${randomUUID().slice(0, 8)}`;
  await db.createOutcomeTable(tableName);
  return new DynamoDbOutcomeStore(db.client, tableName, { retentionSeconds: 3600, clock });
}

/** The real ingest handler behind the HTTP front, with two webhook secrets, an API key, a source. */
async function front(outcomes: OutcomeStore | undefined) {
  const queue = recordingQueue();
  const log = recorder();
  const credentials = parseCredentials({
    webhookSecrets: [WEBHOOK_SECRET, OTHER_SECRET],
    apiKeys: [API_KEY],
  });
  const sources = compileSources(parseSourcesDocument({ sources: { [STRIPE]: stripeSource() } }));
  const handler = createIngestHandler({
    credentials: async () => credentials,
    queue,
    clock,
    newId: () => randomUUID(),
    limits: INGEST_LIMITS,
    outcomes,
    sources,
    sourceDeadLetters: recordingDeadLetters(),
    logger: log.logger,
  });
  const http = await startHttpFront({ handler });
  onTestFinished(() => http.close());
  const post = async (body: unknown, headers: Record<string, string>) => {
    const response = await fetch(`${http.url}/events`, {
      method: 'POST',
      headers,
      body: JSON.stringify(body),
    });
    return { status: response.status, body: await response.json() };
  };
  /** POST /events signed with `secret` (the first by default). */
  const postSigned = (body: unknown, secret = WEBHOOK_SECRET, id = `msg_${randomUUID()}`) =>
    post(body, signedHeaders(JSON.stringify(body), { id, secret }));
  /** GET `path` signed over the empty body with `secret`, or with the API key. */
  const get = async (path: string, as: { secret?: string; apiKey?: string } = {}) => {
    const headers =
      as.apiKey === undefined
        ? signedHeaders('', { id: `get_${randomUUID()}`, secret: as.secret ?? WEBHOOK_SECRET })
        : { authorization: `Bearer ${as.apiKey}` };
    const response = await fetch(`${http.url}${path}`, { headers });
    return { status: response.status, text: await response.text() };
  };
  return { http, queue, log, post, postSigned, get };
}

const contact = (eventId: string, email: string) => ({
  eventId,
  entity: 'contacts',
  action: 'create',
  data: { email, firstname: 'Ann' },
});

describe('GET /events/{eventId}', () => {
  it('answers the queued outcome of an event to its sender, in the contract’s shape, with no value of the event', async () => {
    const relay = await front(await newStore());

    const posted = await relay.postSigned([contact('order-1', 'ann@example.com')]);
    expect(posted).toEqual({ status: 202, body: { accepted: 1, eventIds: ['order-1'] } });

    const answer = await relay.get('/events/order-1');
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.text)).toEqual({
      eventId: 'order-1',
      entity: 'contacts',
      action: 'create',
      status: 'queued',
      acceptedAt: new Date(NOW).toISOString(),
      updatedAt: new Date(NOW).toISOString(),
      attempts: 0,
    });
    expect(answer.text).not.toContain('example.com');
    expect(answer.text).not.toContain('Ann');
  });

  it("answers another sender's event as it answers an unknown one: 404 unknown_event", async () => {
    const relay = await front(await newStore());
    await relay.postSigned([contact('order-1', 'ann@example.com')]);

    const byKey = await relay.get('/events/order-1', { apiKey: API_KEY });
    const byOtherSecret = await relay.get('/events/order-1', { secret: OTHER_SECRET });
    const unknown = await relay.get('/events/order-2');

    expect(byKey.status).toBe(404);
    expect(JSON.parse(byKey.text).error.code).toBe('unknown_event');
    expect(byOtherSecret.text).toBe(byKey.text);
    expect(unknown.text).toBe(byKey.text);
  });

  it('finds an API-key sender’s events with the same key, and refuses a request with no valid credential', async () => {
    const relay = await front(await newStore());
    const headers = { 'content-type': 'application/json', authorization: `Bearer ${API_KEY}` };
    await relay.post([contact('k-1', 'kim@example.com')], headers);

    expect((await relay.get('/events/k-1', { apiKey: API_KEY })).status).toBe(200);
    const refused = await relay.get('/events/k-1', { apiKey: 'not-a-key-of-this-relay' });
    expect(refused.status).toBe(401);
    expect(JSON.parse(refused.text).error.code).toBe('unauthorized');
    // A signature over another body than the empty one the GET has.
    const response = await fetch(`${relay.http.url}/events/k-1`, {
      headers: signedHeaders('{}', { id: 'get-1' }),
    });
    expect(response.status).toBe(401);
    expect(relay.log.events('unauthorized')).toHaveLength(2);
  });

  it('never lets a queued written after the delivered hide it', async () => {
    const store = await newStore();
    const relay = await front(store);
    // The batch function delivered the event and wrote so before the ingest's queued landed.
    const delivered: OutcomeRecord = {
      eventId: 'order-1',
      // The sender label names the credential's id (issue 32), not its place in the list.
      sender: `webhook#${credentialIdOf('webhook_secret', WEBHOOK_SECRET)}`,
      slot: 'state',
      status: 'delivered',
      entity: 'contacts',
      action: 'create',
      acceptedAt: new Date(NOW).toISOString(),
      updatedAt: new Date(NOW + 200).toISOString(),
      attempts: 1,
      mauticIds: [17],
      httpStatus: 201,
      deliveredAt: new Date(NOW + 150).toISOString(),
      callId: 'c-1',
    };
    await store.write([delivered], Date.now() + 5_000);

    await relay.postSigned([contact('order-1', 'ann@example.com')]);

    const answer = JSON.parse((await relay.get('/events/order-1')).text);
    expect(answer).toMatchObject({ status: 'delivered', mauticIds: [17], callId: 'c-1' });
  });
});

describe('GET /events?ids=', () => {
  it("answers the sender's events among the ids, in the order asked, leaving out the others", async () => {
    const relay = await front(await newStore());
    await relay.postSigned([contact('a', 'a@example.com'), contact('b', 'b@example.com')]);
    await relay.postSigned([contact('c', 'c@example.com')], OTHER_SECRET);

    const answer = await relay.get('/events?ids=b,unknown,c,a,b');

    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.text).events.map((e: { eventId: string }) => e.eventId)).toEqual([
      'b',
      'a',
    ]);
  });

  it('refuses no ids, or more than 100, with 400 invalid_ids', async () => {
    const relay = await front(await newStore());
    const many = Array.from({ length: 101 }, (_, i) => `e${i}`).join(',');

    for (const path of ['/events', '/events?ids=', '/events?ids=,', `/events?ids=${many}`]) {
      const answer = await relay.get(path);
      expect(answer.status, path).toBe(400);
      expect(JSON.parse(answer.text).error.code).toBe('invalid_ids');
    }
    const hundred = Array.from({ length: 100 }, (_, i) => `e${i}`).join(',');
    expect((await relay.get(`/events?ids=${hundred}`)).status).toBe(200);
  });
});

describe('outcomes off, or a store in trouble', () => {
  it('answers every lookup 404 outcomes_disabled when the relay keeps no outcomes', async () => {
    const relay = await front(undefined);
    expect((await relay.postSigned([contact('a', 'a@example.com')])).status).toBe(202);

    for (const path of ['/events/a', '/events?ids=a']) {
      const answer = await relay.get(path);
      expect(answer.status).toBe(404);
      expect(JSON.parse(answer.text).error.code).toBe('outcomes_disabled');
    }
    // Still authenticated first.
    expect((await relay.get('/events/a', { apiKey: 'nope-nope-nope-nope' })).status).toBe(401);
  });

  it('answers 202 when the store is down, logs it, and answers a lookup 503 outcomes_unavailable', async () => {
    const down = dynamoDbClient('http://127.0.0.1:9');
    onTestFinished(() => down.destroy());
    const relay = await front(
      new DynamoDbOutcomeStore(down, 'outcomes', { retentionSeconds: 60, clock }),
    );

    const posted = await relay.postSigned([contact('a', 'a@example.com')]);
    const answer = await relay.get('/events/a');

    expect(posted.status).toBe(202);
    expect(relay.queue.messages).toHaveLength(1);
    expect(relay.log.events('outcome_write_failed')).toHaveLength(1);
    expect(answer.status).toBe(503);
    expect(JSON.parse(answer.text).error.code).toBe('outcomes_unavailable');
    expect(relay.log.events('outcome_read_failed')).toHaveLength(1);
  });

  it('answers 202 within the budget when the store does not answer at all', async () => {
    const hanging: OutcomeStore = { write: () => new Promise(() => {}), read: async () => [] };
    const relay = await front(hanging);

    const started = Date.now();
    const posted = await relay.postSigned([contact('a', 'a@example.com')]);

    expect(posted.status).toBe(202);
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(relay.log.events('outcome_write_failed')).toHaveLength(1);
  });
});

describe("a source's payloads", () => {
  it('keeps an ignored payload under <source>:<key>, and an unmappable one under its dead letter’s id', async () => {
    const store = await newStore();
    const relay = await front(store);
    const post = async (payload: string) =>
      fetch(`${relay.http.url}/sources/${STRIPE}`, {
        method: 'POST',
        headers: stripeHeaders(payload),
        body: payload,
      });

    const ignored = await post(stripeEvent('evt_9', 'invoice.paid', 'ann@example.com'));
    // A customer without an email: the mapping yields an event the ingest refuses.
    const unmappable = await post(stripeEvent('evt_10', 'customer.created', ''));

    expect(await ignored.text()).toBe('{"accepted":0,"eventIds":[],"ignored":true}');
    expect(await unmappable.json()).toMatchObject({ deadLettered: `${STRIPE}:evt_10` });
    const sender = `source:${STRIPE}`;
    const records = await store.read([
      { eventId: `${STRIPE}:evt_9`, sender },
      { eventId: `${STRIPE}:evt_10`, sender },
    ]);
    expect(
      records
        .map(({ eventId, status, entity, reason }) => [eventId, status, entity, reason])
        .sort(),
    ).toEqual([
      [`${STRIPE}:evt_10`, 'dead_lettered', null, 'mapping_failed'],
      [`${STRIPE}:evt_9`, 'ignored', null, undefined],
    ]);
    expect(JSON.stringify(records)).not.toContain('example.com');
    // A source's events are not any /events sender's.
    expect((await relay.get(`/events/${STRIPE}:evt_9`)).status).toBe(404);
  });
});
