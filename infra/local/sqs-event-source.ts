/**
 * A local stand-in for the Lambda SQS event source mapping (ESM): it polls a queue, gathers a
 * batch the way the mapping does (batch size, batching window), invokes a batch handler with a
 * Lambda-shaped SQSEvent and Context, and applies the answer with ReportBatchItemFailures
 * semantics (docs/architecture.md, reliability idea 2). The integration tests and the local
 * stack (`npm start`) use it with an SQS emulator (fauxqs) behind an explicit client endpoint.
 *
 * Failed messages are never moved or re-queued here: they are left in flight, reappear after the
 * queue's visibility timeout, and the queue's redrive policy moves them to the dead-letter queue,
 * exactly as with SQS and Lambda.
 */
import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  CreateQueueCommand,
  DeleteMessageBatchCommand,
  type DeleteMessageBatchCommandOutput,
  GetQueueAttributesCommand,
  type Message,
  type MessageAttributeValue,
  ReceiveMessageCommand,
  type ReceiveMessageCommandOutput,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import type {
  Context,
  SQSBatchResponse,
  SQSEvent,
  SQSMessageAttribute,
  SQSMessageAttributes,
  SQSRecord,
  SQSRecordAttributes,
} from 'aws-lambda';
import { invokeHandler, lambdaContext, newLogStreamName } from './lambda-context.ts';

/** SQS keeps at most 10 messages per ReceiveMessage and 10 entries per DeleteMessageBatch. */
const SQS_BATCH_LIMIT = 10;
/** ReceiveMessage calls one batch gathers with at once. */
const RECEIVES_IN_FLIGHT = 5;
/** The long poll that decides whether anything arrived at all. */
const FIRST_RECEIVE_WAIT_SECONDS = 1;
/** Between short polls at the end of a batching window shorter than the 1 s long-poll grain. */
const SHORT_POLL_PAUSE_MS = 50;
/** After a failed ReceiveMessage the loop waits this long, so a dead endpoint is not hammered. */
const POLL_ERROR_BACKOFF_MS = 1_000;
/** Longer than any source queue's retention, so dead letters do not expire first (docs/architecture.md, reliability idea 5). */
const DEAD_LETTER_RETENTION_SECONDS = 1_209_600;
const DEFAULT_FUNCTION_TIMEOUT_MS = 30_000;
const DEFAULT_FUNCTION_NAME = 'batch';
/** Lambda's limits for a mapping and a function. */
const MAX_BATCH_SIZE = 10_000;
/** The most a mapping hands over at once from a FIFO queue. */
export const FIFO_MAX_BATCH_SIZE = 10;
const MAX_BATCH_WINDOW_MS = 300_000;
const MAX_FUNCTION_TIMEOUT_MS = 900_000;
/** More than the local stack allows; a bound so a typo cannot start thousands of pollers. */
const MAX_CONCURRENCY = 1_000;

/**
 * FIFO with high throughput, as the stack makes the events queue and its dead-letter queue: the
 * message groups are records (docs/architecture.md), the senders set every deduplication id.
 */
const FIFO_ATTRIBUTES = {
  FifoQueue: 'true',
  ContentBasedDeduplication: 'false',
  DeduplicationScope: 'messageGroup',
  FifoThroughputLimit: 'perMessageGroupId',
};
const FIFO_SUFFIX = '.fifo';

/**
 * Creates the events queue and its dead-letter queue with a redrive policy, as the stack does:
 * FIFO queues, unless `fifo: false` asks for standard ones.
 *
 * @example
 * const pair = await createQueuePair(sqs, { name: 'events', maxReceiveCount: 5, visibilityTimeoutSeconds: 180 });
 */
