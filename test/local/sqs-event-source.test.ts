import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  type DeleteMessageBatchCommandInput,
  type DeleteMessageBatchCommandOutput,
  GetQueueAttributesCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import type { Context, SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { InvocationTimeoutError } from '../../infra/local/lambda-context.ts';
import { createQueuePair } from '../../infra/local/queue-pair.ts';
import {
  type InvokeReport,
  type SqsBatchHandler,
  SqsEventSource,
  type SqsEventSourceOptions,
} from '../../infra/local/sqs-event-source.ts';
import {
  type LocalSqs,
  queueCounts,
  receiveUntil,
  sendBodies,
  sqsClient,
  startLocalSqs,
  uniqueQueueName,
} from '../support/local-sqs.ts';
import { until } from '../support/until.ts';

/** Short, so failed messages come back within the test. */
const VISIBILITY_SECONDS = 1;
/** Bound for waiting on a message to reappear after a 1 s visibility timeout. */
const REAPPEAR_TIMEOUT_MS = 3_000;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

let local: LocalSqs;

beforeAll(async () => {
  local = await startLocalSqs();
});

afterAll(async () => {
  await local.stop();
});

type QueuePair = Awaited<ReturnType<typeof createQueuePair>>;

interface Fixture {
  pair: QueuePair;
  source: SqsEventSource;
  events: SQSEvent[];
  contexts: Context[];
  reports: InvokeReport[];
  errors: unknown[];
}

/** A fresh queue pair and a source on it whose handler invocations are recorded. */
async function fixture(
  options: {
    handler?: SqsBatchHandler;
    maxReceiveCount?: number;
    sqs?: SQSClient;
    source?: Partial<SqsEventSourceOptions>;
    /** Default true, as the local stack's queues; false for what only standard queues allow. */
    fifo?: boolean;
  } = {},
): Promise<Fixture> {
  const sqs = options.sqs ?? local.sqs;
  const pair = await createQueuePair(sqs, {
    name: uniqueQueueName(),
    maxReceiveCount: options.maxReceiveCount ?? 5,
    visibilityTimeoutSeconds: VISIBILITY_SECONDS,
    fifo: options.fifo ?? true,
  });
  const handler = options.handler ?? (async () => undefined);
  const recorded: Omit<Fixture, 'pair' | 'source'> = {
    events: [],
    contexts: [],
    reports: [],
    errors: [],
  };
  const source = new SqsEventSource({
    sqs,
    queueUrl: pair.queueUrl,
    queueArn: pair.queueArn,
    batchSize: 10,
    batchWindowMs: 0,
    handler: (event, context) => {
      recorded.events.push(event);
      recorded.contexts.push(context);
      return handler(event, context);
    },
    onInvoke: (report) => recorded.reports.push(report),
    onError: (error) => recorded.errors.push(error),
    ...options.source,
  });
  return { pair, source, ...recorded };
}

/** Polls until an invocation happened or the deadline passed. */
async function pollUntilReport(
  source: SqsEventSource,
  timeoutMs: number,
): Promise<InvokeReport | undefined> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const report = await source.pollOnce();
    if (report !== undefined) return report;
  }
  return undefined;
}

/** A client of its own, closed after the test, for middleware that watches or breaks calls. */
function ownClient(): SQSClient {
  const sqs = sqsClient(local.endpoint);
  onTestFinished(() => sqs.destroy());
  return sqs;
}

interface Call {
  command: string;
  input: Record<string, unknown>;
}

function recordCalls(sqs: SQSClient): Call[] {
  const calls: Call[] = [];
  sqs.middlewareStack.add(
    (next, context) => async (args) => {
      calls.push({
        command: String(context.commandName),
        input: args.input as Record<string, unknown>,
      });
      return next(args);
    },
    { step: 'initialize', name: 'recordCalls' },
  );
  return calls;
}

/** Makes DeleteMessageBatch answer the chosen entries in Failed[] instead of deleting them. */
function refuseDeletes(sqs: SQSClient, refuse: (receiptHandle: string) => boolean): void {
  sqs.middlewareStack.add(
    (next, context) => async (args) => {
      if (context.commandName !== 'DeleteMessageBatchCommand') return next(args);
      const input = args.input as DeleteMessageBatchCommandInput;
      const entries = input.Entries ?? [];
      const refused = entries.filter((entry) => refuse(entry.ReceiptHandle ?? ''));
      const passed = entries.filter((entry) => !refused.includes(entry));
      const result =
        passed.length > 0
          ? await next({ ...args, input: { ...input, Entries: passed } })
          : ({ output: { Successful: [], Failed: [], $metadata: {} }, response: {} } as Awaited<
              ReturnType<typeof next>
            >);
      const output = result.output as DeleteMessageBatchCommandOutput;
      output.Failed = [
        ...(output.Failed ?? []),
        ...refused.map((entry) => ({
          Id: entry.Id,
          SenderFault: false,
          Code: 'InternalError',
          Message: 'injected by the test',
        })),
      ];
      return result;
    },
    { step: 'initialize', name: 'refuseDeletes' },
  );
}

