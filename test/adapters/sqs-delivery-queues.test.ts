import {
  ChangeMessageVisibilityBatchCommand,
  DeleteMessageBatchCommand,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import { mockClient } from 'aws-sdk-client-mock';
import { afterEach, describe, expect, it } from 'vitest';
import { SqsDeliveryQueues } from '../../functions/adapters/sqs-delivery-queues.ts';
import type { DeadLetter, QueuedMessage } from '../../functions/core/queue-ports.ts';

const sqs = mockClient(SQSClient);
const queues = () =>
  new SqsDeliveryQueues(new SQSClient({ region: 'eu-west-1' }), {
    eventsQueueUrl: 'https://q/events',
    deadLetterQueueUrl: 'https://q/dlq',
  });
const message = (
  n: number,
  attributes: QueuedMessage['messageAttributes'] = {},
): QueuedMessage => ({
  messageId: `msg-${n}`,
  receiptHandle: `rh-${n}`,
  body: `{"n":${n}}`,
  attributes: {
    ApproximateFirstReceiveTimestamp: String(Date.parse('2026-11-21T00:00:00Z')),
    ApproximateReceiveCount: '1',
  },
  messageAttributes: attributes,
});
const letter = (n: number, extra: Partial<DeadLetter> = {}): DeadLetter => ({
  message: message(n),
  reason: 'mautic_rejected_item',
  detail: 'email: x is invalid.',
  status: 400,
  entity: 'contacts',
  action: 'create',
  ...extra,
});

afterEach(() => {
  sqs.reset();
});

/** An SQS batch answer: every entry successful but those in `failing`, call after call. */
function answering(...failing: string[][]) {
  let call = 0;
  return (input: { Entries: Array<{ Id: string }> }) => {
    const failed = failing[call++] ?? [];
    return {
      Successful: input.Entries.filter((e) => !failed.includes(e.Id)).map((e) => ({
        Id: e.Id,
        MessageId: `m${e.Id}`,
        MD5OfMessageBody: '',
      })),
      Failed: failed.map((Id) => ({ Id, Code: 'InternalError', SenderFault: false })),
    };
  };
}

describe('SqsDeliveryQueues.deadLetter', () => {
  it('sends the original body and attributes with the reason, in batches of 10', async () => {
    sqs.on(SendMessageBatchCommand).callsFake(answering());
    const first = letter(0);
    first.message = message(0, {
      source: { dataType: 'String', stringValue: 'crm' },
      blob: { dataType: 'Binary', binaryValue: 'AAE=' },
    });

    const failed = await queues().deadLetter([
      first,
      ...Array.from({ length: 11 }, (_, i) => letter(i + 1)),
    ]);

    expect(failed).toEqual([]);
    const calls = sqs.commandCalls(SendMessageBatchCommand);
    expect(calls.map((call) => call.args[0].input.Entries?.length)).toEqual([10, 2]);
    const entry = calls[0]?.args[0].input.Entries?.[0];
    expect(calls[0]?.args[0].input.QueueUrl).toBe('https://q/dlq');
    expect(entry?.MessageBody).toBe('{"n":0}');
    expect(entry?.MessageAttributes).toEqual({
      source: { DataType: 'String', StringValue: 'crm' },
      blob: { DataType: 'Binary', BinaryValue: Buffer.from([0, 1]) },
      'relay.reason': { DataType: 'String', StringValue: 'mautic_rejected_item' },
      'relay.detail': { DataType: 'String', StringValue: 'email: x is invalid.' },
      'relay.status': { DataType: 'Number', StringValue: '400' },
      'relay.entity': { DataType: 'String', StringValue: 'contacts' },
      'relay.action': { DataType: 'String', StringValue: 'create' },
      'relay.firstReceivedAt': { DataType: 'String', StringValue: '2026-11-21T00:00:00.000Z' },
    });
  });

  it("keeps at most 10 attributes, the relay's own always among them", async () => {
    sqs.on(SendMessageBatchCommand).callsFake(answering());
    const many = { ...letter(0), eventId: 'evt-0' };
    many.message = message(
      0,
      Object.fromEntries(
        Array.from({ length: 9 }, (_, i) => [`a${i}`, { dataType: 'String', stringValue: 'v' }]),
      ),
    );

    await queues().deadLetter([many]);

    const attributes =
      sqs.commandCalls(SendMessageBatchCommand)[0]?.args[0].input.Entries?.[0]?.MessageAttributes ??
      {};
    expect(Object.keys(attributes)).toHaveLength(10);
    expect(attributes).toHaveProperty('relay.reason');
    expect(attributes).toHaveProperty('relay.firstReceivedAt');
    expect(attributes['relay.eventId']).toEqual({ DataType: 'String', StringValue: 'evt-0' });
  });

  it('retries failed entries once and reports those that failed twice', async () => {
    sqs.on(SendMessageBatchCommand).callsFake(answering(['0', '2'], ['2']));

    const failed = await queues().deadLetter([letter(0), letter(1), letter(2)]);

    expect(failed).toEqual(['msg-2']);
    const retried = sqs
      .commandCalls(SendMessageBatchCommand)[1]
      ?.args[0].input.Entries?.map((e) => e.Id);
    expect(retried).toEqual(['0', '2']);
  });

  it('counts as sent only what SQS lists as successful', async () => {
    sqs
      .on(SendMessageBatchCommand)
      .resolves({ Successful: [{ Id: '1', MessageId: 'x', MD5OfMessageBody: '' }], Failed: [] });

    await expect(queues().deadLetter([letter(0), letter(1)])).resolves.toEqual(['msg-0']);
  });

  it('keeps each SendMessageBatch within 1 MiB', async () => {
    sqs.on(SendMessageBatchCommand).callsFake(answering());
    const big = (n: number): DeadLetter => ({
      ...letter(n),
      message: { ...message(n), body: 'x'.repeat(400_000) },
    });

    await queues().deadLetter([big(0), big(1), big(2), letter(3)]);

    expect(
      sqs.commandCalls(SendMessageBatchCommand).map((c) => c.args[0].input.Entries?.length),
    ).toEqual([2, 2]);
  });

  it('reports every message of a call that throws twice', async () => {
    sqs.on(SendMessageBatchCommand).rejects(new Error('connection reset'));

    await expect(queues().deadLetter([letter(0), letter(1)])).resolves.toEqual(['msg-0', 'msg-1']);
    expect(sqs.commandCalls(SendMessageBatchCommand)).toHaveLength(2);
  });
});

describe('SqsDeliveryQueues.delay', () => {
  it('changes the visibility of each message on the events queue, each by its own delay, ten to a call', async () => {
    sqs.on(ChangeMessageVisibilityBatchCommand).callsFake(answering());
    const many = Array.from({ length: 25 }, (_, i) => ({ message: message(i), seconds: 30 + i }));

    const failed = await queues().delay(many);

    expect(failed).toEqual([]);
    const calls = sqs.commandCalls(ChangeMessageVisibilityBatchCommand);
    expect(calls.map((call) => call.args[0].input.Entries?.length)).toEqual([10, 10, 5]);
    expect(calls[0]?.args[0].input.Entries?.slice(0, 2)).toEqual([
      { Id: '0', ReceiptHandle: 'rh-0', VisibilityTimeout: 30 },
      { Id: '1', ReceiptHandle: 'rh-1', VisibilityTimeout: 31 },
    ]);
  });
});

describe('SqsDeliveryQueues on the FIFO queues', () => {
  it("sends a dead letter in its record's group, deduplicated by the original message id", async () => {
    sqs.on(SendMessageBatchCommand).callsFake(answering());
    const grouped = letter(1);
    grouped.message = {
      ...message(1),
      attributes: { ...message(1).attributes, MessageGroupId: 'g' },
    };

    await queues().deadLetter([grouped, letter(2)]);

    const entries = sqs.commandCalls(SendMessageBatchCommand)[0]?.args[0].input.Entries ?? [];
    expect(entries.map((e) => [e.MessageGroupId, e.MessageDeduplicationId])).toEqual([
      ['g', 'msg-1'],
      // A message without a group (none should be) gets one of its own.
      ['msg-2', 'msg-2'],
    ]);
  });

  it("sends at most one letter of a record per call, in the record's order", async () => {
    sqs.on(SendMessageBatchCommand).callsFake(answering());
    const ofRecord = (n: number) => {
      const grouped = letter(n);
      grouped.message = {
        ...message(n),
        attributes: { ...message(n).attributes, MessageGroupId: 'r' },
      };
      return grouped;
    };

    await queues().deadLetter([ofRecord(1), letter(2), ofRecord(3)]);

    const calls = sqs
      .commandCalls(SendMessageBatchCommand)
      .map((c) => c.args[0].input.Entries?.map((e) => e.MessageDeduplicationId));
    expect(calls).toEqual([['msg-1', 'msg-2'], ['msg-3']]);
  });

  it('receives up to the number asked, 10 per call, with every attribute', async () => {
    let next = 0;
    sqs.on(ReceiveMessageCommand).callsFake((input: { MaxNumberOfMessages: number }) => ({
      Messages: Array.from({ length: input.MaxNumberOfMessages }, () => {
        const n = next++;
        return {
          MessageId: `m${n}`,
          ReceiptHandle: `rh${n}`,
          Body: `{"n":${n}}`,
          Attributes: { ApproximateReceiveCount: '1', MessageGroupId: `g${n}` },
          MessageAttributes: { source: { DataType: 'String', StringValue: 'crm' } },
        };
      }),
    }));

    const received = await queues().receive(25, Date.now() + 5_000);

    expect(received).toHaveLength(25);
    expect(new Set(received.map((m) => m.messageId)).size).toBe(25);
    expect(received[0]).toMatchObject({
      receiptHandle: 'rh0',
      attributes: { MessageGroupId: 'g0' },
      messageAttributes: { source: { dataType: 'String', stringValue: 'crm' } },
    });
    const inputs = sqs.commandCalls(ReceiveMessageCommand).map((c) => c.args[0].input);
    expect(inputs.map((i) => i.MaxNumberOfMessages).sort()).toEqual([10, 10, 5]);
    expect(inputs[0]).toMatchObject({
      QueueUrl: 'https://q/events',
      MessageSystemAttributeNames: ['All'],
      MessageAttributeNames: ['All'],
    });
  });

  it('makes no call once the window has passed, and stops at a failed call', async () => {
    sqs.on(ReceiveMessageCommand).resolves({ Messages: [] });
    expect(await queues().receive(200, Date.now() - 1)).toEqual([]);
    expect(sqs.commandCalls(ReceiveMessageCommand)).toEqual([]);

    sqs.reset();
    sqs.on(ReceiveMessageCommand).rejects(new Error('AccessDenied'));
    expect(await queues().receive(200, Date.now() + 60_000)).toEqual([]);
    expect(sqs.commandCalls(ReceiveMessageCommand).length).toBeLessThanOrEqual(4);
  });

  it('only long-polls, and stops once a whole long poll brought nothing, however long the window', async () => {
    // As SQS does: a long poll answers as soon as a message is there, empty when its wait is over.
    let waiting = 3;
    sqs.on(ReceiveMessageCommand).callsFake(async (input: { WaitTimeSeconds: number }) => {
      if (waiting-- > 0) return { Messages: [{ MessageId: `m${waiting}`, ReceiptHandle: 'rh' }] };
      await new Promise((resolve) => setTimeout(resolve, input.WaitTimeSeconds * 1000));
      return { Messages: [] };
    });
    const started = Date.now();

    const received = await queues().receive(200, started + 60_000);

    expect(received).toHaveLength(3);
    const waits = sqs
      .commandCalls(ReceiveMessageCommand)
      .map((c) => c.args[0].input.WaitTimeSeconds);
    expect(new Set(waits)).toEqual(new Set([1]));
    // The four receivers each end on their own empty second, not on the 60 s window: those that
    // asked before the last message came, on the second after it.
    expect(waits.length).toBeLessThanOrEqual(3 + 4 + 4);
    expect(Date.now() - started).toBeLessThan(30_000);
  });

  it('goes on while other receives bring messages, though one waited its whole second empty', async () => {
    // As SQS does: each message arriving wakes one waiting long poll. Ten arrive 300 ms apart, so
    // of four polls waiting, one waits its whole second while the other three are each woken.
    const arrivals = Array.from({ length: 10 }, (_, i) => ({ id: `m${i}`, atMs: 300 * (i + 1) }));
    const started = Date.now();
    const waiters: Array<(id: string) => void> = [];
    const pending: string[] = [];
    const timers = arrivals.map(({ id, atMs }) =>
      setTimeout(() => {
        const waiter = waiters.shift();
        if (waiter === undefined) pending.push(id);
        else waiter(id);
      }, atMs),
    );
    sqs.on(ReceiveMessageCommand).callsFake(async (input: { WaitTimeSeconds: number }) => {
      const ready = pending.shift();
      if (ready !== undefined) return { Messages: [{ MessageId: ready, ReceiptHandle: 'rh' }] };
      const id = await new Promise<string | undefined>((resolve) => {
        const waiter = (arrived: string) => {
          clearTimeout(timeout);
          resolve(arrived);
        };
        const timeout = setTimeout(() => {
          waiters.splice(waiters.indexOf(waiter), 1);
          resolve(undefined);
        }, input.WaitTimeSeconds * 1000);
        waiters.push(waiter);
      });
      return { Messages: id === undefined ? [] : [{ MessageId: id, ReceiptHandle: 'rh' }] };
    });

    const received = await queues()
      .receive(200, started + 10_000)
      .finally(() => timers.forEach(clearTimeout));

    expect(received.map((m) => m.messageId).sort()).toEqual(arrivals.map((a) => a.id).sort());
    // It ended on the quiet after the last arrival, not on the 10 s window.
    expect(Date.now() - started).toBeLessThan(6_000);
  });

  it('polls again after an empty answer that came before its second was up', async () => {
    // fauxqs wakes every waiting poll for one message; those that find none answer empty at once.
    let call = 0;
    sqs.on(ReceiveMessageCommand).callsFake(async () => {
      call++;
      if (call <= 3) return { Messages: [] };
      if (call === 4) return { Messages: [{ MessageId: 'late', ReceiptHandle: 'rh' }] };
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      return { Messages: [] };
    });

    const received = await queues().receive(1, Date.now() + 5_000);

    expect(received.map((m) => m.messageId)).toEqual(['late']);
  });

  it('hides what it receives for the time asked, with an attempt id per call, and says when a receive fails', async () => {
    let n = 0;
    sqs.on(ReceiveMessageCommand).callsFake(() => {
      n++;
      if (n === 3) throw Object.assign(new Error('Rate exceeded'), { name: 'ThrottlingException' });
      return { Messages: [{ MessageId: `m${n}`, ReceiptHandle: `rh${n}`, Body: '{}' }] };
    });
    const warnings: Array<[string, unknown]> = [];
    const logger = {
      info() {},
      warn: (message: string, extra?: unknown) => warnings.push([message, extra]),
      error() {},
    };
    const withLog = new SqsDeliveryQueues(
      new SQSClient({ region: 'eu-west-1' }),
      { eventsQueueUrl: 'https://q/events', deadLetterQueueUrl: 'https://q/dlq' },
      logger,
    );

    await withLog.receive(30, Date.now() + 5_000, 40);

    const inputs = sqs.commandCalls(ReceiveMessageCommand).map((c) => c.args[0].input);
    expect(inputs.every((input) => input.VisibilityTimeout === 40)).toBe(true);
    const attempts = inputs.map((input) => input.ReceiveRequestAttemptId);
    expect(new Set(attempts).size).toBe(inputs.length);
    expect(warnings).toEqual([
      [
        'Could not receive more events; delivering the batch in hand',
        { event: 'receive_failed', error: 'ThrottlingException', code: undefined },
      ],
    ]);
  });

  it('deletes the messages it was given by their receipt handles', async () => {
    sqs.on(DeleteMessageBatchCommand).callsFake(answering(['1']));

    const failed = await queues().remove(Array.from({ length: 3 }, (_, i) => message(i)));

    const calls = sqs.commandCalls(DeleteMessageBatchCommand);
    expect(calls[0]?.args[0].input).toEqual({
      QueueUrl: 'https://q/events',
      Entries: [
        { Id: '0', ReceiptHandle: 'rh-0' },
        { Id: '1', ReceiptHandle: 'rh-1' },
        { Id: '2', ReceiptHandle: 'rh-2' },
      ],
    });
    // Entry 1 failed once and was tried again alone.
    expect(calls[1]?.args[0].input.Entries).toEqual([{ Id: '1', ReceiptHandle: 'rh-1' }]);
    expect(failed).toEqual([]);
  });
});