export async function createQueuePair(
  sqs: SQSClient,
  options: {
    /**
     * Events queue name; the DLQ is `${name}-dlq`. FIFO queues take the `.fifo` suffix after
     * that (`events.fifo`, `events-dlq.fifo`).
     */
    name: string;
    /** Redrive after this many receives. */
    maxReceiveCount: number;
    visibilityTimeoutSeconds: number;
    /** Default true; false for standard queues. */
    fifo?: boolean;
  },
): Promise<{
  queueUrl: string;
  queueArn: string;
  deadLetterQueueUrl: string;
  deadLetterQueueArn: string;
}> {
  const { name, maxReceiveCount, visibilityTimeoutSeconds, fifo = true } = options;
  requireInteger('maxReceiveCount', maxReceiveCount, 1, 1_000);
  requireInteger('visibilityTimeoutSeconds', visibilityTimeoutSeconds, 0, 43_200);
  const [suffix, kind] = fifo ? [FIFO_SUFFIX, FIFO_ATTRIBUTES] : ['', {}];

  const deadLetterQueueUrl = await createQueue(sqs, `${name}-dlq${suffix}`, {
    ...kind,
    MessageRetentionPeriod: String(DEAD_LETTER_RETENTION_SECONDS),
  });
  const deadLetterQueueArn = await queueArnOf(sqs, deadLetterQueueUrl);
  const queueUrl = await createQueue(sqs, `${name}${suffix}`, {
    ...kind,
    VisibilityTimeout: String(visibilityTimeoutSeconds),
    RedrivePolicy: JSON.stringify({ deadLetterTargetArn: deadLetterQueueArn, maxReceiveCount }),
  });
  const queueArn = await queueArnOf(sqs, queueUrl);
  return { queueUrl, queueArn, deadLetterQueueUrl, deadLetterQueueArn };
}

async function createQueue(
  sqs: SQSClient,
  name: string,
  attributes: Record<string, string>,
): Promise<string> {
  const { QueueUrl } = await sqs.send(
    new CreateQueueCommand({ QueueName: name, Attributes: attributes }),
  );
  if (QueueUrl === undefined) throw new Error(`CreateQueue ${name} answered without a QueueUrl`);
  return QueueUrl;
}

async function queueArnOf(sqs: SQSClient, queueUrl: string): Promise<string> {
  const { Attributes } = await sqs.send(
    new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['QueueArn'] }),
  );
  const arn = Attributes?.QueueArn;
  if (arn === undefined)
    throw new Error(`GetQueueAttributes ${queueUrl} answered without a QueueArn`);
  return arn;
}

export type SqsBatchHandler = (
  event: SQSEvent,
  context: Context,
  // biome-ignore lint/suspicious/noConfusingVoidType: lets handlers typed as aws-lambda's SQSHandler fit
) => Promise<SQSBatchResponse | undefined | void>;

/**
 * The two calls the mapping makes: an SQSClient, `mappingSqsClient` (mapping-sqs.ts), or the
 * fauxqs thread's `mappingSqs()` (fauxqs-thread.ts), which makes them on the emulator's thread, as
 * the Lambda service's pollers are not the function's CPU.
 */
export interface MappingSqs {
  send(
    command: ReceiveMessageCommand,
    options?: { abortSignal?: AbortSignal },
  ): Promise<ReceiveMessageCommandOutput>;
  send(
    command: DeleteMessageBatchCommand,
    options?: { abortSignal?: AbortSignal },
  ): Promise<DeleteMessageBatchCommandOutput>;
}

export interface SqsEventSourceOptions {
  sqs: MappingSqs;
  queueUrl: string;
  queueArn: string;
  handler: SqsBatchHandler;
  /**
   * Max messages per invocation (1..10000; 1..10 from a FIFO queue, as Lambda allows). Like the
   * mapping, a batch larger than 10 is only gathered within a batching window; with
   * `batchWindowMs: 0` an invocation gets what one ReceiveMessage returned (AWS refuses that
   * combination when the mapping is created).
   */
  batchSize: number;
  /**
   * maximumBatchingWindow: gather for at most this long once a first message arrived. Must be 0
   * for a FIFO queue: Lambda has no batching window for FIFO queues.
   */
  batchWindowMs: number;
  /**
   * Drives context.getRemainingTimeInMillis(); default 30_000. As in Lambda, a handler still
   * running at the timeout fails the whole batch (its late answer is ignored).
   */
  functionTimeoutMs?: number;
  /** Default 'batch'. */
  functionName?: string;
  /**
   * Invocations at once (the mapping's maximum concurrency), default 1. `start()` runs this
   * many pollers; each reads the queue only while it holds a free invocation slot, as the
   * mapping stops reading while that many invocations run.
   */
  maxConcurrency?: number;
  /** Called after each invocation with what happened (for logs and tests). */
  onInvoke?: (report: InvokeReport) => void;
  /**
   * Called when a ReceiveMessage or DeleteMessageBatch call fails (the poll loop backs off and
   * goes on; undeleted messages reappear). Default: console.error.
   */
  onError?: (error: unknown) => void;
}