function deferred<T>() {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((settle) => {
    resolve = settle;
  });
  return { promise, resolve };
}

/** Rejects when `promise` has not settled within `ms`, so a test cannot hang. */
function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  return Promise.race([
    promise,
    sleep(ms).then(() => {
      throw new Error(`${what} did not happen within ${ms} ms`);
    }),
  ]);
}

function bodies(count: number): string[] {
  return Array.from({ length: count }, (_, index) => JSON.stringify({ index }));
}

function sorted(values: ReadonlyArray<string>): string[] {
  return [...values].sort();
}

function failures(...ids: Array<string | undefined>): SQSBatchResponse {
  return { batchItemFailures: ids.map((id) => ({ itemIdentifier: id ?? '' })) };
}

describe('createQueuePair', () => {
  it('creates the queue with its visibility timeout and a redrive policy to its dead-letter queue', async () => {
    const name = uniqueQueueName('events');
    const pair = await createQueuePair(local.sqs, {
      name,
      maxReceiveCount: 3,
      visibilityTimeoutSeconds: 7,
      fifo: false,
    });

    expect(pair.queueArn).toBe(`arn:aws:sqs:us-east-1:000000000000:${name}`);
    expect(pair.deadLetterQueueArn).toBe(`arn:aws:sqs:us-east-1:000000000000:${name}-dlq`);
    const { Attributes: queue = {} } = await local.sqs.send(
      new GetQueueAttributesCommand({ QueueUrl: pair.queueUrl, AttributeNames: ['All'] }),
    );
    expect(queue.VisibilityTimeout).toBe('7');
    expect(JSON.parse(queue.RedrivePolicy ?? '{}')).toEqual({
      deadLetterTargetArn: pair.deadLetterQueueArn,
      maxReceiveCount: 3,
    });
    const { Attributes: deadLetters = {} } = await local.sqs.send(
      new GetQueueAttributesCommand({
        QueueUrl: pair.deadLetterQueueUrl,
        AttributeNames: ['QueueArn', 'MessageRetentionPeriod'],
      }),
    );
    expect(deadLetters.QueueArn).toBe(pair.deadLetterQueueArn);
    expect(Number(deadLetters.MessageRetentionPeriod)).toBe(14 * 24 * 3600);
  });
});

describe('createQueuePair, FIFO', () => {
  it('makes FIFO queues by default, with high throughput and no content-based deduplication', async () => {
    const name = uniqueQueueName('events');
    const pair = await createQueuePair(local.sqs, {
      name,
      maxReceiveCount: 3,
      visibilityTimeoutSeconds: 7,
    });

    expect(pair.queueArn).toBe(`arn:aws:sqs:us-east-1:000000000000:${name}.fifo`);
    expect(pair.deadLetterQueueArn).toBe(`arn:aws:sqs:us-east-1:000000000000:${name}-dlq.fifo`);
    for (const queueUrl of [pair.queueUrl, pair.deadLetterQueueUrl]) {
      const { Attributes = {} } = await local.sqs.send(
        new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['All'] }),
      );
      expect(Attributes).toMatchObject({
        FifoQueue: 'true',
        ContentBasedDeduplication: 'false',
        DeduplicationScope: 'messageGroup',
        FifoThroughputLimit: 'perMessageGroupId',
      });
    }
    const { Attributes: queue = {} } = await local.sqs.send(
      new GetQueueAttributesCommand({ QueueUrl: pair.queueUrl, AttributeNames: ['All'] }),
    );
    expect(queue.VisibilityTimeout).toBe('7');
    expect(JSON.parse(queue.RedrivePolicy ?? '{}')).toEqual({
      deadLetterTargetArn: pair.deadLetterQueueArn,
      maxReceiveCount: 3,
    });
  });
});

