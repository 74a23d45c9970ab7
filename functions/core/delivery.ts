import { type Chunk, mustFollow, type PlannedItem, type RecordRef } from './batch-plan.ts';
import { describeError } from './errors.ts';
import {
  type CallSituation,
  decideAfterFailure,
  decideItem,
  heldBehind,
  isUnexpected,
  type MessageOutcome,
  NO_TOKEN,
  noCallNow,
  type RunHalt,
  unrepeatable,
} from './failure-policy.ts';
import type {
  Clock,
  ItemResult,
  Logger,
  MauticBatchApi,
  MetricsSink,
  TokenSource,
} from './ports.ts';
import { IN_CALL_RETRY } from './retry-policy.ts';

/** Tunables of one delivery run. */
export interface DeliveryOptions {
  /** Items per Mautic call (Mautic's `api_batch_max_limit`, 200 by default). */
  batchSize: number;
  /** Entities delivered at the same time; a small number protects Mautic. */
  concurrency: number;
  /** Attempts per call for transient failures inside one invocation. */
  maxAttempts: number;
  /** First backoff step; it doubles per attempt up to `maxBackoffMs` (`retry-policy.ts`). */
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
  ...IN_CALL_RETRY,
  deadlineMarginMs: 3_000,
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
 * What a failed call leads to (a token renewal, a split, a backoff, a settlement, a halt of the
 * run) is decided by `failure-policy.ts`; this module carries the decisions out. A token that
 * cannot be had before the deadline leaves the items to the queue (`no_token`).
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

/** The state of one delivery run, and the carrying out of the failure policy's decisions. */
class DeliveryRun {
  readonly outcomes = new Map<string, MessageOutcome>();
  /** The records of items left to the queue: later items that must follow them wait. */
  readonly #waiting: Array<{ record: RecordRef; outcome: MessageOutcome & { kind: 'retry' } }> = [];
  readonly #halt: RunHalt = {};
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
    await this.#deliverInCalls(chunk, ready, this.#limit());
  }

  async #deliverInCalls(chunk: Chunk, items: PlannedItem[], size: number): Promise<void> {
    for (let start = 0; start < items.length; start += size) {
      await this.#deliverItems(chunk, items.slice(start, start + size));
    }
  }

  /** Whether the item must follow an item left to the queue; if so it is left there too. */
  #blocked(item: PlannedItem): boolean {
    const blockers = this.#waiting.filter((earlier) => mustFollow(item.record, earlier.record));
    if (blockers.length === 0) return false;
    this.#settle([item], heldBehind(blockers.map((blocker) => blocker.outcome)));
    return true;
  }

  /** One Mautic call for the items, then whatever the failure policy decides, until settled. */
  async #deliverItems(chunk: Chunk, items: PlannedItem[]): Promise<void> {
    let token: CallSituation['token'] = 'cached';
    let refused: string | undefined;
    for (let attempt = 1; ; ) {
      const stopped = noCallNow(
        this.#halt,
        this.#deps.clock.now(),
        this.#callsUntil(),
        this.#aborted(),
      );
      if (stopped) return this.#settle(items, stopped);
      const accessToken = await this.#accessToken(token, refused);
      if (accessToken === undefined) return this.#settle(items, NO_TOKEN);
      const started = this.#deps.clock.now();
      let results: ItemResult[];
      try {
        results = await this.#call(chunk, items, accessToken);
      } catch (error) {
        this.#record(chunk, items, started, error);
        items = this.#setAsideUnrepeatable(chunk, items, error);
        if (items.length === 0) return;
        const decision = decideAfterFailure(error, this.#situation(chunk, items, attempt, token));
        if (decision.kind === 'renew_token') {
          if (decision.token === 'refused') refused = accessToken;
          token = decision.token;
          continue;
        }
        if (decision.kind === 'call_again') {
          await this.#deps.sleep(decision.afterMs);
          attempt++;
          continue;
        }
        if (decision.kind === 'split') {
          if (decision.learnedLimit !== undefined) this.#learn(decision.learnedLimit);
          return this.#deliverInCalls(chunk, items, decision.size);
        }
        if (decision.alert) this.#deps.logger.error(decision.alert.message, decision.alert.details);
        Object.assign(this.#halt, decision.halt);
        return this.#settle(items, decision.outcome);
      }
      this.#record(chunk, items, started, results);
      return this.#settleResults(chunk, items, results);
    }
  }

  /** The access token for a call; undefined when none can be had before the deadline. */
  async #accessToken(
    token: CallSituation['token'],
    refused: string | undefined,
  ): Promise<string | undefined> {
    try {
      return await this.#deps.tokens.accessToken({
        fresh: token !== 'cached',
        ...(refused === undefined ? {} : { refused }),
        waitUntil: this.#callsUntil(),
      });
    } catch (error) {
      this.#deps.logger.error('No usable Mautic access token', { error: describeError(error) });
      return undefined;
    }
  }

  /** Settles the items that must not be sent again (a create Mautic may have applied); the rest. */
  #setAsideUnrepeatable(chunk: Chunk, items: PlannedItem[], error: unknown): PlannedItem[] {
    const unsafe = unrepeatable(error, chunk.entity, chunk.action, items);
    if (unsafe === undefined) return items;
    this.#settle(unsafe.items, unsafe.outcome);
    return items.filter((item) => !unsafe.items.includes(item));
  }

  #situation(
    chunk: Chunk,
    items: PlannedItem[],
    attempt: number,
    token: CallSituation['token'],
  ): CallSituation {
    return {
      entity: chunk.entity,
      action: chunk.action,
      items: items.length,
      attempt,
      token,
      now: this.#deps.clock.now(),
      callsUntil: this.#callsUntil(),
      halt: this.#halt,
      random: this.#deps.random,
      retry: this.#options,
    };
  }

  /** Settles each item by its result; a merged item refused as invalid goes again event by event. */
  async #settleResults(chunk: Chunk, items: PlannedItem[], results: ItemResult[]): Promise<void> {
    const oneByOne: PlannedItem[] = [];
    items.forEach((item, index) => {
      const decision = decideItem(results[index], item.parts !== undefined);
      if (decision.kind === 'one_by_one') oneByOne.push(item);
      else this.#settle([item], decision.outcome);
    });
    for (const item of oneByOne) {
      // Each event alone, in order, each after the one before.
      for (const part of item.parts ?? []) {
        if (!this.#blocked(part)) await this.#deliverItems(chunk, [part]);
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
        error: describeError(answer),
      });
      if (isUnexpected(answer)) {
        logger.error('Unexpected error delivering to Mautic', { error: describeError(answer) });
      }
    }
  }

  /** Items per call: the configured batch size, or less once Mautic stated its limit. */
  #limit(): number {
    return Math.min(
      this.#options.batchSize,
      this.#deps.learnedLimit.value ?? Number.POSITIVE_INFINITY,
    );
  }

  /** Remembers Mautic's stated batch limit for the rest of the container's life. */
  #learn(limit: number): void {
    this.#deps.learnedLimit.value = Math.min(limit, this.#deps.learnedLimit.value ?? limit);
  }

  /** No call starts after this: the deadline less its margin. */
  #callsUntil(): number {
    return this.#deadline - this.#options.deadlineMarginMs;
  }

  #aborted(): boolean {
    return this.#signal?.aborted ?? false;
  }

  #settle(items: PlannedItem[], outcome: MessageOutcome): void {
    for (const item of items) {
      for (const messageId of item.messageIds) this.outcomes.set(messageId, outcome);
      if (outcome.kind === 'retry') this.#waiting.push({ record: item.record, outcome });
    }
  }
}