export interface InvokeReport {
  /** In the order handed to the handler. */
  messageIds: string[];
  /** Acknowledged (deleted from the queue). */
  deleted: string[];
  /**
   * Left to reappear after the visibility timeout: those the handler reported failed, the
   * whole batch when it failed, and any the queue would not delete after one retry.
   */
  failed: string[];
  /** Handler threw, timed out, or returned an invalid response (ESM rules). */
  wholeBatchFailed: boolean;
  /** What the handler threw (or the InvocationTimeoutError), if it did. */
  error?: unknown;
}

/**
 * Polls one queue and feeds a batch handler the way the Lambda SQS event source mapping does,
 * with ReportBatchItemFailures on. `start()` runs `maxConcurrency` pollers, each gathering a batch
 * once it holds a free invocation slot (Lambda's mapping stops reading the queue while its
 * maximum concurrency is running); the slot frees as soon as the handler answered, and the
 * deletes run after that, off the slot, so the handler (and the Mautic behind it) is kept busy
 * up to `maxConcurrency`.
 *
 * From a FIFO queue (its ARN ends in `.fifo`) it takes what Lambda's mapping takes: at most 10
 * messages per batch, one ReceiveMessage each, no batching window. Its pollers still run at once,
 * so batches of different message groups are handled concurrently, as in the cloud; a group's
 * order is the queue's to keep.
 *
 * @example
 * const source = new SqsEventSource({ sqs, queueUrl, queueArn, handler, batchSize: 200, batchWindowMs: 1_000 });
 * source.start();
 * process.once('SIGTERM', () => void source.stop());
 */
export class SqsEventSource {
  readonly #sqs: MappingSqs;
  readonly #queueUrl: string;
  readonly #queueArn: string;
  readonly #handler: SqsBatchHandler;
  readonly #batchSize: number;
  readonly #batchWindowMs: number;
  readonly #functionTimeoutMs: number;
  readonly #functionName: string;
  readonly #onInvoke: ((report: InvokeReport) => void) | undefined;
  readonly #onError: (error: unknown) => void;
  readonly #region: string;
  readonly #accountId: string;
  /** One "execution environment" per source, so one log stream. */
  readonly #logStreamName: string;
  readonly #stopSignal = new AbortController();
  readonly #inFlight = new Set<Promise<unknown>>();
  readonly #slots: Slots;
  readonly #pollers: number;
  #loop: Promise<void> | undefined;
  #stopped: Promise<void> | undefined;

  constructor(options: SqsEventSourceOptions) {
    requireInteger('batchSize', options.batchSize, 1, MAX_BATCH_SIZE);
    requireRange('batchWindowMs', options.batchWindowMs, 0, MAX_BATCH_WINDOW_MS);
    // Refused as Lambda's API refuses such a mapping, so the local stack cannot be set up in a
    // way the cloud could not.
    if (options.queueArn.endsWith(FIFO_SUFFIX)) {
      if (options.batchSize > FIFO_MAX_BATCH_SIZE)
        throw new RangeError(
          `batchSize must be at most ${FIFO_MAX_BATCH_SIZE} for a FIFO queue, got ${options.batchSize}`,
        );
      if (options.batchWindowMs > 0)
        throw new RangeError(
          `batchWindowMs must be 0 for a FIFO queue (Lambda has no batching window for FIFO queues), got ${options.batchWindowMs}`,
        );
    }
    const functionTimeoutMs = options.functionTimeoutMs ?? DEFAULT_FUNCTION_TIMEOUT_MS;
    requireRange('functionTimeoutMs', functionTimeoutMs, 1, MAX_FUNCTION_TIMEOUT_MS);
    const maxConcurrency = options.maxConcurrency ?? 1;
    requireInteger('maxConcurrency', maxConcurrency, 1, MAX_CONCURRENCY);

    this.#sqs = options.sqs;
    this.#queueUrl = options.queueUrl;
    this.#queueArn = options.queueArn;
    this.#handler = options.handler;
    this.#batchSize = options.batchSize;
    this.#batchWindowMs = options.batchWindowMs;
    this.#functionTimeoutMs = functionTimeoutMs;
    this.#functionName = options.functionName ?? DEFAULT_FUNCTION_NAME;
    this.#onInvoke = options.onInvoke;
    this.#onError =
      options.onError ??
      ((error) => console.error(`sqs-event-source ${this.#functionName}:`, error));
    // arn:aws:sqs:<region>:<account>:<name>
    const arnParts = options.queueArn.split(':');
    this.#region = nonEmpty(arnParts[3]) ?? 'us-east-1';
    this.#accountId = nonEmpty(arnParts[4]) ?? '000000000000';
    this.#logStreamName = newLogStreamName();
    this.#slots = new Slots(maxConcurrency);
    this.#pollers = maxConcurrency;
  }