describe('SqsEventSource from a FIFO queue', () => {
  it.each([
    ['a batchSize above 10', { batchSize: 11 }, /batchSize must be at most 10 for a FIFO queue/],
    ['a batching window', { batchWindowMs: 500 }, /batchWindowMs must be 0 for a FIFO queue/],
  ])('refuses %s, as Lambda refuses such a mapping', (_name, override, message) => {
    expect(
      () =>
        new SqsEventSource({
          sqs: local.sqs,
          queueUrl: 'http://127.0.0.1/000000000000/q.fifo',
          queueArn: 'arn:aws:sqs:us-east-1:000000000000:q.fifo',
          handler: async () => undefined,
          batchSize: 10,
          batchWindowMs: 0,
          ...override,
        }),
    ).toThrow(message);
  });

  it("hands a group's messages in order, with their group, deduplication id and sequence number", async () => {
    const f = await fixture();
    await sendBodies(local.sqs, f.pair.queueUrl, [
      { body: 'a1', groupId: 'a', deduplicationId: 'd-a1' },
      { body: 'b1', groupId: 'b', deduplicationId: 'd-b1' },
      { body: 'a2', groupId: 'a', deduplicationId: 'd-a2' },
    ]);

    await f.source.pollOnce();

    const records = f.events[0]?.Records ?? [];
    expect(records.filter((r) => r.body.startsWith('a')).map((r) => r.body)).toEqual(['a1', 'a2']);
    expect(sorted(records.map((record) => record.body))).toEqual(['a1', 'a2', 'b1']);
    for (const record of records) {
      expect(record.attributes).toMatchObject({
        MessageGroupId: record.body.slice(0, 1),
        MessageDeduplicationId: `d-${record.body}`,
        SequenceNumber: expect.stringMatching(/^\d{20}$/),
      });
    }
  });

  it("runs batches of different groups at once, and hands a group's next message only once its batch is settled", async () => {
    const running = new Map<string, () => void>();
    const handed: string[] = [];
    const f = await fixture({
      source: { batchSize: 1, maxConcurrency: 2 },
      handler: async (event) => {
        const body = event.Records[0]?.body ?? '';
        handed.push(body);
        await new Promise<void>((resolve) => running.set(body, resolve));
        running.delete(body);
      },
    });
    onTestFinished(async () => {
      for (const release of running.values()) release();
      await f.source.stop();
    });
    await sendBodies(local.sqs, f.pair.queueUrl, [
      { body: 'a1', groupId: 'a' },
      { body: 'a2', groupId: 'a' },
      { body: 'b1', groupId: 'b' },
    ]);
    f.source.start();

    await until(() => running.size === 2, 3_000, 'two invocations');
    expect(sorted(handed)).toEqual(['a1', 'b1']);
    // A slot is free, but a1 in flight holds its group.
    running.get('b1')?.();
    await sleep(500);
    expect(sorted(handed)).toEqual(['a1', 'b1']);
    running.get('a1')?.();
    await until(() => running.has('a2'), 3_000, 'a2 handed');
    running.get('a2')?.();
    await until(() => f.reports.length === 3, 3_000, 'three reports');

    expect(handed.filter((body) => body.startsWith('a'))).toEqual(['a1', 'a2']);
    expect(f.reports.every((report) => report.failed.length === 0)).toBe(true);
  });
});

describe('SqsEventSource gathering', () => {
  it('gathers batchSize messages across several ReceiveMessage calls into one invocation', async () => {
    const sqs = ownClient();
    const calls = recordCalls(sqs);
    const f = await fixture({ sqs, fifo: false, source: { batchSize: 25, batchWindowMs: 5_000 } });
    const sent = await sendBodies(sqs, f.pair.queueUrl, bodies(30));

    const started = Date.now();
    const report = await f.source.pollOnce();

    // A full batch does not wait for the window.
    expect(Date.now() - started).toBeLessThan(3_000);
    expect(f.events).toHaveLength(1);
    const handed = f.events[0]?.Records.map((record) => record.messageId) ?? [];
    expect(handed).toHaveLength(25);
    expect(new Set(handed).size).toBe(25);
    expect(sent).toEqual(expect.arrayContaining(handed));
    expect(report).toEqual({
      messageIds: handed,
      deleted: handed,
      failed: [],
      wholeBatchFailed: false,
      billedMs: expect.any(Number),
    });
    const receives = calls.filter((call) => call.command === 'ReceiveMessageCommand');
    expect(receives.length).toBeGreaterThanOrEqual(3);
    for (const receive of receives)
      expect(receive.input.MaxNumberOfMessages).toBeLessThanOrEqual(10);
    const deletes = calls.filter((call) => call.command === 'DeleteMessageBatchCommand');
    expect(deletes.map((call) => (call.input.Entries as unknown[]).length)).toEqual([10, 10, 5]);
    expect(await queueCounts(sqs, f.pair.queueUrl)).toEqual({ visible: 5, inFlight: 0 });
    expect(f.errors).toEqual([]);
  });

  it('waits out batchWindowMs when fewer than batchSize arrive, taking what arrives meanwhile', async () => {
    const f = await fixture({ fifo: false, source: { batchSize: 100, batchWindowMs: 1_200 } });
    const early = await sendBodies(local.sqs, f.pair.queueUrl, bodies(3));
    const late = sleep(300).then(() => sendBodies(local.sqs, f.pair.queueUrl, bodies(2)));

    const started = Date.now();
    const report = await f.source.pollOnce();
    const elapsed = Date.now() - started;

    expect(elapsed).toBeGreaterThanOrEqual(1_150);
    expect(elapsed).toBeLessThan(2_500);
    expect(sorted(report?.messageIds ?? [])).toEqual(sorted([...early, ...(await late)]));
    expect(report?.deleted).toHaveLength(5);
    expect(f.events).toHaveLength(1);
    expect(await queueCounts(local.sqs, f.pair.queueUrl)).toEqual({ visible: 0, inFlight: 0 });
  });

  it('invokes with what one ReceiveMessage returned when batchWindowMs is 0', async () => {
    const f = await fixture({ fifo: false, source: { batchSize: 100, batchWindowMs: 0 } });
    await sendBodies(local.sqs, f.pair.queueUrl, bodies(15));

    const report = await f.source.pollOnce();

    expect(report?.messageIds).toHaveLength(10);
    expect(await queueCounts(local.sqs, f.pair.queueUrl)).toEqual({ visible: 5, inFlight: 0 });
  });

  it('resolves undefined without invoking the handler when the queue stays empty', async () => {
    const f = await fixture();

    const started = Date.now();
    expect(await f.source.pollOnce()).toBeUndefined();

    expect(Date.now() - started).toBeLessThan(1_500);
    expect(f.events).toEqual([]);
    expect(f.reports).toEqual([]);
  });
});

