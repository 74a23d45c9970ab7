/**
 * Settling never outlives the invocation. 200 messages left to the queue, each
 * with its own jittered delay, are hidden in calls of ten at once, not one call per delay one
 * after another (165 sequential calls answered after the deadline, and Lambda then failed the
 * whole batch); and every settling call of the SQS adapter has its own timeout within the time
 * the invocation has left.
 */
import {
  ChangeMessageVisibilityBatchCommand,
  SendMessageBatchCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import type { SQSRecord } from 'aws-lambda';
import { mockClient } from 'aws-sdk-client-mock';
import { describe, expect, it } from 'vitest';
import { SqsDeliveryQueues } from '../../functions/adapters/sqs-delivery-queues.ts';
import { createBatchHandler } from '../../functions/batch/handler.ts';
import { DEFAULT_DELIVERY_OPTIONS } from '../../functions/core/delivery/delivery-calls.ts';
import { MauticApiClient } from '../../functions/core/mautic/mautic-api.ts';
import type { DeadLetter, QueuedMessage } from '../../functions/core/queue-ports.ts';
import { lambdaContext } from '../../infra/local/lambda-context.ts';
import { startMauticSimulator } from '../../mautic-simulator/server.ts';
import { InMemoryActionLedger } from '../support/action-ledger.ts';
import { recorder } from '../support/observe.ts';

function message(n: number): SQSRecord {
  return {
    messageId: `m${n}`,
    receiptHandle: `rh${n}`,
    body: JSON.stringify({
      v: 1,
      eventId: `e${n}`,
      receivedAt: new Date().toISOString(),
      sender: 't',
      entity: 'contacts',
      action: 'create',
      data: { email: `settle${n}@example.com` },
    }),
    attributes: {
      ApproximateReceiveCount: '1',
      SentTimestamp: String(Date.now()),
      SenderId: 'x',
      ApproximateFirstReceiveTimestamp: String(Date.now()),
    },
    messageAttributes: {},
    md5OfBody: '',
    eventSource: 'aws:sqs',
    eventSourceARN: 'arn:aws:sqs:eu-west-1:1:events.fifo',
    awsRegion: 'eu-west-1',
  } as SQSRecord;
}

describe('settling 200 messages under a tight deadline', () => {
  it('delays every retried message in calls of ten at once and answers before the deadline, though each call takes 400 ms', async () => {
    const sim = await startMauticSimulator();
    try {
      sim.inject({ path: '/api/contacts/batch/new' }, { status: 500, body: '' }, 1_000);
      const all = Array.from({ length: 200 }, (_, n) => message(n));
      const handed = all.slice(0, 10);
      let gathered = all.slice(10);
      const calls: number[] = [];
      let inFlight = 0;
      let mostAtOnce = 0;
      const slow = async <T>(result: T): Promise<T> => {
        inFlight++;
        mostAtOnce = Math.max(mostAtOnce, inFlight);
        await new Promise((resolve) => setTimeout(resolve, 400));
        inFlight--;
        return result;
      };
      const delayed = new Map<string, number>();
      const handler = createBatchHandler({
        api: new MauticApiClient({ baseUrl: sim.url, fetch }),
        tokens: { accessToken: async () => sim.issueToken().accessToken },
        retry: {
          baseSeconds: 30,
          maxDelaySeconds: 900,
          horizonSeconds: 86_400,
          maxReceiveCount: 200,
        },
        queues: {
          deadLetter: async () => slow([]),
          // As SQS takes them: at most ten entries a call.
          delay: async (entries) => {
            const failed: string[] = [];
            await Promise.all(
              Array.from({ length: Math.ceil(entries.length / 10) }, (_, i) => {
                const part = entries.slice(i * 10, i * 10 + 10);
                calls.push(part.length);
                for (const { message: m, seconds } of part) delayed.set(m.messageId, seconds);
                return slow(failed);
              }),
            );
            return failed;
          },
          receive: async () => {
            const batch = gathered;
            gathered = [];
            return batch;
          },
          remove: async () => slow([]),
        },
        logger: recorder().logger,
        metrics: recorder().metrics,
        clock: { now: () => Date.now() },
        sleep: async () => {},
        random: Math.random,
        learnedLimit: { value: undefined },
        ledger: new InMemoryActionLedger(),
        options: {
          ...DEFAULT_DELIVERY_OPTIONS,
          batchSize: 200,
          maxDelaySeconds: 900,
          batchWindowMs: 0,
        },
      });
      const remainingMs = 6_000;
      const started = Date.now();

      const response = await handler({ Records: handed }, lambdaContext('batch', remainingMs));

      const elapsed = Date.now() - started;
      expect(elapsed).toBeLessThan(remainingMs);
      expect(response.batchItemFailures.map((f) => f.itemIdentifier).sort()).toEqual(
        handed.map((m) => m.messageId).sort(),
      );
      // Every message delayed, by its own jittered delay (15 to 30 s on a first receive), in 20
      // calls of ten, at once.
      expect(delayed.size).toBe(200);
      expect(new Set(delayed.values()).size).toBeGreaterThan(10);
      expect(calls).toEqual(Array(20).fill(10));
      expect(mostAtOnce).toBeGreaterThan(10);
    } finally {
      await sim.close();
    }
  });
});

describe('SqsDeliveryQueues settling calls', () => {
  it('gives up a call SQS does not answer once the time it was given is up, counting its messages as failed', async () => {
    // An SQS that never answers: the SDK's own request handler, waiting for ever.
    const silent = new SQSClient({
      region: 'eu-west-1',
      credentials: { accessKeyId: 'x', secretAccessKey: 'y' },
      requestHandler: {
        handle: (_request: unknown, options?: { abortSignal?: AbortSignal }) =>
          new Promise((_, reject) => {
            options?.abortSignal?.addEventListener('abort', () =>
              reject(Object.assign(new Error('aborted'), { name: 'AbortError' })),
            );
          }),
      } as never,
    });
    const queues = new SqsDeliveryQueues(silent, {
      eventsQueueUrl: 'https://sqs.eu-west-1.amazonaws.com/1/events.fifo',
      deadLetterQueueUrl: 'https://sqs.eu-west-1.amazonaws.com/1/dlq.fifo',
    });
    const warnings: string[] = [];
    const warned = (warning: Error) => warnings.push(warning.name);
    process.on('warning', warned);
    const started = Date.now();

    const failed = await queues.delay(
      [0, 1, 2].map((n) => ({ message: message(n), seconds: 30 })),
      started + 500,
    );

    expect(failed).toEqual(['m0', 'm1', 'm2']);
    expect(Date.now() - started).toBeLessThan(2_000);
    // The pause before the second try, when the time is already up, is no negative timeout.
    await new Promise((resolve) => setImmediate(resolve));
    process.off('warning', warned);
    expect(warnings).not.toContain('TimeoutNegativeWarning');
    silent.destroy();
  });

  it('sends a record’s dead letters in turn and different records’ at once', async () => {
    const sqs = mockClient(SQSClient);
    const order: string[][] = [];
    sqs
      .on(SendMessageBatchCommand)
      .callsFake((input: { Entries: Array<{ Id: string; MessageDeduplicationId: string }> }) => {
        order.push(input.Entries.map((entry) => entry.MessageDeduplicationId));
        return { Successful: input.Entries.map((entry) => ({ Id: entry.Id })) };
      });
    sqs.on(ChangeMessageVisibilityBatchCommand).resolves({});
    const letter = (n: number, record: string): DeadLetter => {
      const base = message(n);
      const body = JSON.parse(base.body);
      return {
        message: {
          ...base,
          body: JSON.stringify({ ...body, data: { email: `${record}@example.com` } }),
          attributes: { ...base.attributes, MessageGroupId: record },
        } as QueuedMessage,
        reason: 'mautic_rejected_item',
        detail: 'refused',
        eventId: `e${n}`,
        entity: 'contacts',
        action: 'create',
      } as DeadLetter;
    };
    const queues = new SqsDeliveryQueues(new SQSClient({ region: 'eu-west-1' }), {
      eventsQueueUrl: 'https://q/events',
      deadLetterQueueUrl: 'https://q/dlq',
    });
    const letters = [
      letter(0, 'ann'),
      ...Array.from({ length: 12 }, (_, i) => letter(i + 1, `r${i}`)),
      letter(13, 'ann'),
    ];

    const failed = await queues.deadLetter(letters);

    expect(failed).toEqual([]);
    // Ann's first letter and the twelve others in the first wave (two calls at once), her
    // second letter after them.
    expect(order.map((call) => call.length)).toEqual([10, 3, 1]);
    expect(order[2]).toEqual(['m13']);
    sqs.restore();
  });
});
