import { SendMessageBatchCommand, SQSClient } from '@aws-sdk/client-sqs';
import { mockClient } from 'aws-sdk-client-mock';
import { afterEach, describe, expect, it } from 'vitest';
import { SqsEventQueue } from '../../functions/adapters/sqs-event-queue.ts';
import { contact, httpApiEvent, ingestHandler, signedHeaders } from '../support/ingest.ts';

describe('ingest when the queue fails', () => {
  const sqs = mockClient(SQSClient);
  afterEach(() => {
    sqs.reset();
  });
  const body = JSON.stringify(Array.from({ length: 12 }, (_, i) => contact(i)));
  const queue = () =>
    new SqsEventQueue(new SQSClient({ region: 'eu-west-1' }), 'https://sqs/events');

  it('retries entries listed in Failed[] and answers 202 once all are queued', async () => {
    let first = true;
    sqs.on(SendMessageBatchCommand).callsFake((input: { Entries: Array<{ Id: string }> }) => {
      const failed = first ? ['3'] : [];
      first = false;
      return {
        Successful: input.Entries.filter((e) => !failed.includes(e.Id)).map((e) => ({
          Id: e.Id,
          MessageId: e.Id,
          MD5OfMessageBody: '',
        })),
        Failed: failed.map((Id) => ({ Id, Code: 'InternalError', SenderFault: false })),
      };
    });

    const response = await ingestHandler(queue())(
      httpApiEvent({ body, headers: signedHeaders(body) }),
    );

    expect(response.status).toBe(202);
    const calls = sqs
      .commandCalls(SendMessageBatchCommand)
      .map((c) => c.args[0].input.Entries?.map((e) => e.Id));
    // The two groups go out together; only the failed entry is sent again.
    expect(calls).toHaveLength(3);
    expect(calls).toEqual(
      expect.arrayContaining([
        ['0', '1', '2', '3', '4', '5', '6', '7', '8', '9'],
        ['3'],
        ['0', '1'],
      ]),
    );
  });

  it('answers 503 queue_unavailable when entries keep failing or the call keeps throwing', async () => {
    sqs
      .on(SendMessageBatchCommand)
      .resolves({ Failed: [{ Id: '0', Code: 'ThrottlingException', SenderFault: false }] });
    const failing = await ingestHandler(queue())(
      httpApiEvent({ body, headers: signedHeaders(body) }),
    );
    sqs.reset();
    sqs.on(SendMessageBatchCommand).rejects(new Error('socket hang up'));
    const throwing = await ingestHandler(queue())(
      httpApiEvent({ body, headers: signedHeaders(body) }),
    );

    for (const response of [failing, throwing]) {
      expect(response.status).toBe(503);
      expect(response.body.error?.code).toBe('queue_unavailable');
    }
    // Both groups (sent together), each tried 4 times.
    expect(sqs.commandCalls(SendMessageBatchCommand)).toHaveLength(8);
  });
});