describe('SqsEventSource records and context', () => {
  it('hands the handler records and a context in Lambda shape', async () => {
    const remaining: number[] = [];
    const f = await fixture({
      fifo: false,
      source: { functionName: 'relay-batch', functionTimeoutMs: 5_000 },
      handler: async (_event, context) => {
        remaining.push(context.getRemainingTimeInMillis());
        await sleep(100);
        remaining.push(context.getRemainingTimeInMillis());
      },
    });
    const body = JSON.stringify({ entity: 'contacts', action: 'create' });
    const before = Date.now();
    const [id] = await sendBodies(local.sqs, f.pair.queueUrl, [body], {
      text: { DataType: 'String', StringValue: 'hello' },
      count: { DataType: 'Number', StringValue: '42' },
      raw: { DataType: 'Binary', BinaryValue: Uint8Array.from([0, 1, 254, 255]) },
      tagged: { DataType: 'String.tag', StringValue: 'x' },
    });

    await f.source.pollOnce();

    const timestamp = expect.stringMatching(/^\d{13}$/);
    expect(f.events).toEqual([
      {
        Records: [
          {
            messageId: id,
            receiptHandle: expect.any(String),
            body,
            attributes: {
              ApproximateReceiveCount: '1',
              SentTimestamp: timestamp,
              SenderId: expect.any(String),
              ApproximateFirstReceiveTimestamp: timestamp,
            },
            messageAttributes: {
              text: {
                stringValue: 'hello',
                stringListValues: [],
                binaryListValues: [],
                dataType: 'String',
              },
              count: {
                stringValue: '42',
                stringListValues: [],
                binaryListValues: [],
                dataType: 'Number',
              },
              raw: {
                binaryValue: 'AAH+/w==',
                stringListValues: [],
                binaryListValues: [],
                dataType: 'Binary',
              },
              tagged: {
                stringValue: 'x',
                stringListValues: [],
                binaryListValues: [],
                dataType: 'String.tag',
              },
            },
            md5OfBody: createHash('md5').update(body).digest('hex'),
            md5OfMessageAttributes: expect.stringMatching(/^[0-9a-f]{32}$/),
            eventSource: 'aws:sqs',
            eventSourceARN: f.pair.queueArn,
            awsRegion: 'us-east-1',
          },
        ],
      },
    ]);
    const sent = Number(f.events[0]?.Records[0]?.attributes.SentTimestamp);
    expect(sent).toBeGreaterThanOrEqual(before - 1_000);

    const context = f.contexts[0];
    expect(context).toMatchObject({
      functionName: 'relay-batch',
      functionVersion: '$LATEST',
      invokedFunctionArn: 'arn:aws:lambda:us-east-1:000000000000:function:relay-batch',
      logGroupName: '/aws/lambda/relay-batch',
      callbackWaitsForEmptyEventLoop: true,
    });
    expect(context?.awsRequestId).toMatch(UUID);
    expect(context?.memoryLimitInMB).toMatch(/^\d+$/);
    expect(context?.logStreamName).toMatch(/^\d{4}\/\d{2}\/\d{2}\/\[\$LATEST\][0-9a-f]{32}$/);
    const [atStart = 0, later = 0] = remaining;
    expect(atStart).toBeLessThanOrEqual(5_000);
    expect(atStart).toBeGreaterThan(4_000);
    expect(later).toBeLessThanOrEqual(atStart - 90);
  });

  it('gives each invocation its own request id under the default function name', async () => {
    const f = await fixture();
    await sendBodies(local.sqs, f.pair.queueUrl, bodies(1));
    await f.source.pollOnce();
    await sendBodies(local.sqs, f.pair.queueUrl, bodies(1));
    await f.source.pollOnce();

    expect(f.contexts.map((context) => context.functionName)).toEqual(['batch', 'batch']);
    const [first, second] = f.contexts.map((context) => context.awsRequestId);
    expect(first).toMatch(UUID);
    expect(second).toMatch(UUID);
    expect(first).not.toBe(second);
  });
});

