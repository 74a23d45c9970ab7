import { SendMessageBatchCommand, SQSClient } from '@aws-sdk/client-sqs';
import { mockClient } from 'aws-sdk-client-mock';
import { afterEach, describe, expect, it } from 'vitest';
import { SqsEventQueue } from '../../functions/adapters/sqs-event-queue.ts';
import { QueueUnavailableError } from '../../functions/core/errors.ts';

const sqs = mockClient(SQSClient);
const queue = () => new SqsEventQueue(new SQSClient({ region: 'eu-west-1' }), 'https://sqs/events');
const message = (n: number, bytes = 10) => ({
  eventId: `e${n}`,
  body: `${n}`.padEnd(bytes, 'x'),
  groupId: `g${n}`,
  deduplicationId: `d${n}`,
});
const succeedAll = () =>
  sqs.on(SendMessageBatchCommand).callsFake((input: { Entries: Array<{ Id: string }> }) => ({
    Successful: input.Entries.map((e) => ({
      Id: e.Id,
      MessageId: `m-${e.Id}`,
      MD5OfMessageBody: '',
    })),
    Failed: [],
  }));

afterEach(() => {
  sqs.reset();
});

describe('SqsEventQueue', () => {
  it('sends at most 10 entries and at most 1 MiB per SendMessageBatch', async () => {
    succeedAll();

    await queue().enqueue([
      ...Array.from({ length: 12 }, (_, i) => message(i)),
      ...Array.from({ length: 5 }, (_, i) => message(100 + i, 300_000)),
    ]);

    const groups = sqs
      .commandCalls(SendMessageBatchCommand)
      .map((c) => c.args[0].input.Entries ?? []);
    expect(groups.map((g) => g.length)).toEqual([10, 5, 2]);
    for (const group of groups) {
      expect(
        group.reduce((sum, e) => sum + Buffer.byteLength(e.MessageBody ?? ''), 0),
      ).toBeLessThanOrEqual(1024 * 1024);
    }
  });

  it('counts as queued only the entries SQS lists as successful', async () => {
    sqs
      .on(SendMessageBatchCommand)
      .resolvesOnce({ Successful: [{ Id: '0', MessageId: 'a', MD5OfMessageBody: '' }], Failed: [] })
      .resolves({ Successful: [{ Id: '1', MessageId: 'b', MD5OfMessageBody: '' }], Failed: [] });

    await queue().enqueue([message(0), message(1)]);

    expect(
      sqs
        .commandCalls(SendMessageBatchCommand)
        .map((c) => c.args[0].input.Entries?.map((e) => e.Id)),
    ).toEqual([['0', '1'], ['1']]);
  });

  it('tells `queued` of each message SQS took, in a failing batch too, and of no other', async () => {
    // 25 messages: groups of 10, 10 and 5. In the second, SQS takes 10–14 and never 15–19; in
    // the third it refuses 24 as the sender's fault and takes the rest of it.
    sqs.on(SendMessageBatchCommand).callsFake((input) => {
      const entries = input.Entries as Array<{ Id: string; MessageBody: string }>;
      const n = (e: { MessageBody: string }) => Number.parseInt(e.MessageBody, 10);
      const fails = (e: { MessageBody: string }) => (n(e) >= 15 && n(e) < 20) || n(e) === 24;
      return {
        Successful: entries.filter((e) => !fails(e)).map((e) => ({ Id: e.Id })),
        Failed: entries
          .filter(fails)
          .map((e) => ({ Id: e.Id, Code: 'InternalError', SenderFault: n(e) === 24 })),
      };
    });
    const told: string[] = [];

    await expect(
      queue().enqueue(
        Array.from({ length: 25 }, (_, i) => message(i)),
        (queued) => told.push(queued.eventId),
      ),
    ).rejects.toBeInstanceOf(QueueUnavailableError);

    const took = [...Array.from({ length: 15 }, (_, i) => i), 20, 21, 22, 23];
    expect([...told].sort()).toEqual(took.map((i) => `e${i}`).sort());
  });

  it("does not retry a message SQS refuses as the sender's fault", async () => {
    sqs.on(SendMessageBatchCommand).resolves({
      Successful: [],
      Failed: [{ Id: '0', Code: 'InvalidMessageContents', SenderFault: true }],
    });

    await expect(queue().enqueue([message(0)])).rejects.toThrow(
      'SQS refused a message (InvalidMessageContents)',
    );
    expect(sqs.commandCalls(SendMessageBatchCommand)).toHaveLength(1);
  });

  it('gives up with QueueUnavailableError after 3 retries', async () => {
    sqs.on(SendMessageBatchCommand).rejects(new Error('throttled'));

    await expect(queue().enqueue([message(0)])).rejects.toBeInstanceOf(QueueUnavailableError);
    expect(sqs.commandCalls(SendMessageBatchCommand)).toHaveLength(4);
  });

  it('keeps several groups in flight at once, at most 8', async () => {
    let inFlight = 0;
    let most = 0;
    const release: Array<() => void> = [];
    sqs.on(SendMessageBatchCommand).callsFake(async (input: { Entries: Array<{ Id: string }> }) => {
      inFlight++;
      most = Math.max(most, inFlight);
      await new Promise<void>((resolve) => release.push(resolve));
      inFlight--;
      return { Successful: input.Entries.map((e) => ({ Id: e.Id })), Failed: [] };
    });
    const done = queue().enqueue(Array.from({ length: 200 }, (_, i) => message(i)));
    // Answers the calls as they come, a bounded number of times.
    for (
      let round = 0;
      round < 1_000 && sqs.commandCalls(SendMessageBatchCommand).length < 20;
      round++
    ) {
      await new Promise((resolve) => setImmediate(resolve));
      for (const resolve of release.splice(0)) resolve();
    }
    for (let round = 0; round < 100 && release.length > 0; round++) {
      for (const resolve of release.splice(0)) resolve();
      await new Promise((resolve) => setImmediate(resolve));
    }
    await done;

    expect(sqs.commandCalls(SendMessageBatchCommand)).toHaveLength(20);
    expect(most).toBe(8);
  });

  it('fails the request when one group cannot be queued, after the groups in flight settled', async () => {
    let settled = 0;
    sqs.on(SendMessageBatchCommand).callsFake(async (input: { Entries: Array<{ Id: string }> }) => {
      await new Promise((resolve) => setImmediate(resolve));
      settled++;
      if (settled === 1) {
        return {
          Successful: [],
          Failed: [{ Id: '0', Code: 'InvalidMessageContents', SenderFault: true }],
        };
      }
      return { Successful: input.Entries.map((e) => ({ Id: e.Id })), Failed: [] };
    });

    await expect(
      queue().enqueue(Array.from({ length: 30 }, (_, i) => message(i))),
    ).rejects.toBeInstanceOf(QueueUnavailableError);
    expect(settled).toBe(sqs.commandCalls(SendMessageBatchCommand).length);
  });

  it("sends each event in its record's message group, with its own deduplication id", async () => {
    succeedAll();

    await queue().enqueue([message(1), message(2)]);

    const [entries] = sqs
      .commandCalls(SendMessageBatchCommand)
      .map((c) => c.args[0].input.Entries ?? []);
    expect(entries?.map((e) => [e.MessageGroupId, e.MessageDeduplicationId])).toEqual([
      ['g1', 'd1'],
      ['g2', 'd2'],
    ]);
  });

  it("keeps a record's events in request order: one per batch, batches one after the other", async () => {
    const order: string[] = [];
    let inFlight = 0;
    let mostOfRecordR = 0;
    sqs.on(SendMessageBatchCommand).callsFake(async (input) => {
      const entries = input.Entries as Array<{
        Id: string;
        MessageGroupId: string;
        MessageBody: string;
      }>;
      const ofR = entries.filter((e) => e.MessageGroupId === 'r').length;
      inFlight += ofR;
      mostOfRecordR = Math.max(mostOfRecordR, inFlight);
      // The later batches answer first, were they let through.
      await new Promise((resolve) => setTimeout(resolve, 20 - Math.min(19, order.length * 5)));
      order.push(...entries.filter((e) => e.MessageGroupId === 'r').map((e) => e.MessageBody));
      inFlight -= ofR;
      return { Successful: entries.map((e) => ({ Id: e.Id })), Failed: [] };
    });
    const ofRecord = (n: number) => ({ ...message(n), groupId: 'r' });

    await queue().enqueue([ofRecord(1), message(2), ofRecord(3), message(4), ofRecord(5)]);

    const batches = sqs
      .commandCalls(SendMessageBatchCommand)
      .map((c) => (c.args[0].input.Entries ?? []).map((e) => e.MessageGroupId));
    for (const batch of batches) expect(batch.filter((g) => g === 'r')).toHaveLength(1);
    expect(order.map((body) => body.slice(0, 1))).toEqual(['1', '3', '5']);
    expect(mostOfRecordR).toBe(1);
  });

  it("never sends a record's later event when its earlier one could not be queued", async () => {
    sqs.on(SendMessageBatchCommand).callsFake(async (input) => {
      const entries = input.Entries as Array<{ Id: string; MessageBody: string }>;
      return {
        Successful: entries
          .filter((e) => !e.MessageBody.startsWith('1'))
          .map((e) => ({ Id: e.Id })),
        Failed: entries
          .filter((e) => e.MessageBody.startsWith('1'))
          .map((e) => ({ Id: e.Id, Code: 'InternalError', SenderFault: false })),
      };
    });
    const ofRecord = (n: number) => ({ ...message(n), groupId: 'r' });

    await expect(queue().enqueue([ofRecord(1), ofRecord(2)])).rejects.toBeInstanceOf(
      QueueUnavailableError,
    );

    const bodies = sqs
      .commandCalls(SendMessageBatchCommand)
      .flatMap((c) => (c.args[0].input.Entries ?? []).map((e) => e.MessageBody?.slice(0, 1)));
    expect(bodies).toEqual(['1', '1', '1', '1']);
  });
});
