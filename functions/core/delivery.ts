import type { Chunk, PlannedItem } from './batch-plan.ts';
import {
  MauticAuthError,
  MauticBatchLimitError,
  MauticError,
  MauticRateLimitError,
  MauticResponseError,
  MauticTransientError,
} from './errors.ts';
import type { ItemResult } from './mautic-api.ts';
import type { Clock } from './mautic-http.ts';
import type {
  Logger,
  MauticBatchApi,
  MetricsSink,
  RefreshRequester,
  TokenSource,
} from './ports.ts';

/** What became of one message. */
export type MessageOutcome =
  | { kind: 'delivered'; status: number; id: number }
  /** Refused for good: the message goes to the dead-letter queue with this reason. */
  | { kind: 'rejected'; reason: string; status?: number; message: string }
  /** Try again later through the queue, not before `notBefore` (epoch ms) when set. */
  | { kind: 'retry'; reason: string; notBefore?: number };

/** Tunables of one delivery run. */
export interface DeliveryOptions {
  /** Items per Mautic call (Mautic's `api_batch_max_limit`, 200 by default). */
  batchSize: number;
  /** Entities delivered at the same time; a small number protects Mautic. */
  concurrency: number;
  /** Attempts per call for transient failures inside one invocation. */
  maxAttempts: number;
  /** First backoff step; full jitter over base × 2^attempt, capped at `maxBackoffMs`. */
  baseBackoffMs: number;
  maxBackoffMs: number;
  /** Stop starting work this long before the deadline. */
  deadlineMarginMs: number;
  /** Delay after a 429 whose answer carried no `X-RateLimit-Reset`. */
  defaultRateLimitDelayMs: number;
}

export const DEFAULT_DELIVERY_OPTIONS: DeliveryOptions = {
  batchSize: 200,
  concurrency: 2,
  maxAttempts: 3,
  baseBackoffMs: 200,
  maxBackoffMs: 5_000,
  deadlineMarginMs: 3_000,
  defaultRateLimitDelayMs: 60_000,
};

/** What the delivery talks to. */
export interface DeliveryDeps {
  api: MauticBatchApi;
  tokens: TokenSource;
  refresher: RefreshRequester;
  logger: Logger;
  metrics: MetricsSink;
  clock: Clock;
  sleep: (ms: number) => Promise<void>;
  random: () => number;
  /**
   * The batch limit learned from Mautic's "A max of N entities" answers. It lives as long as
   * the container, so later invocations start at the learned size.
   */
  learnedLimit: { value: number | undefined };
}

/** Items per call whose per-item status means "never going to work". */
const PERMANENT_ITEM_STATUSES = new Set([400, 403, 404, 422]);

/**
 * Delivers planned chunks to Mautic and returns one outcome per message id. It never throws for
 * a Mautic failure: each becomes an outcome. Creates, edits and deletes of one entity run in that
 * order; entities run `concurrency` at a time.
 *
 * - 401: the token is re-read bypassing the cache and the call retried once; a second 401 asks
 *   the refresher for a refresh and leaves the items to the queue.
 * - 429: no more Mautic calls in this run; what is left waits until the rate-limit window resets.
 * - "A max of N entities": the chunk is split to N (at most half) and the limit remembered.
 * - Other transient failures: full-jitter exponential backoff while time remains before `deadline`.
 */
export async function deliverChunks(
  chunks: ReadonlyArray<Chunk>,
  deadline: number,
  deps: DeliveryDeps,
  options: DeliveryOptions = DEFAULT_DELIVERY_OPTIONS,
  signal?: AbortSignal,
): Promise<Map<string, MessageOutcome>> {
  const run = new DeliveryRun(deadline, deps, options, signal);
  const byEntity = new Map<string, Chunk[]>();
  for (const chunk of chunks)
    byEntity.set(chunk.entity, [...(byEntity.get(chunk.entity) ?? []), chunk]);
  const queue = [...byEntity.values()];
  const worker = async () => {
    for (let entityChunks = queue.shift(); entityChunks; entityChunks = queue.shift()) {
      for (const chunk of entityChunks) await run.deliverChunk(chunk);
    }
  };
  await Promise.all(
    Array.from({ length: Math.max(1, Math.min(options.concurrency, queue.length)) }, worker),
  );
  return run.outcomes;
}