describe('SqsEventSource responses', () => {
  it.each([
    ['undefined', undefined],
    ['null', null],
    ['an empty object', {}],
    ['an empty batchItemFailures', { batchItemFailures: [] }],
    ['a null batchItemFailures', { batchItemFailures: null }],
  ])('deletes the whole batch when the handler returns %s', async (_name, response) => {
    const f = await fixture({ handler: async () => response as SQSBatchResponse | undefined });
    const sent = await sendBodies(local.sqs, f.pair.queueUrl, bodies(4));

    const report = await f.source.pollOnce();

    expect(report).toEqual({
      messageIds: sent,
      deleted: sent,
      failed: [],
      wholeBatchFailed: false,
      billedMs: expect.any(Number),
    });
    expect(await queueCounts(local.sqs, f.pair.queueUrl)).toEqual({ visible: 0, inFlight: 0 });
  });

  it('deletes the others and lets only the reported failures come back', async () => {
    const f = await fixture({
      // Reported twice on purpose: duplicates are fine for Lambda.
      handler: async (event) => {
        const ids = event.Records.map((record) => record.messageId);
        return failures(ids[1], ids[3], ids[3]);
      },
    });
    const sent = await sendBodies(local.sqs, f.pair.queueUrl, bodies(5));
    const failed = [sent[1] ?? '', sent[3] ?? ''];

    const report = await f.source.pollOnce();

    expect(report).toEqual({
      messageIds: sent,
      deleted: [sent[0], sent[2], sent[4]],
      failed,
      wholeBatchFailed: false,
      billedMs: expect.any(Number),
    });
    expect(await queueCounts(local.sqs, f.pair.queueUrl)).toEqual({ visible: 0, inFlight: 2 });
    const back = await receiveUntil(local.sqs, f.pair.queueUrl, 2, {
      timeoutMs: REAPPEAR_TIMEOUT_MS,
    });
    expect(sorted(back.map((message) => message.MessageId ?? ''))).toEqual(sorted(failed));
    expect(back.map((message) => message.Attributes?.ApproximateReceiveCount)).toEqual(['2', '2']);
    // The three successes are gone for good.
    expect(await queueCounts(local.sqs, f.pair.queueUrl)).toEqual({ visible: 0, inFlight: 2 });
  });

  it('fails the whole batch when the handler throws', async () => {
    const thrown = new Error('Mautic is down');
    const f = await fixture({
      handler: async () => {
        throw thrown;
      },
    });
    const sent = await sendBodies(local.sqs, f.pair.queueUrl, bodies(3));

    const report = await f.source.pollOnce();

    expect(report).toEqual({
      messageIds: sent,
      deleted: [],
      failed: sent,
      wholeBatchFailed: true,
      billedMs: expect.any(Number),
      error: thrown,
    });
    expect(await queueCounts(local.sqs, f.pair.queueUrl)).toEqual({ visible: 0, inFlight: 3 });
    const back = await receiveUntil(local.sqs, f.pair.queueUrl, 3, {
      timeoutMs: REAPPEAR_TIMEOUT_MS,
    });
    expect(sorted(back.map((message) => message.MessageId ?? ''))).toEqual(sorted(sent));
    expect(back.map((message) => message.Attributes?.ApproximateReceiveCount)).toEqual([
      '2',
      '2',
      '2',
    ]);
  });

  it('fails the whole batch when the handler throws synchronously', async () => {
    const f = await fixture({
      handler: () => {
        throw new TypeError('not even a promise');
      },
    });
    await sendBodies(local.sqs, f.pair.queueUrl, bodies(2));

    const report = await f.source.pollOnce();

    expect(report?.wholeBatchFailed).toBe(true);
    expect(report?.error).toBeInstanceOf(TypeError);
    expect(await queueCounts(local.sqs, f.pair.queueUrl)).toEqual({ visible: 0, inFlight: 2 });
  });

  it('fails the whole batch when the handler outlives functionTimeoutMs', async () => {
    const done = deferred<void>();
    const f = await fixture({
      source: { functionTimeoutMs: 200 },
      handler: async () => {
        await sleep(500);
        done.resolve();
      },
    });
    const sent = await sendBodies(local.sqs, f.pair.queueUrl, bodies(2));

    const report = await f.source.pollOnce();

    expect(report?.wholeBatchFailed).toBe(true);
    expect(report?.deleted).toEqual([]);
    expect(report?.failed).toEqual(sent);
    expect(report?.error).toBeInstanceOf(InvocationTimeoutError);
    expect(String(report?.error)).toContain('Task timed out after 0.20 seconds');
    // Billed as Lambda bills it: until the timeout stopped it.
    expect(report?.billedMs).toBeGreaterThanOrEqual(199);
    expect(await queueCounts(local.sqs, f.pair.queueUrl)).toEqual({ visible: 0, inFlight: 2 });
    // Its late success changes nothing.
    await within(done.promise, 2_000, 'the late handler');
    await sleep(20);
    expect(await queueCounts(local.sqs, f.pair.queueUrl)).toEqual({ visible: 0, inFlight: 2 });
  });

  const invalidResponses: Array<[string, (ids: string[]) => unknown]> = [
    ['a string', () => 'ok'],
    ['a number', () => 1],
    ['true', () => true],
    ['an array', (ids) => [{ itemIdentifier: ids[0] }]],
    ['batchItemFailures as a string', () => ({ batchItemFailures: 'none' })],
    [
      'batchItemFailures as an object',
      (ids) => ({ batchItemFailures: { itemIdentifier: ids[0] } }),
    ],
    ['an entry that is a string', (ids) => ({ batchItemFailures: [ids[0]] })],
    ['an entry that is null', () => ({ batchItemFailures: [null] })],
    ['an entry without itemIdentifier', () => ({ batchItemFailures: [{}] })],
    ['an entry with a wrong key', (ids) => ({ batchItemFailures: [{ itemId: ids[0] }] })],
    ['a null itemIdentifier', () => ({ batchItemFailures: [{ itemIdentifier: null }] })],
    ['an empty itemIdentifier', () => ({ batchItemFailures: [{ itemIdentifier: '' }] })],
    ['a numeric itemIdentifier', () => ({ batchItemFailures: [{ itemIdentifier: 1 }] })],
    [
      'an itemIdentifier not in the batch',
      () => ({ batchItemFailures: [{ itemIdentifier: '00000000-0000-4000-8000-000000000000' }] }),
    ],
    [
      'a valid entry next to an invalid one',
      (ids) => ({ batchItemFailures: [{ itemIdentifier: ids[0] }, { itemIdentifier: '' }] }),
    ],
  ];

  // Concurrent: each waits out a visibility timeout on its own queue pair.
  it.concurrent.for(invalidResponses)(
    'fails the whole batch when the response has %s',
    async ([, respond], { expect }) => {
      const f = await fixture({
        handler: async (event) =>
          respond(event.Records.map((record) => record.messageId)) as SQSBatchResponse,
      });
      const sent = await sendBodies(local.sqs, f.pair.queueUrl, bodies(3));

      const report = await f.source.pollOnce();

      expect(report).toEqual({
        messageIds: sent,
        deleted: [],
        failed: sent,
        wholeBatchFailed: true,
        billedMs: expect.any(Number),
      });
      expect(await queueCounts(local.sqs, f.pair.queueUrl)).toEqual({ visible: 0, inFlight: 3 });
      const back = await receiveUntil(local.sqs, f.pair.queueUrl, 3, {
        timeoutMs: REAPPEAR_TIMEOUT_MS,
      });
      expect(sorted(back.map((message) => message.MessageId ?? ''))).toEqual(sorted(sent));
    },
  );
});