  /**
   * Gathers one batch (ReceiveMessage repeatedly, ≤10 per call, until batchSize or
   * batchWindowMs), invokes the handler once, applies the response. Resolves undefined when
   * nothing arrived within a short long-poll (≤1 s), or at once when the source is stopped.
   * Rejects when the first ReceiveMessage fails (nothing is in hand then) or onInvoke throws
   * (after the response was applied).
   */
  pollOnce(): Promise<InvokeReport | undefined> {
    if (this.#stopSignal.signal.aborted) return Promise.resolve(undefined);
    return this.#track(
      (async () => {
        const records = await this.#gatherInSlot().catch((error: unknown) => {
          if (this.#stopping) return undefined;
          throw error;
        });
        if (records === undefined) return undefined;
        return this.#invoke(records);
      })(),
    );
  }

  #track<T>(work: Promise<T>): Promise<T> {
    this.#inFlight.add(work);
    const forget = () => this.#inFlight.delete(work);
    work.then(forget, forget);
    return work;
  }

  /** Polls with `maxConcurrency` pollers until stop(). Throws once the source was stopped. */
  start(): void {
    if (this.#stopSignal.signal.aborted) throw new Error('SqsEventSource: start() after stop()');
    this.#loop ??= Promise.all(Array.from({ length: this.#pollers }, () => this.#run())).then(
      () => undefined,
    );
  }

  /**
   * Stops polling; resolves after the batches in hand (if any) have been handed to the handler
   * and their responses applied. A receive still waiting is cut short (what it took reappears
   * after the visibility timeout); nothing is called after this resolves.
   */
  stop(): Promise<void> {
    this.#stopSignal.abort();
    this.#stopped ??= (async () => {
      await this.#loop;
      await Promise.allSettled([...this.#inFlight]);
    })();
    return this.#stopped;
  }

  get #stopping(): boolean {
    return this.#stopSignal.signal.aborted;
  }

  /**
   * One poller: gathers a batch, waits for a free slot, starts the invocation without waiting
   * for it, and goes back to gathering. A batch in hand when stop() comes is still invoked.
   */
  async #run(): Promise<void> {
    while (!this.#stopping) {
      let records: SQSRecord[] | undefined;
      try {
        records = await this.#gatherInSlot();
      } catch (error) {
        // stop() cuts a waiting long poll short; whatever it had taken reappears, as in SQS.
        if (this.#stopping) break;
        this.#report(error);
        await sleep(POLL_ERROR_BACKOFF_MS, undefined, { signal: this.#stopSignal.signal }).catch(
          () => undefined,
        );
        continue;
      }
      if (records === undefined) continue;
      this.#track(this.#invoke(records)).catch((error: unknown) => this.#report(error));
    }
  }

  /**
   * A batch gathered once an invocation slot is free, the slot kept for its invocation (released
   * when nothing came). With a maximum concurrency, Lambda's mapping stops reading from the queue
   * while that many invocations run, rather than hold a batch for the next free one: held, it
   * would take messages that a running invocation gathering its own batch could have had.
   */
  async #gatherInSlot(): Promise<SQSRecord[] | undefined> {
    await this.#slots.acquire();
    let records: SQSRecord[] | undefined;
    try {
      records = this.#stopping ? undefined : await this.#gather();
    } finally {
      if (records === undefined) this.#slots.release();
    }
    return records;
  }

  /**
   * ReceiveMessage repeatedly (≤10 per call) until batchSize or batchWindowMs. Undefined when
   * nothing arrived within a short long-poll (≤1 s).
   */
  async #gather(): Promise<SQSRecord[] | undefined> {
    const first = await this.#receive(this.#batchSize, FIRST_RECEIVE_WAIT_SECONDS);
    if (first.length === 0) return undefined;
    // Keyed by message id: a message whose visibility ran out during the window can come twice;
    // the handler must see it once, under its newest receipt handle.
    const batch = new Map<string, SQSRecord>();
    for (const record of first) batch.set(record.messageId, record);

    const deadline = Date.now() + this.#batchWindowMs;
    while (batch.size < this.#batchSize && !this.#stopping) {
      const left = deadline - Date.now();
      if (left <= 0) break;
      // WaitTimeSeconds is whole seconds; below one second, short polls keep the window exact.
      const waitSeconds = left >= 1_000 ? 1 : 0;
      // Several receives at once, as the mapping's pollers do: one after another, a batch of
      // 200 waited 20 round trips.
      const wanted = this.#batchSize - batch.size;
      const calls = Math.min(RECEIVES_IN_FLIGHT, Math.ceil(wanted / SQS_BATCH_LIMIT));
      let received: SQSRecord[];
      try {
        const answers = await Promise.all(
          Array.from({ length: calls }, (_, call) =>
            this.#receive(Math.min(SQS_BATCH_LIMIT, wanted - call * SQS_BATCH_LIMIT), waitSeconds),
          ),
        );
        received = answers.flat();
      } catch (error) {
        // Messages are in hand: deliver them rather than strand them until they reappear.
        if (!this.#stopping) this.#report(error);
        break;
      }
      for (const record of received) batch.set(record.messageId, record);
      if (received.length === 0 && waitSeconds === 0) {
        await sleep(Math.min(left, SHORT_POLL_PAUSE_MS));
      }
    }
    return [...batch.values()];
  }

  async #receive(wanted: number, waitSeconds: number): Promise<SQSRecord[]> {
    const { Messages } = await this.#sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: this.#queueUrl,
        MaxNumberOfMessages: Math.min(wanted, SQS_BATCH_LIMIT),
        WaitTimeSeconds: waitSeconds,
        MessageSystemAttributeNames: ['All'],
        MessageAttributeNames: ['All'],
      }),
      { abortSignal: this.#stopSignal.signal },
    );
    return (Messages ?? []).map((message) => this.#toRecord(message));
  }

  #toRecord(message: Message): SQSRecord {
    const { MessageId, ReceiptHandle } = message;
    if (MessageId === undefined || ReceiptHandle === undefined) {
      throw new Error('ReceiveMessage answered a message without MessageId or ReceiptHandle');
    }
    const body = message.Body ?? '';
    const record: SQSRecord = {
      messageId: MessageId,
      receiptHandle: ReceiptHandle,
      body,
      attributes: toRecordAttributes(message.Attributes ?? {}),
      messageAttributes: toLambdaMessageAttributes(message.MessageAttributes ?? {}),
      md5OfBody: message.MD5OfBody ?? createHash('md5').update(body).digest('hex'),
      eventSource: 'aws:sqs',
      eventSourceARN: this.#queueArn,
      awsRegion: this.#region,
    };
    if (message.MD5OfMessageAttributes !== undefined) {
      record.md5OfMessageAttributes = message.MD5OfMessageAttributes;
    }
    return record;
  }

  /** Runs the handler in a slot already acquired, frees the slot, then applies the answer. */
  async #invoke(records: SQSRecord[]): Promise<InvokeReport> {
    const messageIds = records.map((record) => record.messageId);
    let outcome: Awaited<ReturnType<typeof invokeHandler>>;
    try {
      const context = lambdaContext(this.#functionName, this.#functionTimeoutMs, {
        region: this.#region,
        accountId: this.#accountId,
        logStreamName: this.#logStreamName,
      });
      outcome = await invokeHandler(
        this.#handler,
        { Records: records },
        context,
        this.#functionTimeoutMs,
      );
    } finally {
      // The invocation is over when the handler answered: deleting is the mapping's work.
      this.#slots.release();
    }

    let failedIds: ReadonlySet<string>;
    let wholeBatchFailed: boolean;
    if (!outcome.ok) {
      failedIds = new Set(messageIds);
      wholeBatchFailed = true;
    } else {
      const reported = itemFailuresOf(outcome.result, new Set(messageIds));
      wholeBatchFailed = reported === undefined;
      failedIds = reported ?? new Set(messageIds);
    }

    const undeleted = await this.#deleteAll(records.filter((r) => !failedIds.has(r.messageId)));
    const report: InvokeReport = {
      messageIds,
      deleted: messageIds.filter((id) => !failedIds.has(id) && !undeleted.has(id)),
      failed: messageIds.filter((id) => failedIds.has(id) || undeleted.has(id)),
      wholeBatchFailed,
    };
    if (!outcome.ok) report.error = outcome.error;
    this.#onInvoke?.(report);
    return report;
  }

  /**
   * DeleteMessageBatch in groups of 10, all at once; what fails is retried once. Returns the
   * ids left.
   */
  async #deleteAll(records: SQSRecord[]): Promise<Set<string>> {
    let pending = records;
    for (let attempt = 0; attempt < 2 && pending.length > 0; attempt++) {
      const groups: SQSRecord[][] = [];
      for (let start = 0; start < pending.length; start += SQS_BATCH_LIMIT) {
        groups.push(pending.slice(start, start + SQS_BATCH_LIMIT));
      }
      pending = (await Promise.all(groups.map((group) => this.#deleteGroup(group)))).flat();
    }
    return new Set(pending.map((record) => record.messageId));
  }

  async #deleteGroup(group: SQSRecord[]): Promise<SQSRecord[]> {
    try {
      const { Successful = [] } = await this.#sqs.send(
        new DeleteMessageBatchCommand({
          QueueUrl: this.#queueUrl,
          Entries: group.map((record, index) => ({
            Id: String(index),
            ReceiptHandle: record.receiptHandle,
          })),
        }),
      );
      // Whatever the answer does not list as deleted is treated as not deleted.
      const deleted = new Set(Successful.map((entry) => entry.Id));
      return group.filter((_, index) => !deleted.has(String(index)));
    } catch (error) {
      this.#report(error);
      return group;
    }
  }

  #report(error: unknown): void {
    try {
      this.#onError(error);
    } catch {
      // A failing error sink must not stop the poller.
    }
  }
}

