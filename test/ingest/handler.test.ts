import { Logger } from '@aws-lambda-powertools/logger';
import { CreateQueueCommand } from '@aws-sdk/client-sqs';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { SqsEventQueue } from '../../functions/adapters/sqs-event-queue.ts';
import { queuedEventSchema } from '../../functions/core/events.ts';

import {
  API_KEY,
  API_KEY_SENDER,
  contact,
  httpApiEvent,
  INGEST_LIMITS,
  ingestHandler,
  NOW,
  OTHER_SECRET,
  OTHER_SENDER,
  recordingQueue,
  signedHeaders,
  WEBHOOK_SECRET,
  WEBHOOK_SENDER,
} from '../support/ingest.ts';
import {
  type LocalSqs,
  receiveUntil,
  startLocalSqs,
  uniqueQueueName,
} from '../support/local-sqs.ts';

let localSqs: LocalSqs;

beforeAll(async () => {
  localSqs = await startLocalSqs();
});

afterAll(async () => {
  await localSqs.stop();
});

afterEach(() => {
  vi.restoreAllMocks();
});

async function newQueue(): Promise<string> {
  const { QueueUrl } = await localSqs.sqs.send(
    new CreateQueueCommand({ QueueName: uniqueQueueName('ingest') }),
  );
  return QueueUrl ?? '';
}