describe('SqsEventSource redrive', () => {
  it('leaves a message failing maxReceiveCount times to the queue, which moves it to the DLQ', async () => {
    const f = await fixture({
      maxReceiveCount: 2,
      handler: async (event) =>
        failures(
          ...event.Records.filter((record) => record.body === 'poison').map((r) => r.messageId),
        ),
    });
    const [goodId, poisonId] = await sendBodies(local.sqs, f.pair.queueUrl, ['good', 'poison']);

    expect(await f.source.pollOnce()).toEqual({
      messageIds: [goodId, poisonId],
      deleted: [goodId],
      failed: [poisonId],
      wholeBatchFailed: false,
      billedMs: expect.any(Number),
    });
    const second = await pollUntilReport(f.source, REAPPEAR_TIMEOUT_MS);
    expect(second?.failed).toEqual([poisonId]);
    expect(f.events[1]?.Records.map((record) => record.attributes.ApproximateReceiveCount)).toEqual(
      ['2'],
    );

    // The next receive finds it over maxReceiveCount: the queue moves it, the handler never sees it.
    const deadline = Date.now() + REAPPEAR_TIMEOUT_MS;
    while (
      (await queueCounts(local.sqs, f.pair.deadLetterQueueUrl)).visible === 0 &&
      Date.now() < deadline
    ) {
      expect(await f.source.pollOnce()).toBeUndefined();
    }
    const dead = await receiveUntil(local.sqs, f.pair.deadLetterQueueUrl, 1, { timeoutMs: 1_000 });
    expect(dead.map((message) => [message.MessageId, message.Body])).toEqual([
      [poisonId, 'poison'],
    ]);
    expect(await queueCounts(local.sqs, f.pair.queueUrl)).toEqual({ visible: 0, inFlight: 0 });
    expect(f.events).toHaveLength(2);
  });
});

