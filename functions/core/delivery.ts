import { type Chunk, mustFollow, type PlannedItem, type RecordRef } from './batch-plan.ts';
import {
  MauticAuthError,
  MauticBatchLimitError,
  MauticError,
  MauticPermanentError,
  MauticRateLimitError,
  MauticResponseError,
  MauticTransientError,
  possiblyApplied,
} from './errors.ts';
import type {
  Clock,
  ItemResult,
  Logger,
  MauticBatchApi,
  MetricsSink,
  TokenSource,
} from './ports.ts';

/** What became of one message. */
export type MessageOutcome =
  | { kind: 'delivered'; status: number; id: number }
  /** Refused for good: the message goes to the dead-letter queue with this reason. */
  | { kind: 'rejected'; reason: string; status?: number; message: string }
  /**
   * Try again later through the queue, not before `notBefore` (epoch ms) when set. `status` and
   * `message` tell the last failure, for the dead letter if the retry horizon runs out.
   */
  | { kind: 'retry'; reason: string; notBefore?: number; status?: number; message?: string };

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
  /** Waits (bounded by the deadline) for the refresher when the token is missing or refused. */
  tokens: TokenSource;
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
/** Per-item statuses that judge an item's content: a merged item so refused is split up. */
const INVALID_ITEM_STATUSES = new Set([400, 422]);

