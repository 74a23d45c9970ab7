// fauxqs's FIFO queues as SQS keeps them (infra/local/fauxqs-fifo.ts), through the SDK, on both
// ways the relay starts the emulator: in this process (tests) and on its thread (npm start).
import { setTimeout as sleep } from 'node:timers/promises';
import {
  ChangeMessageVisibilityBatchCommand,
  DeleteMessageCommand,
  type Message,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FauxqsThread, startFauxqsThread } from '../../infra/local/fauxqs-thread.ts';
import { createQueuePair } from '../../infra/local/queue-pair.ts';
import {
  type LocalSqs,
  sendBodies,
  sqsClient,
  startLocalSqs,
  uniqueQueueName,
} from '../support/local-sqs.ts';

let local: LocalSqs;
let thread: FauxqsThread;
let threadSqs: SQSClient;

beforeAll(async () => {
  local = await startLocalSqs();
  thread = await startFauxqsThread();
  threadSqs = sqsClient(`http://127.0.0.1:${thread.port}`);
});

afterAll(async () => {
  threadSqs.destroy();
  await thread.stop();
  await local.stop();
});

/** Bound for a message to come back after a visibility of a second or two. */
const RETURN_TIMEOUT_MS = 5_000;

describe.each<[string, () => SQSClient]>([
  ['fauxqs in this process', () => local.sqs],
  ['fauxqs on its thread', () => threadSqs],
])('%s, a FIFO queue', (_name, client) => {
  async function fifoQueue(sqs: SQSClient): Promise<string> {
    const { queueUrl } = await createQueuePair(sqs, {
      name: uniqueQueueName('fifo'),
      maxReceiveCount: 10,
      visibilityTimeoutSeconds: 30,
    });
    return queueUrl;
  }

  /** One ReceiveMessage: the bodies in the order it answered them, and the messages. */
  async function receive(
    sqs: SQSClient,
    queueUrl: string,
    options: { max?: number; visibilitySeconds?: number; waitSeconds?: number } = {},
  ): Promise<{ bodies: string[]; messages: Message[] }> {
    const { Messages = [] } = await sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: queueUrl,
        MaxNumberOfMessages: options.max ?? 10,
        WaitTimeSeconds: options.waitSeconds ?? 0,
        MessageSystemAttributeNames: ['All'],
        ...(options.visibilitySeconds === undefined
          ? {}
          : { VisibilityTimeout: options.visibilitySeconds }),
      }),
    );
    return { bodies: Messages.map((message) => message.Body ?? ''), messages: Messages };
  }

  /** Receives until something comes, within RETURN_TIMEOUT_MS. */
  async function receiveWhenBack(sqs: SQSClient, queueUrl: string): Promise<string[]> {
    const deadline = Date.now() + RETURN_TIMEOUT_MS;
    while (Date.now() < deadline) {
      const { bodies } = await receive(sqs, queueUrl, { waitSeconds: 1 });
      if (bodies.length > 0) return bodies;
    }
    return [];
  }

  async function setVisibility(
    sqs: SQSClient,
    queueUrl: string,
    entries: ReadonlyArray<[Message, number]>,
  ): Promise<void> {
    const { Failed = [] } = await sqs.send(
      new ChangeMessageVisibilityBatchCommand({
        QueueUrl: queueUrl,
        Entries: entries.map(([message, seconds], index) => ({
          Id: String(index),
          ReceiptHandle: message.ReceiptHandle,
          VisibilityTimeout: seconds,
        })),
      }),
    );
    expect(Failed).toEqual([]);
  }

  const inGroup = (groupId: string, ...bodies: string[]) =>
    bodies.map((body) => ({ body, groupId }));

  it('hands out several messages of a group in one receive, in order, then none of it while they are in flight', async () => {
    const sqs = client();
    const queueUrl = await fifoQueue(sqs);
    await sendBodies(sqs, queueUrl, [...inGroup('a', 'a1', 'a2', 'a3'), ...inGroup('b', 'b1')]);

    const first = await receive(sqs, queueUrl);

    expect(first.bodies.filter((body) => body.startsWith('a'))).toEqual(['a1', 'a2', 'a3']);
    expect(first.bodies).toContain('b1');
    expect(first.messages.map((message) => message.Attributes?.MessageGroupId)).toEqual(
      first.bodies.map((body) => body.slice(0, 1)),
    );
    // Both groups are held now, whatever else arrives for them; another group is not.
    await sendBodies(sqs, queueUrl, [...inGroup('a', 'a4'), ...inGroup('b', 'b2', 'b3')]);
    await sendBodies(sqs, queueUrl, inGroup('c', 'c1'));
    expect((await receive(sqs, queueUrl)).bodies).toEqual(['c1']);
    const b1 = first.messages.find((message) => message.Body === 'b1');
    await sqs.send(
      new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: b1?.ReceiptHandle }),
    );
    expect((await receive(sqs, queueUrl)).bodies).toEqual(['b2', 'b3']);
  });

  it('keeps a group in order when messages received together come back (visibility 0, then run out)', async () => {
    const sqs = client();
    const queueUrl = await fifoQueue(sqs);
    await sendBodies(sqs, queueUrl, inGroup('g', 'm1', 'm2', 'm3'));

    const taken = await receive(sqs, queueUrl, { max: 2 });
    expect(taken.bodies).toEqual(['m1', 'm2']);
    // Given back in their order, as an invocation's failures are.
    await setVisibility(sqs, queueUrl, [
      [taken.messages[0] as Message, 0],
      [taken.messages[1] as Message, 0],
    ]);

    const again = await receive(sqs, queueUrl, { visibilitySeconds: 1 });
    expect(again.bodies).toEqual(['m1', 'm2', 'm3']);
    // Left to run out together, as the batch of an invocation that died.
    expect(await receiveWhenBack(sqs, queueUrl)).toEqual(['m1', 'm2', 'm3']);
  });

  it('keeps a group in order when its messages come back in the other order (delays that end so)', async () => {
    const sqs = client();
    const queueUrl = await fifoQueue(sqs);
    await sendBodies(sqs, queueUrl, inGroup('g', 'm1', 'm2', 'm3'));
    const taken = await receive(sqs, queueUrl, { max: 2 });
    expect(taken.bodies).toEqual(['m1', 'm2']);

    await setVisibility(sqs, queueUrl, [
      [taken.messages[0] as Message, 1],
      [taken.messages[1] as Message, 2],
    ]);

    // m1 is visible first, but m2 in flight still holds the group.
    await sleep(1_300);
    expect((await receive(sqs, queueUrl)).bodies).toEqual([]);
    expect(await receiveWhenBack(sqs, queueUrl)).toEqual(['m1', 'm2', 'm3']);
  });

  it('long-polls, takes each deduplication id once, and refuses a message without a group', async () => {
    const sqs = client();
    const queueUrl = await fifoQueue(sqs);

    const started = Date.now();
    const polled = receive(sqs, queueUrl, { waitSeconds: 5 });
    await sleep(300);
    const [first] = await sendBodies(sqs, queueUrl, [
      { body: 'once', groupId: 'g', deduplicationId: 'd1' },
    ]);
    const [again] = await sendBodies(sqs, queueUrl, [
      { body: 'once more', groupId: 'g', deduplicationId: 'd1' },
    ]);

    const { messages } = await polled;
    expect(Date.now() - started).toBeGreaterThanOrEqual(250);
    expect(Date.now() - started).toBeLessThan(3_000);
    expect(messages.map((message) => message.Body)).toEqual(['once']);
    expect(again).toBe(first);
    expect(messages[0]?.Attributes).toMatchObject({
      MessageGroupId: 'g',
      MessageDeduplicationId: 'd1',
      SequenceNumber: expect.stringMatching(/^\d{20}$/),
    });
    const refused = sqs.send(
      new SendMessageBatchCommand({
        QueueUrl: queueUrl,
        Entries: [{ Id: '0', MessageBody: 'no group', MessageDeduplicationId: 'd2' }],
      }),
    );
    expect((await refused).Failed?.map((entry) => entry.Code)).toEqual(['MissingParameter']);
  });
});
