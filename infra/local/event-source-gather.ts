import { setTimeout as sleep } from 'node:timers/promises';
import { ReceiveMessageCommand, type ReceiveMessageCommandOutput } from '@aws-sdk/client-sqs';
import type { SQSRecord } from 'aws-lambda';
import { type RecordSource, toSqsRecord } from './event-source-records.ts';

/** SQS answers at most 10 messages per ReceiveMessage. */
const RECEIVE_LIMIT = 10;
/** ReceiveMessage calls one batch gathers with at once. */
const RECEIVES_IN_FLIGHT = 5;
/** The long poll that decides whether anything arrived at all. */
const FIRST_RECEIVE_WAIT_SECONDS = 1;
/** Between short polls at the end of a batching window shorter than the 1 s long-poll grain. */
const SHORT_POLL_PAUSE_MS = 50;

/** The mapping's receive call (`MappingSqs`). */
interface ReceivingSqs {
  send(
    command: ReceiveMessageCommand,
    options?: { abortSignal?: AbortSignal },
  ): Promise<ReceiveMessageCommandOutput>;
}

/** Where and how one poller gathers its batches. */
export interface Gathering extends RecordSource {
  sqs: ReceivingSqs;
  queueUrl: string;
  batchSize: number;
  batchWindowMs: number;
  /** The source's stop: it cuts a waiting receive short and ends the window. */
  stop: AbortSignal;
  /** Told of a receive that failed once messages were in hand (they are delivered anyway). */
  report: (error: unknown) => void;
}

/**
 * ReceiveMessage repeatedly (≤10 per call) until batchSize or batchWindowMs, as the mapping
 * gathers a batch. Undefined when nothing arrived within a short long-poll (≤1 s); rejects when
 * that first receive fails (nothing is in hand then).
 */
export async function gatherBatch(from: Gathering): Promise<SQSRecord[] | undefined> {
  const first = await receive(from, from.batchSize, FIRST_RECEIVE_WAIT_SECONDS);
  if (first.length === 0) return undefined;
  // Keyed by message id: a message whose visibility ran out during the window can come twice;
  // the handler must see it once, under its newest receipt handle.
  const batch = new Map<string, SQSRecord>();
  for (const record of first) batch.set(record.messageId, record);

  const deadline = Date.now() + from.batchWindowMs;
  while (batch.size < from.batchSize && !from.stop.aborted) {
    const left = deadline - Date.now();
    if (left <= 0) break;
    // WaitTimeSeconds is whole seconds; below one second, short polls keep the window exact.
    const waitSeconds = left >= 1_000 ? 1 : 0;
    let received: SQSRecord[];
    try {
      received = await receiveAtOnce(from, from.batchSize - batch.size, waitSeconds);
    } catch (error) {
      // Messages are in hand: deliver them rather than strand them until they reappear.
      if (!from.stop.aborted) from.report(error);
      break;
    }
    for (const record of received) batch.set(record.messageId, record);
    if (received.length === 0 && waitSeconds === 0) {
      await sleep(Math.min(left, SHORT_POLL_PAUSE_MS));
    }
  }
  return [...batch.values()];
}

/**
 * Several receives at once, as the mapping's pollers do: one after another, a batch of 200
 * waited 20 round trips.
 */
async function receiveAtOnce(
  from: Gathering,
  wanted: number,
  waitSeconds: number,
): Promise<SQSRecord[]> {
  const calls = Math.min(RECEIVES_IN_FLIGHT, Math.ceil(wanted / RECEIVE_LIMIT));
  const answers = await Promise.all(
    Array.from({ length: calls }, (_, call) =>
      receive(from, Math.min(RECEIVE_LIMIT, wanted - call * RECEIVE_LIMIT), waitSeconds),
    ),
  );
  return answers.flat();
}

async function receive(from: Gathering, wanted: number, waitSeconds: number): Promise<SQSRecord[]> {
  const { Messages } = await from.sqs.send(
    new ReceiveMessageCommand({
      QueueUrl: from.queueUrl,
      MaxNumberOfMessages: Math.min(wanted, RECEIVE_LIMIT),
      WaitTimeSeconds: waitSeconds,
      MessageSystemAttributeNames: ['All'],
      MessageAttributeNames: ['All'],
    }),
    { abortSignal: from.stop },
  );
  return (Messages ?? []).map((message) => toSqsRecord(message, from));
}
