// What the thread's mapping client shares with the HTTP one is tested over both in
// mapping-sqs.test.ts; here, what is the thread's own.
import { ReceiveMessageCommand, SendMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { type FauxqsThread, startFauxqsThread } from '../../infra/local/fauxqs-thread.ts';
import { createQueuePair } from '../../infra/local/queue-pair.ts';
import { queueCounts, sqsClient, uniqueQueueName } from '../support/local-sqs.ts';

let fauxqs: FauxqsThread;
let sqs: SQSClient;

beforeAll(async () => {
  fauxqs = await startFauxqsThread();
  sqs = sqsClient(`http://127.0.0.1:${fauxqs.port}`);
});

afterAll(async () => {
  sqs.destroy();
  await fauxqs.stop();
});

function mapping() {
  const client = fauxqs.mappingSqs();
  onTestFinished(() => client.destroy());
  return client;
}

async function queue(): Promise<{ queueUrl: string; queueArn: string }> {
  return createQueuePair(sqs, {
    name: uniqueQueueName('thread'),
    maxReceiveCount: 5,
    visibilityTimeoutSeconds: 30,
  });
}

describe("the fauxqs thread's mapping client", () => {
  it('rejects calls still open when it is destroyed, and every call after', async () => {
    const { queueUrl } = await queue();
    const client = fauxqs.mappingSqs();

    const open = client.send(
      new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 1, WaitTimeSeconds: 5 }),
    );
    client.destroy();
    const after = client.send(new ReceiveMessageCommand({ QueueUrl: queueUrl }));

    await expect(open).rejects.toThrow('the mapping client was destroyed');
    await expect(after).rejects.toThrow('the mapping client was destroyed');
  });

  it('fails a call whose signal is already aborted as an aborted call, without sending it', async () => {
    const { queueUrl } = await queue();
    await sqs.send(
      new SendMessageCommand({
        QueueUrl: queueUrl,
        MessageBody: 'stays',
        MessageGroupId: 'record',
        MessageDeduplicationId: 'stays',
      }),
    );
    const controller = new AbortController();
    controller.abort(new Error('a reason of its own'));

    const call = mapping().send(
      new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 1 }),
      { abortSignal: controller.signal },
    );

    await expect(call).rejects.toMatchObject({ name: 'AbortError' });
    expect(await queueCounts(sqs, queueUrl)).toEqual({ visible: 1, inFlight: 0 });
  });
});

describe('a fauxqs thread that stops', () => {
  it('rejects the calls its mapping clients still had open', async () => {
    const own = await startFauxqsThread();
    const ownSqs = sqsClient(`http://127.0.0.1:${own.port}`);
    onTestFinished(() => ownSqs.destroy());
    const { queueUrl } = await createQueuePair(ownSqs, {
      name: uniqueQueueName('stopping'),
      maxReceiveCount: 5,
      visibilityTimeoutSeconds: 30,
    });
    const client = own.mappingSqs();
    onTestFinished(() => client.destroy());

    const open = client.send(
      new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 1, WaitTimeSeconds: 5 }),
    );
    // Not left hanging until the 5 s long poll ends (the test would time out first).
    const rejected = expect(open).rejects.toThrow('the fauxqs thread has stopped');
    await own.stop();

    await rejected;
    expect(() => own.mappingSqs()).toThrow('the fauxqs thread has stopped');
  });
});
