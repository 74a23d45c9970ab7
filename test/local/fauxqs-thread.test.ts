import {
  DeleteMessageBatchCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { type FauxqsThread, startFauxqsThread } from '../../infra/local/fauxqs-thread.ts';
import { createQueuePair, SqsEventSource } from '../../infra/local/sqs-event-source.ts';
import { queueCounts, sendBodies, sqsClient, uniqueQueueName } from '../support/local-sqs.ts';

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
  it('receives and deletes on the emulator thread, with the shapes the SDK gives', async () => {
    const { queueUrl } = await queue();
    const bytes = Uint8Array.from([0, 1, 2, 250, 255]);
    await sqs.send(
      new SendMessageCommand({
        QueueUrl: queueUrl,
        MessageBody: '{"hello":"world"}',
        MessageAttributes: { blob: { DataType: 'Binary', BinaryValue: bytes } },
      }),
    );
    const client = mapping();

    const { Messages = [] } = await client.send(
      new ReceiveMessageCommand({
        QueueUrl: queueUrl,
        MaxNumberOfMessages: 10,
        WaitTimeSeconds: 1,
        MessageSystemAttributeNames: ['All'],
        MessageAttributeNames: ['All'],
      }),
    );
    const [message] = Messages;
    const deleted = await client.send(
      new DeleteMessageBatchCommand({
        QueueUrl: queueUrl,
        Entries: [{ Id: 'only', ReceiptHandle: message?.ReceiptHandle }],
      }),
    );

    expect(message?.Body).toBe('{"hello":"world"}');
    expect(message?.Attributes?.ApproximateReceiveCount).toBe('1');
    expect(message?.MessageAttributes?.blob?.BinaryValue).toBeInstanceOf(Uint8Array);
    expect([...(message?.MessageAttributes?.blob?.BinaryValue ?? [])]).toEqual([...bytes]);
    expect(deleted.Successful?.map((entry) => entry.Id)).toEqual(['only']);
    expect(await queueCounts(sqs, queueUrl)).toEqual({ visible: 0, inFlight: 0 });
  });

  it("rejects with the emulator's error name and message", async () => {
    const missing = `http://127.0.0.1:${fauxqs.port}/000000000000/${uniqueQueueName('missing')}`;

    const error = await mapping()
      .send(new ReceiveMessageCommand({ QueueUrl: missing, MaxNumberOfMessages: 1 }))
      .catch((caught: unknown) => caught);

    expect(error).toBeInstanceOf(Error);
    expect((error as Error).name).toMatch(/NonExistentQueue|QueueDoesNotExist/);
    expect((error as Error).message).not.toBe('');
  });

  it('cuts a long poll short on the emulator thread when its signal aborts', async () => {
    const { queueUrl } = await queue();
    const started = performance.now();

    const poll = mapping().send(
      new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 1, WaitTimeSeconds: 5 }),
      { abortSignal: AbortSignal.timeout(50) },
    );

    await expect(poll).rejects.toMatchObject({ name: 'AbortError' });
    // Well before the 5 s long poll would have ended by itself.
    expect(performance.now() - started).toBeLessThan(4_000);
  });

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
    await sqs.send(new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: 'stays' }));
    const controller = new AbortController();
    controller.abort(new Error('a reason of its own'));

    const call = mapping().send(
      new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 1 }),
      { abortSignal: controller.signal },
    );

    await expect(call).rejects.toMatchObject({ name: 'AbortError' });
    expect(await queueCounts(sqs, queueUrl)).toEqual({ visible: 1, inFlight: 0 });
  });

  it('refuses calls other than the two the mapping makes', async () => {
    const other = mapping().send(
      new SendMessageCommand({
        QueueUrl: 'q',
        MessageBody: 'x',
      }) as unknown as ReceiveMessageCommand,
    );

    await expect(other).rejects.toBeInstanceOf(TypeError);
  });

  it('feeds the event source: a batch received, handled and deleted', async () => {
    const pair = await queue();
    await sendBodies(sqs, pair.queueUrl, ['a', 'b', 'c']);
    const bodies: string[] = [];
    const source = new SqsEventSource({
      sqs: mapping(),
      queueUrl: pair.queueUrl,
      queueArn: pair.queueArn,
      batchSize: 10,
      batchWindowMs: 0,
      handler: async (event) => {
        bodies.push(...event.Records.map((record) => record.body));
        return { batchItemFailures: [] };
      },
    });

    const report = await source.pollOnce();
    await source.stop();

    expect(bodies.length).toBeGreaterThan(0);
    expect(report?.deleted).toHaveLength(bodies.length);
    expect(await queueCounts(sqs, pair.queueUrl)).toEqual({
      visible: 3 - bodies.length,
      inFlight: 0,
    });
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
