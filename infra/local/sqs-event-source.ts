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
import { setTimeout as sleep } from 'node:timers/promises';
import type {
  DeleteMessageBatchCommand,
  DeleteMessageBatchCommandOutput,
  ReceiveMessageCommand,
  ReceiveMessageCommandOutput,
} from '@aws-sdk/client-sqs';
import type { Context, SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { deleteAll, failedByAnswer } from './event-source-answer.ts';
import { type Gathering, gatherBatch } from './event-source-gather.ts';
import { invokeHandler, lambdaContext, newLogStreamName } from './lambda-context.ts';
import { requireInteger, requireRange } from './option-checks.ts';
import { FIFO_SUFFIX } from './queue-pair.ts';

/** After a failed ReceiveMessage the loop waits this long, so a dead endpoint is not hammered. */
const POLL_ERROR_BACKOFF_MS = 1_000;
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
  /** The invocation's duration, as Lambda bills it (whole milliseconds, rounded up). */
  billedMs: number;
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
  readonly #handler: SqsBatchHandler;
  readonly #functionTimeoutMs: number;
  readonly #functionName: string;
  readonly #onInvoke: ((report: InvokeReport) => void) | undefined;
  readonly #onError: (error: unknown) => void;
  readonly #region: string;
  readonly #accountId: string;
  /** One "execution environment" per source, so one log stream. */
  readonly #logStreamName: string;
  readonly #stopSignal = new AbortController();
  readonly #gathering: Gathering;
  readonly #inFlight = new Set<Promise<unknown>>();
  readonly #slots: Slots;
  readonly #pollers: number;
  #loop: Promise<void> | undefined;
  #stopped: Promise<void> | undefined;

  constructor(options: SqsEventSourceOptions) {
    const { functionTimeoutMs, maxConcurrency } = checkOptions(options);
    this.#sqs = options.sqs;
    this.#queueUrl = options.queueUrl;
    this.#handler = options.handler;
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
    this.#gathering = {
      sqs: options.sqs,
      queueUrl: options.queueUrl,
      queueArn: options.queueArn,
      region: this.#region,
      batchSize: options.batchSize,
      batchWindowMs: options.batchWindowMs,
      stop: this.#stopSignal.signal,
      report: (error) => this.#report(error),
    };
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
      records = this.#stopping ? undefined : await gatherBatch(this.#gathering);
    } finally {
      if (records === undefined) this.#slots.release();
    }
    return records;
  }

  /** Runs the handler in a slot already acquired, frees the slot, then applies the answer. */
  async #invoke(records: SQSRecord[]): Promise<InvokeReport> {
    const messageIds = records.map((record) => record.messageId);
    let outcome: Awaited<ReturnType<typeof invokeHandler>>;
    const started = performance.now();
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
    const billedMs = Math.ceil(performance.now() - started);

    const { failedIds, wholeBatchFailed } = failedByAnswer(outcome, messageIds);
    const undeleted = await deleteAll(
      { sqs: this.#sqs, queueUrl: this.#queueUrl, report: (error) => this.#report(error) },
      records.filter((r) => !failedIds.has(r.messageId)),
    );
    const report: InvokeReport = {
      messageIds,
      deleted: messageIds.filter((id) => !failedIds.has(id) && !undeleted.has(id)),
      failed: messageIds.filter((id) => failedIds.has(id) || undeleted.has(id)),
      wholeBatchFailed,
      billedMs,
    };
    if (!outcome.ok) report.error = outcome.error;
    this.#onInvoke?.(report);
    return report;
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
 * Refuses what Lambda's API refuses for a mapping, so the local stack cannot be set up in a way
 * the cloud could not; answers the defaults filled in.
 */
function checkOptions(options: SqsEventSourceOptions) {
  requireInteger('batchSize', options.batchSize, 1, MAX_BATCH_SIZE);
  requireRange('batchWindowMs', options.batchWindowMs, 0, MAX_BATCH_WINDOW_MS);
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
  return { functionTimeoutMs, maxConcurrency };
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value === '' ? undefined : value;
}
