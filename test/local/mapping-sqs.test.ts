import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  DeleteMessageBatchCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { type FauxqsThread, startFauxqsThread } from '../../infra/local/fauxqs-thread.ts';
import { mappingSqsClient } from '../../infra/local/mapping-sqs.ts';
import { createQueuePair } from '../../infra/local/queue-pair.ts';
import { type MappingSqs, SqsEventSource } from '../../infra/local/sqs-event-source.ts';
import {
  type LocalSqs,
  queueCounts,
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

function client(endpoint = local.endpoint) {
  const sqs = mappingSqsClient(endpoint);
  onTestFinished(() => sqs.destroy());
  return sqs;
}

/** A loopback server answering every request with `status` and `body`; closed after the test. */
async function answering(status: number, body: string): Promise<string> {
  const server = createServer((_req, res) => res.writeHead(status).end(body));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  onTestFinished(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** The emulator a client reaches, an SDK client for it, and the mapping client under test. */
interface Setup {
  endpoint: string;
  sqs: SQSClient;
  mapping(): MappingSqs;
}

// The same contract for both of the local event source's clients: over HTTP from the caller's
// thread, and made on the emulator's thread.
describe.each<[string, () => Setup]>([
  [
    'mappingSqsClient (HTTP)',
    () => ({ endpoint: local.endpoint, sqs: local.sqs, mapping: () => client() }),
  ],
  [
    "the fauxqs thread's mappingSqs()",
    () => ({
      endpoint: `http://127.0.0.1:${thread.port}`,
      sqs: threadSqs,
      mapping: () => {
        const made = thread.mappingSqs();
        onTestFinished(() => made.destroy());
        return made;
      },
    }),
  ],
])('%s', (_name, setup) => {
  async function queue(sqs: SQSClient): Promise<{ queueUrl: string; queueArn: string }> {
    return createQueuePair(sqs, {
      name: uniqueQueueName('mapping'),
      maxReceiveCount: 5,
      visibilityTimeoutSeconds: 30,
    });
  }

  it('receives and deletes as the SDK does, with the same shapes (binary attributes as bytes)', async () => {
    const { sqs, mapping } = setup();
    const { queueUrl } = await queue(sqs);
    const bytes = Uint8Array.from([0, 1, 2, 250, 255]);
    await sqs.send(
      new SendMessageCommand({
        QueueUrl: queueUrl,
        MessageBody: '{"hello":"world"}',
        MessageGroupId: 'record',
        MessageDeduplicationId: 'hello',
        MessageAttributes: {
          'relay.reason': { DataType: 'String', StringValue: 'mautic_rejected' },
          blob: { DataType: 'Binary', BinaryValue: bytes },
        },
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

    expect(Messages).toHaveLength(1);
    expect(message?.Body).toBe('{"hello":"world"}');
    expect(message?.Attributes?.ApproximateReceiveCount).toBe('1');
    expect(message?.MessageAttributes?.['relay.reason']?.StringValue).toBe('mautic_rejected');
    expect(message?.MessageAttributes?.blob?.BinaryValue).toBeInstanceOf(Uint8Array);
    expect([...(message?.MessageAttributes?.blob?.BinaryValue ?? [])]).toEqual([...bytes]);
    expect(deleted.Successful?.map((entry) => entry.Id)).toEqual(['only']);
    expect(await queueCounts(sqs, queueUrl)).toEqual({ visible: 0, inFlight: 0 });
  });

  it("rejects with the emulator's error type and message when a call fails", async () => {
    const { endpoint, mapping } = setup();
    const missing = `${endpoint}/000000000000/${uniqueQueueName('missing')}`;

    const error = await mapping()
      .send(new ReceiveMessageCommand({ QueueUrl: missing, MaxNumberOfMessages: 1 }))
      .catch((caught: unknown) => caught);

    expect(error).toBeInstanceOf(Error);
    expect((error as Error).name).toMatch(/NonExistentQueue|QueueDoesNotExist/);
    expect((error as Error).message).not.toBe('');
  });

  it('cuts a long poll short when its signal aborts', async () => {
    const { sqs, mapping } = setup();
    const { queueUrl } = await queue(sqs);

    const poll = mapping().send(
      new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 1, WaitTimeSeconds: 5 }),
      { abortSignal: AbortSignal.timeout(50) },
    );

    // A poll left to run would answer, empty, after 5 s, not fail.
    await expect(poll).rejects.toMatchObject({ name: 'AbortError' });
  });

  it('refuses calls other than the two the mapping makes', async () => {
    const other = setup()
      .mapping()
      .send(
        new SendMessageCommand({
          QueueUrl: 'q',
          MessageBody: 'x',
        }) as unknown as ReceiveMessageCommand,
      );

    await expect(other).rejects.toBeInstanceOf(TypeError);
  });

  it('feeds the event source: a batch received, handled and deleted', async () => {
    const { sqs, mapping } = setup();
    const pair = await queue(sqs);
    await sendBodies(sqs, pair.queueUrl, ['a', 'b', 'c']);
    const bodies: string[] = [];
    const source = new SqsEventSource({
      sqs: mapping(),
      ...pair,
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

describe('mappingSqsClient over HTTP', () => {
  it('refuses an answer that is not JSON, and an endpoint that is not http://', async () => {
    const garbled = client(await answering(200, '<html>busy</html>'));

    const notJson = await garbled
      .send(new ReceiveMessageCommand({ QueueUrl: 'q' }))
      .catch((caught: unknown) => caught);

    expect(notJson).toMatchObject({
      message: 'ReceiveMessage: the emulator answered 200 with a body that is not JSON',
    });
    expect(() => mappingSqsClient('https://sqs.us-east-1.amazonaws.com')).toThrow(TypeError);
  });

  it('names an error answer without a type after its status', async () => {
    const failing = client(await answering(503, ''));

    const error = await failing
      .send(new DeleteMessageBatchCommand({ QueueUrl: 'q', Entries: [] }))
      .catch((caught: unknown) => caught);

    expect(error).toMatchObject({
      name: 'HTTP 503',
      message: 'DeleteMessageBatch failed with 503',
    });
  });
});