describe('SqsEventSource deletion', () => {
  it('retries entries DeleteMessageBatch answers in Failed[] once', async () => {
    const sqs = ownClient();
    let refusals = 0;
    refuseDeletes(sqs, () => refusals++ === 0);
    const calls = recordCalls(sqs);
    const f = await fixture({ sqs });
    const sent = await sendBodies(sqs, f.pair.queueUrl, bodies(3));

    const report = await f.source.pollOnce();

    expect(report).toEqual({
      messageIds: sent,
      deleted: sent,
      failed: [],
      wholeBatchFailed: false,
      billedMs: expect.any(Number),
    });
    expect(calls.filter((call) => call.command === 'DeleteMessageBatchCommand')).toHaveLength(2);
    expect(await queueCounts(sqs, f.pair.queueUrl)).toEqual({ visible: 0, inFlight: 0 });
  });

  it('leaves an entry that fails to delete twice, and it comes back', async () => {
    const sqs = ownClient();
    let stuckHandle = '';
    let attempts = 0;
    refuseDeletes(sqs, (handle) => {
      if (handle !== stuckHandle) return false;
      attempts++;
      return true;
    });
    const f = await fixture({
      sqs,
      handler: async (event) => {
        stuckHandle = event.Records[0]?.receiptHandle ?? '';
      },
    });
    const sent = await sendBodies(sqs, f.pair.queueUrl, bodies(3));

    const report = await f.source.pollOnce();

    expect(attempts).toBe(2);
    expect(report).toEqual({
      messageIds: sent,
      deleted: sent.slice(1),
      failed: sent.slice(0, 1),
      wholeBatchFailed: false,
      billedMs: expect.any(Number),
    });
    const back = await receiveUntil(sqs, f.pair.queueUrl, 1, { timeoutMs: REAPPEAR_TIMEOUT_MS });
    expect(back.map((message) => message.MessageId)).toEqual(sent.slice(0, 1));
    expect(back[0]?.Attributes?.ApproximateReceiveCount).toBe('2');
    expect(await queueCounts(sqs, f.pair.queueUrl)).toEqual({ visible: 0, inFlight: 1 });
  });
});

describe('SqsEventSource start and stop', () => {
  it('delivers what arrives while running, and stop() waits for the batch in hand', async () => {
    const sqs = ownClient();
    const calls = recordCalls(sqs);
    const entered = deferred<void>();
    const release = deferred<SQSBatchResponse>();
    const f = await fixture({
      sqs,
      fifo: false,
      source: { batchWindowMs: 300 },
      handler: async () => {
        entered.resolve();
        return release.promise;
      },
    });
    onTestFinished(() => f.source.stop());
    f.source.start();
    const sent = await sendBodies(sqs, f.pair.queueUrl, bodies(3));
    await within(entered.promise, 3_000, 'the invocation');

    let stopped = false;
    const stopping = f.source.stop().then(() => {
      stopped = true;
    });
    await sleep(200);
    expect(stopped).toBe(false);
    release.resolve(failures(sent[2]));
    await within(stopping, 2_000, 'stop()');

    expect(f.reports).toEqual([
      {
        messageIds: sent,
        deleted: sent.slice(0, 2),
        failed: sent.slice(2),
        wholeBatchFailed: false,
        billedMs: expect.any(Number),
      },
    ]);
    expect(await queueCounts(local.sqs, f.pair.queueUrl)).toEqual({ visible: 0, inFlight: 1 });
    const callsAtStop = calls.length;
    await sleep(300);
    expect(calls.length).toBe(callsAtStop);
  });

  it('stops an idle loop within a long poll and makes no further calls', async () => {
    const sqs = ownClient();
    const calls = recordCalls(sqs);
    const f = await fixture({ sqs });
    onTestFinished(() => f.source.stop());
    f.source.start();
    f.source.start();
    await sleep(100);
    // One loop, so one long poll waiting.
    expect(calls.filter((call) => call.command === 'ReceiveMessageCommand')).toHaveLength(1);

    const started = Date.now();
    await f.source.stop();

    expect(Date.now() - started).toBeLessThan(1_500);
    const callsAtStop = calls.length;
    expect(await f.source.pollOnce()).toBeUndefined();
    expect(() => f.source.start()).toThrow(/after stop/);
    await f.source.stop(); // stopping twice is fine
    await sendBodies(local.sqs, f.pair.queueUrl, bodies(1));
    await sleep(300);
    expect(calls.length).toBe(callsAtStop);
    expect(f.events).toEqual([]);
    // Still queued: visible, or in flight when the long poll stop() cut short had taken it
    // (it reappears after the visibility timeout, as with SQS).
    const { visible, inFlight } = await queueCounts(local.sqs, f.pair.queueUrl);
    expect(visible + inFlight).toBe(1);
  });

  it('keeps polling after a failed ReceiveMessage, reporting the error', async () => {
    const f = await fixture();
    const broken = new SqsEventSource({
      sqs: local.sqs,
      queueUrl: `${f.pair.queueUrl}-missing`,
      queueArn: f.pair.queueArn,
      handler: async () => undefined,
      batchSize: 10,
      batchWindowMs: 0,
      onError: (error) => f.errors.push(error),
    });
    onTestFinished(() => broken.stop());
    await expect(broken.pollOnce()).rejects.toThrow();

    broken.start();
    const deadline = Date.now() + 2_000;
    while (f.errors.length === 0 && Date.now() < deadline) await sleep(20);
    await within(broken.stop(), 1_000, 'stop() during the back-off');

    expect(f.errors.length).toBeGreaterThanOrEqual(1);
  });
});