class DeliveryRun {
  readonly outcomes = new Map<string, MessageOutcome>();
  #rateLimitedUntil: number | undefined;
  #refreshRequested = false;
  readonly #deadline: number;
  readonly #deps: DeliveryDeps;
  readonly #options: DeliveryOptions;
  readonly #signal: AbortSignal | undefined;

  constructor(
    deadline: number,
    deps: DeliveryDeps,
    options: DeliveryOptions,
    signal: AbortSignal | undefined,
  ) {
    this.#deadline = deadline;
    this.#deps = deps;
    this.#options = options;
    this.#signal = signal;
  }

  async deliverChunk(chunk: Chunk): Promise<void> {
    const limit = Math.min(
      this.#options.batchSize,
      this.#deps.learnedLimit.value ?? Number.POSITIVE_INFINITY,
    );
    for (let start = 0; start < chunk.items.length; start += limit) {
      await this.#deliverItems(chunk, chunk.items.slice(start, start + limit));
    }
  }

  async #deliverItems(chunk: Chunk, items: PlannedItem[]): Promise<void> {
    let freshToken = false;
    for (let attempt = 1; ; attempt++) {
      if (this.#rateLimitedUntil !== undefined) {
        return this.#settle(items, {
          kind: 'retry',
          reason: 'rate_limited',
          notBefore: this.#rateLimitedUntil,
        });
      }
      if (
        this.#deps.clock.now() > this.#deadline - this.#options.deadlineMarginMs ||
        this.#signal?.aborted
      ) {
        return this.#settle(items, { kind: 'retry', reason: 'deadline' });
      }
      let accessToken: string;
      try {
        accessToken = await this.#deps.tokens.accessToken({ fresh: freshToken });
      } catch (error) {
        this.#deps.logger.error('Could not read the Mautic access token', {
          error: describe(error),
        });
        await this.#requestRefresh('token_unavailable');
        return this.#settle(items, { kind: 'retry', reason: 'token_unavailable' });
      }

      const started = this.#deps.clock.now();
      try {
        const results = await this.#call(chunk, items, accessToken);
        this.#record(chunk, items, started, results);
        items.forEach((item, index) => {
          this.#settle([item], outcomeOf(results[index]));
        });
        return;
      } catch (error) {
        this.#record(chunk, items, started, error);
        if (error instanceof MauticBatchLimitError && items.length > 1) {
          const limit = Math.max(1, Math.min(error.limit, Math.ceil(items.length / 2)));
          this.#deps.learnedLimit.value = Math.min(limit, this.#deps.learnedLimit.value ?? limit);
          for (let start = 0; start < items.length; start += limit) {
            await this.#deliverItems(chunk, items.slice(start, start + limit));
          }
          return;
        }
        if (error instanceof MauticAuthError) {
          if (!freshToken) {
            freshToken = true;
            attempt--;
            continue;
          }
          await this.#requestRefresh(`mautic_${error.reason}`);
          return this.#settle(items, { kind: 'retry', reason: `unauthorized_${error.reason}` });
        }
        if (error instanceof MauticRateLimitError) {
          const resetAt =
            error.resetAt ?? this.#deps.clock.now() + this.#options.defaultRateLimitDelayMs;
          this.#rateLimitedUntil = Math.max(this.#rateLimitedUntil ?? 0, resetAt);
          return this.#settle(items, {
            kind: 'retry',
            reason: 'rate_limited',
            notBefore: this.#rateLimitedUntil,
          });
        }
        if (error instanceof MauticError && !error.retryable) {
          return this.#settle(items, {
            kind: 'rejected',
            reason: 'mautic_refused_call',
            ...(error.status === undefined ? {} : { status: error.status }),
            message: error.message,
          });
        }
        let reason = 'unexpected_error';
        if (error instanceof MauticTransientError) reason = `mautic_${error.kind}`;
        else if (error instanceof MauticResponseError) reason = 'mautic_bad_response';
        if (!(error instanceof MauticError)) {
          this.#deps.logger.error('Unexpected error delivering to Mautic', {
            error: describe(error),
          });
        }
        const backoff = this.#backoff(attempt);
        const aborted = error instanceof MauticTransientError && error.kind === 'aborted';
        if (aborted || attempt >= this.#options.maxAttempts || !this.#timeFor(backoff)) {
          return this.#settle(items, { kind: 'retry', reason });
        }
        await this.#deps.sleep(backoff);
      }
    }
  }

  #call(chunk: Chunk, items: PlannedItem[], accessToken: string): Promise<ItemResult[]> {
    const call = { accessToken, signal: this.#signal };
    if (chunk.action === 'create')
      return this.#deps.api.create(
        chunk.entity,
        items.map((item) => item.payload),
        call,
      );
    if (chunk.action === 'edit') {
      return this.#deps.api.edit(
        chunk.entity,
        items.map((item) => ({ ...item.payload, id: item.id ?? 0 })),
        call,
      );
    }
    return this.#deps.api.delete(
      chunk.entity,
      items.map((item) => item.id ?? 0),
      call,
    );
  }

  /** One log line and the call metrics per Mautic call: ids and statuses, never record contents. */
  #record(
    chunk: Chunk,
    items: PlannedItem[],
    started: number,
    answer: ItemResult[] | unknown,
  ): void {
    const durationMs = this.#deps.clock.now() - started;
    const { metrics, logger } = this.#deps;
    metrics.addMetric('MauticCalls', 'Count', 1);
    metrics.addMetric('MauticLatency', 'Milliseconds', durationMs);
    metrics.addMetric('BatchFill', 'Percent', (100 * items.length) / this.#options.batchSize);
    const line = { entity: chunk.entity, action: chunk.action, items: items.length, durationMs };
    if (Array.isArray(answer)) {
      const statuses: Record<string, number> = {};
      for (const result of answer as ItemResult[])
        statuses[result.status] = (statuses[result.status] ?? 0) + 1;
      const ids = (answer as ItemResult[]).flatMap((result) =>
        result.kind === 'delivered' ? [result.id] : [],
      );
      logger.info('Mautic call', { ...line, statuses, ids });
    } else {
      logger.warn('Mautic call failed', { ...line, error: describe(answer) });
    }
  }

  #settle(items: PlannedItem[], outcome: MessageOutcome): void {
    for (const item of items)
      for (const messageId of item.messageIds) this.outcomes.set(messageId, outcome);
  }

  async #requestRefresh(reason: string): Promise<void> {
    if (this.#refreshRequested) return;
    this.#refreshRequested = true;
    try {
      await this.#deps.refresher.requestRefresh(reason);
    } catch (error) {
      this.#deps.logger.warn('Could not ask the token refresher for a refresh', {
        error: describe(error),
      });
    }
  }

  #backoff(attempt: number): number {
    const ceiling = Math.min(
      this.#options.maxBackoffMs,
      this.#options.baseBackoffMs * 2 ** (attempt - 1),
    );
    return Math.floor(this.#deps.random() * ceiling);
  }

  #timeFor(backoffMs: number): boolean {
    return this.#deps.clock.now() + backoffMs < this.#deadline - this.#options.deadlineMarginMs;
  }
}

/** Maps one Mautic item result to the message outcome (contract §2). */
export function outcomeOf(result: ItemResult | undefined): MessageOutcome {
  if (result === undefined) return { kind: 'retry', reason: 'no_result' };
  if (result.kind === 'delivered')
    return { kind: 'delivered', status: result.status, id: result.id };
  if (PERMANENT_ITEM_STATUSES.has(result.status)) {
    return {
      kind: 'rejected',
      reason: 'mautic_rejected_item',
      status: result.status,
      message: result.message,
    };
  }
  return { kind: 'retry', reason: `mautic_item_${result.status}` };
}

/** An error's name and message only: our errors never hold secrets, and no stack is logged. */
function describe(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}