/** A counting semaphore: the function's concurrency. */
class Slots {
  #free: number;
  readonly #waiting: Array<() => void> = [];

  constructor(count: number) {
    this.#free = count;
  }

  acquire(): Promise<void> {
    if (this.#free > 0) {
      this.#free--;
      return Promise.resolve();
    }
    return new Promise((resolve) => this.#waiting.push(resolve));
  }

  release(): void {
    const next = this.#waiting.shift();
    if (next) next();
    else this.#free++;
  }
}

/**
 * The ids the handler reported failed, or undefined when the response fails the whole batch
 * (docs/architecture.md, reliability idea 2). Lambda sees the handler's answer as JSON, so it is judged as JSON.
 */
function itemFailuresOf(
  response: unknown,
  batchIds: ReadonlySet<string>,
): ReadonlySet<string> | undefined {
  let value: unknown;
  try {
    const json = JSON.stringify(response);
    value = json === undefined ? null : JSON.parse(json);
  } catch {
    return undefined;
  }
  if (value === null) return new Set();
  if (!isPlainObject(value)) return undefined;
  const failures = value.batchItemFailures;
  if (failures === undefined || failures === null) return new Set();
  if (!Array.isArray(failures)) return undefined;
  const failed = new Set<string>();
  for (const entry of failures) {
    if (!isPlainObject(entry)) return undefined;
    const id = entry.itemIdentifier;
    if (typeof id !== 'string' || id === '' || !batchIds.has(id)) return undefined;
    failed.add(id);
  }
  return failed;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function toRecordAttributes(attributes: Partial<Record<string, string>>): SQSRecordAttributes {
  const record: SQSRecordAttributes = {
    ApproximateReceiveCount: attributes.ApproximateReceiveCount ?? '1',
    SentTimestamp: attributes.SentTimestamp ?? '',
    SenderId: attributes.SenderId ?? '',
    ApproximateFirstReceiveTimestamp: attributes.ApproximateFirstReceiveTimestamp ?? '',
  };
  for (const [name, value] of Object.entries(attributes)) {
    if (value !== undefined && !(name in record)) {
      (record as unknown as Record<string, string>)[name] = value;
    }
  }
  return record;
}

/** The SDK's MessageAttributes in the Lambda event's shape (binary values as base64). */
function toLambdaMessageAttributes(
  attributes: Record<string, MessageAttributeValue>,
): SQSMessageAttributes {
  const result: SQSMessageAttributes = {};
  for (const [name, value] of Object.entries(attributes)) {
    const attribute: SQSMessageAttribute = {
      stringListValues: value.StringListValues ?? [],
      binaryListValues: (value.BinaryListValues ?? []).map(base64),
      dataType: value.DataType ?? 'String',
    };
    if (value.StringValue !== undefined) attribute.stringValue = value.StringValue;
    if (value.BinaryValue !== undefined) attribute.binaryValue = base64(value.BinaryValue);
    result[name] = attribute;
  }
  return result;
}

function base64(bytes: Uint8Array): string {
  return Buffer.from(bytes).toString('base64');
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value === '' ? undefined : value;
}

function requireInteger(name: string, value: number, min: number, max: number): void {
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new RangeError(`${name} must be an integer from ${min} to ${max}, got ${value}`);
  }
}

function requireRange(name: string, value: number, min: number, max: number): void {
  if (!Number.isFinite(value) || value < min || value > max) {
    throw new RangeError(`${name} must be a number from ${min} to ${max}, got ${value}`);
  }
}