describe('ingest over fauxqs', () => {
  it('queues each event of a signed request as a version 1 envelope with a stable event id', async () => {
    const queueUrl = await newQueue();
    const body = JSON.stringify([
      contact(1),
      { entity: 'contacts', action: 'edit', id: 5, data: { city: 'Oslo' } },
      { entity: 'companies', action: 'delete', id: 9, eventId: 'mine-1' },
    ]);

    const response = await ingestHandler(new SqsEventQueue(localSqs.sqs, queueUrl))(
      httpApiEvent({ body, headers: signedHeaders(body, { id: 'msg_abc' }) }),
    );

    expect(response).toEqual({
      status: 202,
      body: { accepted: 3, eventIds: ['msg_abc:0', 'msg_abc:1', 'mine-1'] },
    });
    const messages = await receiveUntil(localSqs.sqs, queueUrl, 3, { timeoutMs: 3_000 });
    const queued = messages
      .map((m) => queuedEventSchema().parse(JSON.parse(m.Body ?? '')))
      .sort((a, b) => a.eventId.localeCompare(b.eventId));
    expect(queued).toEqual([
      {
        v: 1,
        eventId: 'mine-1',
        receivedAt: new Date(NOW).toISOString(),
        sender: WEBHOOK_SENDER,
        entity: 'companies',
        action: 'delete',
        id: 9,
      },
      {
        v: 1,
        eventId: 'msg_abc:0',
        receivedAt: new Date(NOW).toISOString(),
        sender: WEBHOOK_SENDER,
        ...contact(1),
      },
      {
        v: 1,
        eventId: 'msg_abc:1',
        receivedAt: new Date(NOW).toISOString(),
        sender: WEBHOOK_SENDER,
        entity: 'contacts',
        action: 'edit',
        id: 5,
        data: { city: 'Oslo' },
      },
    ]);
  });

  it('queues 500 events from an API-key sender in batches of 10, with generated ids', async () => {
    const queueUrl = await newQueue();
    const body = JSON.stringify(Array.from({ length: 500 }, (_, i) => contact(i)));

    const response = await ingestHandler(new SqsEventQueue(localSqs.sqs, queueUrl))(
      httpApiEvent({
        body,
        headers: {
          'content-type': 'application/json; charset=UTF-8',
          authorization: `Bearer ${API_KEY}`,
        },
      }),
    );

    expect(response.status).toBe(202);
    expect(response.body.accepted).toBe(500);
    expect(new Set(response.body.eventIds).size).toBe(500);
    const messages = await receiveUntil(localSqs.sqs, queueUrl, 500, { timeoutMs: 10_000 });
    expect(messages).toHaveLength(500);
    expect(JSON.parse(messages[0]?.Body ?? '').sender).toBe(API_KEY_SENDER);
  });

  it('accepts either secret while both are configured for a rotation', async () => {
    const queue = recordingQueue();
    const handle = ingestHandler(queue, { secrets: [WEBHOOK_SECRET, OTHER_SECRET] });
    const body = JSON.stringify(contact());

    const old = await handle(
      httpApiEvent({ body, headers: signedHeaders(body, { secret: WEBHOOK_SECRET }) }),
    );
    const fresh = await handle(
      httpApiEvent({ body, headers: signedHeaders(body, { secret: OTHER_SECRET }) }),
    );
    const retired = await ingestHandler(recordingQueue(), { secrets: [OTHER_SECRET] })(
      httpApiEvent({ body, headers: signedHeaders(body, { secret: WEBHOOK_SECRET }) }),
    );

    expect([old.status, fresh.status, retired.status]).toEqual([202, 202, 401]);
    expect(queue.messages.map((m) => JSON.parse(m.body).sender)).toEqual([
      WEBHOOK_SENDER,
      OTHER_SENDER,
    ]);
  });

  it('reads a base64-encoded body as the bytes that were signed', async () => {
    const queue = recordingQueue();
    const bytes = new TextEncoder().encode(
      JSON.stringify({
        entity: 'contacts',
        action: 'create',
        data: { email: 'b@example.com', name: 'Zoë' },
      }),
    );

    const response = await ingestHandler(queue)(
      httpApiEvent({ body: bytes, headers: signedHeaders(bytes) }),
    );

    expect(response.status).toBe(202);
    expect(JSON.parse(queue.messages[0]?.body ?? '').data.name).toBe('Zoë');
  });

  it('answers an unexpected error with 500, a generic message and the request id, and logs it with that id', async () => {
    const logger = new Logger({ serviceName: 'ingest-test' });
    const lines: string[] = [];
    vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
      lines.push(String(chunk));
      return true;
    });
    const body = JSON.stringify(contact());
    const broken = recordingQueue(
      () => new TypeError('Cannot read properties of undefined (reading whsec_secret)'),
    );

    const response = await ingestHandler(broken, { logger })(
      httpApiEvent({ body, headers: signedHeaders(body) }),
    );

    expect(response).toEqual({
      status: 500,
      body: {
        error: {
          code: 'internal_error',
          message: 'An unexpected error occurred (request request-42).',
        },
      },
    });
    expect(lines.join('')).toContain('"requestId":"request-42"');
  });

  it('queues text SQS would refuse as JSON.stringify writes it (U+FFFE, U+FFFF), escaped to the same value', async () => {
    const queueUrl = await newQueue();
    const body = JSON.stringify({
      entity: 'contacts',
      action: 'create',
      data: { email: 'odd@example.com', note: 'a\uffffb\ufffe' },
    });

    const response = await ingestHandler(new SqsEventQueue(localSqs.sqs, queueUrl))(
      httpApiEvent({ body, headers: signedHeaders(body) }),
    );

    expect(response.status).toBe(202);
    const [message] = await receiveUntil(localSqs.sqs, queueUrl, 1, { timeoutMs: 3_000 });
    expect(JSON.parse(message?.Body ?? '').data.note).toBe('a\uffffb\ufffe');
  });

  it('refuses an eventId holding a character some store of it refuses or alters: 422 at /eventId', async () => {
    const queue = recordingQueue();
    const ids = ['a\u0001b', 'tab\there', 'c1\u0085', 'lone\ud800', 'lone\udc00end', 'non\uffff'];
    const body = JSON.stringify([
      ...ids.map((eventId, i) => ({ ...contact(i), eventId })),
      { ...contact(9), eventId: `ok ${'😀'.repeat(60)} #1042/é` },
    ]);

    const response = await ingestHandler(queue)(
      httpApiEvent({ body, headers: signedHeaders(body) }),
    );

    expect(response.status).toBe(422);
    expect(response.body.error?.code).toBe('invalid_event');
    expect(response.body.error?.details).toEqual(
      ids.map((_, index) => ({
        index,
        path: '/eventId',
        message: 'must not hold a control character, an unpaired surrogate, U+FFFE or U+FFFF',
      })),
    );
    expect(queue.messages).toEqual([]);
  });

  it('refuses events whose derived id would not fit in 128 characters, before queueing', async () => {
    const queue = recordingQueue();
    const body = JSON.stringify(Array.from({ length: 1001 }, (_, i) => contact(i)));
    const id = `msg_${'x'.repeat(120)}`;

    const response = await ingestHandler(queue, {
      limits: { ...INGEST_LIMITS, maxEvents: 2000 },
    })(httpApiEvent({ body, headers: signedHeaders(body, { id }) }));

    expect(response.status).toBe(422);
    expect(response.body.error?.details?.[0]).toMatchObject({ index: 1000, path: '/eventId' });
    expect(queue.messages).toEqual([]);
  });
});
