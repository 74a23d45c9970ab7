/**
 * Small fixes through the real handler: Svix's header names, the Bearer scheme in any
 * case, the ENTITIES allowlist, and why a 503 queue_unavailable happened, in the log.
 */

import { Logger } from '@aws-lambda-powertools/logger';
import { SendMessageBatchCommand, SQSClient } from '@aws-sdk/client-sqs';
import { mockClient } from 'aws-sdk-client-mock';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { Webhook as SvixWebhook } from 'svix';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { SqsEventQueue } from '../../functions/adapters/sqs-event-queue.ts';

import {
  API_KEY,
  contact,
  httpApiEvent,
  INGEST_LIMITS,
  ingestHandler,
  NOW_SECONDS,
  recordingQueue,
  WEBHOOK_SECRET,
} from '../support/ingest.ts';

const body = JSON.stringify(contact(1));
const at = new Date(NOW_SECONDS * 1000);

describe('senders', () => {
  it('accepts requests signed by the svix and standardwebhooks packages, under svix-* and webhook-* names', async () => {
    const queue = recordingQueue();
    const handle = ingestHandler(queue);
    const svixSignature = new SvixWebhook(WEBHOOK_SECRET).sign('msg_a', at, body);
    const standardSignature = new StandardWebhook(WEBHOOK_SECRET).sign('msg_b', at, body);
    const json = { 'content-type': 'application/json' };

    const answers = await Promise.all([
      handle(
        httpApiEvent({
          body,
          headers: {
            ...json,
            'svix-id': 'msg_a',
            'svix-timestamp': String(NOW_SECONDS),
            'svix-signature': svixSignature,
          },
        }),
      ),
      handle(
        httpApiEvent({
          body,
          headers: {
            ...json,
            'webhook-id': 'msg_b',
            'webhook-timestamp': String(NOW_SECONDS),
            'webhook-signature': standardSignature,
          },
        }),
      ),
      // Headers are taken from one family only, never mixed.
      handle(
        httpApiEvent({
          body,
          headers: {
            ...json,
            'webhook-id': 'msg_a',
            'svix-timestamp': String(NOW_SECONDS),
            'svix-signature': svixSignature,
          },
        }),
      ),
      // A Svix signature over another id does not verify.
      handle(
        httpApiEvent({
          body,
          headers: {
            ...json,
            'svix-id': 'msg_c',
            'svix-timestamp': String(NOW_SECONDS),
            'svix-signature': svixSignature,
          },
        }),
      ),
    ]);

    expect(answers.map((a) => a.status)).toEqual([202, 202, 401, 401]);
    expect(answers[0]?.body.eventIds).toEqual(['msg_a:0']);
    expect(queue.messages).toHaveLength(2);
  });

  it('takes the Bearer scheme in any case', async () => {
    const queue = recordingQueue();
    const handle = ingestHandler(queue);
    const send = (authorization: string) =>
      handle(
        httpApiEvent({ body, headers: { 'content-type': 'application/json', authorization } }),
      );

    const answers = [
      await send(`bearer ${API_KEY}`),
      await send(`BEARER ${API_KEY}`),
      await send(`Bearer ${API_KEY}x`),
    ];

    expect(answers.map((a) => a.status)).toEqual([202, 202, 401]);
  });

  it('refuses an event for an entity outside ENTITIES with 422 at /entity, and queues nothing of the request', async () => {
    const queue = recordingQueue();
    const handle = ingestHandler(queue, {
      limits: { ...INGEST_LIMITS, entities: new Set(['contacts', 'companies']) },
    });
    const mixed = JSON.stringify([
      contact(1),
      { entity: 'segments', action: 'delete', id: 3 },
      { entity: 'widgets', action: 'edit', id: 4 },
    ]);

    const answer = await handle(
      httpApiEvent({
        body: mixed,
        headers: { 'content-type': 'application/json', authorization: `Bearer ${API_KEY}` },
      }),
    );

    expect(answer.status).toBe(422);
    expect(answer.body.error).toEqual({
      code: 'invalid_event',
      message: 'Some events are invalid.',
      details: [
        {
          index: 1,
          path: '/entity',
          message: 'is not one of the entities this relay accepts (ENTITIES)',
        },
        {
          index: 2,
          path: '/entity',
          message: 'is not one of the entities this relay accepts (ENTITIES)',
        },
        { index: 2, path: '/data', message: 'is required for edit' },
      ],
    });
    expect(queue.messages).toHaveLength(0);
  });

  it('accepts every default entity and refuses one outside the default', async () => {
    const queue = recordingQueue();
    const handle = ingestHandler(queue);
    const send = (entity: string) => {
      const one = JSON.stringify({ entity, action: 'delete', id: 1 });
      return handle(
        httpApiEvent({
          body: one,
          headers: { 'content-type': 'application/json', authorization: `Bearer ${API_KEY}` },
        }),
      );
    };

    for (const entity of INGEST_LIMITS.entities) expect((await send(entity)).status).toBe(202);
    expect((await send('widgets')).status).toBe(422);
    expect(queue.messages).toHaveLength(INGEST_LIMITS.entities.size);
  });
});

describe('a 503 queue_unavailable', () => {
  const sqs = mockClient(SQSClient);
  afterEach(() => {
    sqs.reset();
    vi.restoreAllMocks();
  });

  /** The real Powertools logger, its error lines (JSON on stderr) kept. */
  const capturingLogger = () => {
    const lines: string[] = [];
    vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
      lines.push(String(chunk).trim());
      return true;
    });
    return { logger: new Logger({ serviceName: 'ingest-test' }), lines };
  };

  it('logs the SQS error name and code with the request id, never the events', async () => {
    const failure = Object.assign(new Error('Rate exceeded for queue'), {
      name: 'RequestThrottled',
      $metadata: { httpStatusCode: 403 },
    });
    sqs.on(SendMessageBatchCommand).rejects(failure);
    const { logger, lines } = capturingLogger();
    const handle = ingestHandler(
      new SqsEventQueue(new SQSClient({ region: 'eu-west-1' }), 'https://sqs/events'),
      { logger },
    );
    const secretBody = JSON.stringify(contact(77));

    const answer = await handle(
      httpApiEvent({
        body: secretBody,
        headers: { 'content-type': 'application/json', authorization: `Bearer ${API_KEY}` },
      }),
    );

    expect(answer.status).toBe(503);
    expect(lines.map((line) => JSON.parse(line))).toContainEqual(
      expect.objectContaining({
        level: 'ERROR',
        event: 'queue_unavailable',
        requestId: 'request-42',
        error: 'RequestThrottled',
        code: 'RequestThrottled',
      }),
    );
    const logged = lines.join('\n');
    expect(logged).not.toContain('user77@example.com');
    expect(logged).not.toContain(API_KEY);
  });

  it('names the code of the entries SQS listed in Failed[]', async () => {
    sqs
      .on(SendMessageBatchCommand)
      .resolves({ Failed: [{ Id: '0', Code: 'InternalError', SenderFault: false }] });
    const { logger, lines } = capturingLogger();
    const handle = ingestHandler(
      new SqsEventQueue(new SQSClient({ region: 'eu-west-1' }), 'https://sqs/events'),
      { logger },
    );

    await handle(
      httpApiEvent({
        body,
        headers: { 'content-type': 'application/json', authorization: `Bearer ${API_KEY}` },
      }),
    );

    expect(lines.map((line) => JSON.parse(line))).toContainEqual(
      expect.objectContaining({ event: 'queue_unavailable', code: 'InternalError' }),
    );
  });
});