describe('SqsEventSource concurrency', () => {
  it('reads no more while maxConcurrency invocations run; takes the next batch when a slot frees, before the deletes finish', async () => {
    const sqs = ownClient();
    // Deletes wait until the test lets them through, to show the slot does not wait for them.
    const deletesHeld = deferred<void>();
    sqs.middlewareStack.add(
      (next, context) => async (args) => {
        if (context.commandName === 'DeleteMessageBatchCommand') await deletesHeld.promise;
        return next(args);
      },
      { step: 'initialize', name: 'holdDeletes' },
    );
    const pair = await createQueuePair(sqs, {
      name: uniqueQueueName(),
      maxReceiveCount: 5,
      visibilityTimeoutSeconds: 30,
    });
    const releases: Array<() => void> = [];
    let running = 0;
    let mostRunning = 0;
    const reports: InvokeReport[] = [];
    const source = new SqsEventSource({
      sqs,
      queueUrl: pair.queueUrl,
      queueArn: pair.queueArn,
      batchSize: 10,
      batchWindowMs: 0,
      maxConcurrency: 2,
      handler: async () => {
        running++;
        mostRunning = Math.max(mostRunning, running);
        await new Promise<void>((resolve) => releases.push(resolve));
        running--;
        return undefined;
      },
      onInvoke: (report) => reports.push(report),
    });
    onTestFinished(async () => {
      deletesHeld.resolve();
      for (const release of releases.splice(0)) release();
      await source.stop();
    });
    const sent = await sendBodies(sqs, pair.queueUrl, bodies(30));
    source.start();

    // Two invocations hold both slots: as Lambda's mapping with a maximum concurrency, the
    // pollers read nothing more meanwhile (a batch held for a free slot would take messages a
    // running invocation could have gathered).
    await until(() => releases.length === 2, 3_000, 'two invocations');
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect(await queueCounts(local.sqs, pair.queueUrl)).toEqual({ visible: 10, inFlight: 20 });
    expect(releases).toHaveLength(2);

    releases.shift()?.();
    await until(() => releases.length === 2, 3_000, 'the third invocation');
    expect(reports).toEqual([]); // the first batch's deletes are still held

    deletesHeld.resolve();
    for (const release of releases.splice(0)) release();
    await until(() => reports.length === 3, 3_000, 'three reports');
    await within(source.stop(), 2_000, 'stop()');

    expect(mostRunning).toBe(2);
    expect(sorted(reports.flatMap((report) => report.deleted))).toEqual(sorted(sent));
    expect(await queueCounts(local.sqs, pair.queueUrl)).toEqual({ visible: 0, inFlight: 0 });
  });

  it('refuses a maxConcurrency that is not a positive integer', async () => {
    const f = await fixture();
    expect(
      () =>
        new SqsEventSource({
          sqs: local.sqs,
          queueUrl: f.pair.queueUrl,
          queueArn: f.pair.queueArn,
          handler: async () => undefined,
          batchSize: 10,
          batchWindowMs: 0,
          maxConcurrency: 0,
        }),
    ).toThrow(/maxConcurrency/);
  });
});

describe('SqsEventSource options', () => {
  it.each([
    ['batchSize 0', { batchSize: 0 }],
    ['batchSize 10001', { batchSize: 10_001 }],
    ['batchSize 2.5', { batchSize: 2.5 }],
    ['a negative batchWindowMs', { batchWindowMs: -1 }],
    ['functionTimeoutMs 0', { functionTimeoutMs: 0 }],
  ])('refuses %s', (_name, override) => {
    expect(
      () =>
        new SqsEventSource({
          sqs: local.sqs,
          queueUrl: 'http://127.0.0.1/000000000000/q',
          queueArn: 'arn:aws:sqs:us-east-1:000000000000:q',
          handler: async () => undefined,
          batchSize: 10,
          batchWindowMs: 0,
          ...override,
        }),
    ).toThrow(RangeError);
  });
});