/**
 * Delivers planned chunks to Mautic and returns one outcome per message id. It never throws for
 * a Mautic failure: each becomes an outcome. The chunks of one entity run one after the other,
 * in plan order (its phases); entities run `concurrency` at a time.
 *
 * - Order per record: an item that must follow an event left to the queue (retry) is left to
 *   the queue too, untried, so that the next receive sees them in the same order.
 * - A merged item that Mautic refuses as invalid (per-item 400/422) is sent again event by
 *   event, in arrival order, so each event gets what it would have got alone.
 * - A create that Mautic may have applied without saying so (a 2xx it cannot read, a timeout
 *   or a dropped connection after sending) is refused with `ambiguous_result` rather than sent
 *   again, unless it is a contact with an email, which Mautic upserts.
 *
 * - 401: the token is re-read bypassing the cache and the call retried; a second 401 waits for a
 *   newer token from the refresher and retries; a third leaves this and every later item to the
 *   queue. A token that cannot be had before the deadline leaves the items to it too (`no_token`).
 * - 429: no more Mautic calls in this run; what is left waits until the rate-limit window resets.
 * - "A max of N entities": the chunk is split to N (at most half) and the limit remembered.
 * - A whole-call 400/422/413: the chunk is halved until the item at fault is refused alone.
 *   Mautic's 404 for an unknown path refuses the events (the entity does not exist). Any other
 *   whole-call refusal (403, redirect, 405) is configuration: logged, items left to the queue.
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
  /** The records of items left to the queue: later items that must follow them wait. */
  readonly #waiting: Array<{ record: RecordRef; outcome: MessageOutcome & { kind: 'retry' } }> = [];
  #rateLimitedUntil: number | undefined;
  #unauthorized: string | undefined;
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
    // Items of one chunk never follow each other, so one check at its start covers them all.
    const ready = chunk.items.filter((item) => !this.#blocked(item));
    const limit = this.#limit();
    for (let start = 0; start < ready.length; start += limit) {
      await this.#deliverItems(chunk, ready.slice(start, start + limit));
    }
  }

  /** Whether the item must follow an item left to the queue; if so it is left there too. */
  #blocked(item: PlannedItem): boolean {
    const blockers = this.#waiting.filter((earlier) => mustFollow(item.record, earlier.record));
    if (blockers.length === 0) return false;
    // Not back before what it waits for (e.g. a rate-limited event), as far as the queue allows,
    // and with the failure it waits behind, for the dead letter if the horizon runs out.
    const notBefore = Math.max(...blockers.map((blocker) => blocker.outcome.notBefore ?? 0));
    const first = blockers[0]?.outcome;
    this.#settle([item], {
      kind: 'retry',
      reason: 'earlier_event_pending',
      ...(notBefore > 0 ? { notBefore } : {}),
      message: `An earlier event of the same record went back to the queue (${first?.reason}${first?.message ? `: ${first.message}` : ''})`,
    });
    return true;
  }

  async #deliverItems(chunk: Chunk, items: PlannedItem[]): Promise<void> {
    let freshToken = false;
    let refused: string | undefined;
    let attempt = 1;
    for (;;) {
      const stopped = this.#stopped();
      if (stopped) return this.#settle(items, stopped);
      let accessToken: string;
      try {
        accessToken = await this.#deps.tokens.accessToken({
          fresh: freshToken,
          ...(refused === undefined ? {} : { refused }),
          waitUntil: this.#deadline - this.#options.deadlineMarginMs,
        });
      } catch (error) {
        this.#deps.logger.error('No usable Mautic access token', { error: describe(error) });
        return this.#settle(items, { kind: 'retry', reason: 'no_token' });
      }

      const started = this.#deps.clock.now();
      let results: ItemResult[];
      try {
        results = await this.#call(chunk, items, accessToken);
      } catch (error) {
        this.#record(chunk, items, started, error);
        if (error instanceof MauticAuthError && !freshToken) {
          freshToken = true;
          continue;
        }
        if (error instanceof MauticAuthError && refused === undefined) {
          refused = accessToken;
          continue;
        }
        if (chunk.action === 'create' && possiblyApplied(error)) {
          // Sending again could create these records twice: only upserted contacts may go again.
          const unsafe = items.filter((item) => !isUpserted(chunk.entity, item));
          this.#settle(unsafe, {
            kind: 'rejected',
            reason: 'ambiguous_result',
            message: `Mautic may have created this record; its answer cannot tell (${describe(error)})`,
          });
          items = items.filter((item) => isUpserted(chunk.entity, item));
          if (items.length === 0) return;
        }
        const next = await this.#afterFailure(chunk, items, error, attempt);
        if (next === 'again') {
          attempt++;
          continue;
        }
        return;
      }
      this.#record(chunk, items, started, results);
      const invalidMerged: PlannedItem[] = [];
      items.forEach((item, index) => {
        const result = results[index];
        if (item.parts && result?.kind === 'rejected' && INVALID_ITEM_STATUSES.has(result.status))
          invalidMerged.push(item);
        else this.#settle([item], outcomeOf(result));
      });
      for (const item of invalidMerged) await this.#deliverOneByOne(chunk, item.parts ?? []);
      return;
    }
  }

  /** Sends the events of a refused merged item alone, in order, each after the one before. */
  async #deliverOneByOne(chunk: Chunk, parts: PlannedItem[]): Promise<void> {
    for (const part of parts) {
      if (!this.#blocked(part)) await this.#deliverItems(chunk, [part]);
    }
  }

  /** Why no more calls are made in this run, if none are. */
  #stopped(): MessageOutcome | undefined {
    if (this.#rateLimitedUntil !== undefined) {
      return { kind: 'retry', reason: 'rate_limited', notBefore: this.#rateLimitedUntil };
    }
    // A token refused even after the refresher renewed it: further calls would only fail.
    if (this.#unauthorized !== undefined) return { kind: 'retry', reason: this.#unauthorized };
    if (
      this.#deps.clock.now() > this.#deadline - this.#options.deadlineMarginMs ||
      this.#signal?.aborted
    ) {
      return { kind: 'retry', reason: 'deadline' };
    }
    return undefined;
  }

  /**
   * Settles or splits the items after a failed call, or answers 'again' when a retry after a
   * backoff is worth it.
   */
  async #afterFailure(
    chunk: Chunk,
    items: PlannedItem[],
    error: unknown,
    attempt: number,
  ): Promise<'again' | 'done'> {
    const split = async (size: number) => {
      for (let start = 0; start < items.length; start += size) {
        await this.#deliverItems(chunk, items.slice(start, start + size));
      }
      return 'done' as const;
    };
    if (error instanceof MauticBatchLimitError && error.limit < items.length) {
      const limit = Math.max(1, Math.min(error.limit, Math.ceil(items.length / 2)));
      this.#deps.learnedLimit.value = Math.min(limit, this.#deps.learnedLimit.value ?? limit);
      return split(limit);
    }
    if (error instanceof MauticAuthError) {
      this.#unauthorized = `unauthorized_${error.reason}`;
      this.#settle(items, { kind: 'retry', reason: this.#unauthorized });
      return 'done';
    }
    if (error instanceof MauticRateLimitError) {
      const resetAt =
        error.resetAt ?? this.#deps.clock.now() + this.#options.defaultRateLimitDelayMs;
      this.#rateLimitedUntil = Math.max(this.#rateLimitedUntil ?? 0, resetAt);
      this.#settle(items, {
        kind: 'retry',
        reason: 'rate_limited',
        notBefore: this.#rateLimitedUntil,
        status: 429,
        message: describe(error),
      });
      return 'done';
    }
    if (error instanceof MauticPermanentError) {
      // A 400/422 or 413 of the whole call is about its content: halve it to find the item at
      // fault, and refuse that item alone.
      if (error.status === 400 || error.status === 422 || error.status === 413) {
        if (items.length > 1) return split(Math.ceil(items.length / 2));
        this.#settle(items, {
          kind: 'rejected',
          reason: 'mautic_refused_item',
          status: error.status,
          message: error.message,
        });
        return 'done';
      }
      // Mautic's own 404 for a path it has no route for: the entity does not exist.
      if (error.status === 404 && error.mauticMessage?.startsWith('Requested URL not found')) {
        this.#settle(items, {
          kind: 'rejected',
          reason: 'mautic_unknown_entity',
          status: 404,
          message: error.message,
        });
        return 'done';
      }
      // Anything else (403, another 404, a redirect, 405) is the relay's configuration or
      // Mautic's permissions, not the events: keep them on the queue and say so loudly.
      this.#deps.logger.error(
        "Mautic refused the call; check the base URL and the API user's permissions",
        {
          entity: chunk.entity,
          action: chunk.action,
          status: error.status,
          error: describe(error),
        },
      );
      this.#settle(items, { kind: 'retry', reason: `mautic_refused_${error.status}` });
      return 'done';
    }
    let reason = 'unexpected_error';
    if (error instanceof MauticTransientError) reason = `mautic_${error.kind}`;
    else if (error instanceof MauticResponseError) reason = 'mautic_bad_response';
    else if (error instanceof MauticBatchLimitError) reason = 'mautic_batch_limit';
    else
      this.#deps.logger.error('Unexpected error delivering to Mautic', { error: describe(error) });
    const backoff = this.#backoff(attempt);
    const aborted = error instanceof MauticTransientError && error.kind === 'aborted';
    if (aborted || attempt >= this.#options.maxAttempts || !this.#timeFor(backoff)) {
      this.#settle(items, {
        kind: 'retry',
        reason,
        ...(error instanceof MauticError && error.status !== undefined
          ? { status: error.status }
          : {}),
        message: describe(error),
      });
      return 'done';
    }
    await this.#deps.sleep(backoff);
    return 'again';
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
    metrics.addMetric('BatchFill', 'Percent', (100 * items.length) / this.#limit());
    const line = { entity: chunk.entity, action: chunk.action, items: items.length, durationMs };
    if (Array.isArray(answer)) {
      const statuses: Record<string, number> = {};
      for (const result of answer as ItemResult[])
        statuses[result.status] = (statuses[result.status] ?? 0) + 1;
      const ids = (answer as ItemResult[]).flatMap((result) =>
        result.kind === 'delivered' ? [result.id] : [],
      );
      logger.info('Mautic call', { event: 'mautic_call', ...line, statuses, ids });
    } else {
      logger.warn('Mautic call failed', {
        event: 'mautic_call_failed',
        ...line,
        error: describe(answer),
      });
    }
  }

  /** Items per call: the configured batch size, or less once Mautic stated its limit. */
  #limit(): number {
    return Math.min(
      this.#options.batchSize,
      this.#deps.learnedLimit.value ?? Number.POSITIVE_INFINITY,
    );
  }

  #settle(items: PlannedItem[], outcome: MessageOutcome): void {
    for (const item of items) {
      for (const messageId of item.messageIds) this.outcomes.set(messageId, outcome);
      if (outcome.kind === 'retry') this.#waiting.push({ record: item.record, outcome });
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

/** Whether Mautic upserts the item's create (a contact with an email), so a repeat is harmless. */
function isUpserted(entity: string, item: PlannedItem): boolean {
  const email = item.payload.email;
  return entity === 'contacts' && typeof email === 'string' && email.trim() !== '';
}

/** Maps one Mautic item result to the message outcome (contract §2). */
function outcomeOf(result: ItemResult | undefined): MessageOutcome {
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
