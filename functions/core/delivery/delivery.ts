import { describeError } from '../errors.ts';
import { linksCompaniesInBulk } from '../mautic-versions.ts';
import type { CallOptions, ItemResult } from '../ports.ts';
import {
  ambiguousAction,
  decideItem,
  isUpserted,
  surelyNotApplied,
  unrepeatable,
} from './answer-policy.ts';
import { type Chunk, mustFollow, type PlannedItem, type RecordRef } from './batch-plan.ts';
import { callTimeoutMs, itemsThatFit, notSent } from './call-budget.ts';
import { ContactReferences, resolvedItems } from './contact-refs.ts';
import { deliverCreates } from './create-markers.ts';
import {
  type Attempt,
  accessTokenFor,
  byEntity,
  type CallKind,
  type CallRecord,
  DEFAULT_DELIVERY_OPTIONS,
  type DeliveryDeps,
  type DeliveryOptions,
  deliverOnce,
  MAX_WAITS_PER_CALL,
  perMessage,
  recordCall,
  recordLookup,
  sendChunk,
  waitedOut,
  withCall,
} from './delivery-calls.ts';
import {
  type CallSituation,
  type Decision,
  decideAfterFailure,
  heldBehind,
  lookupRefused,
  type MessageOutcome,
  NO_TOKEN,
  narrowDown,
  noCallNow,
  type RunHalt,
} from './failure-policy.ts';
import { gatedCall, probeItem } from './health-gate.ts';

/**
 * Delivers planned chunks to Mautic, one outcome per message id (never thrown). An entity's
 * chunks run in plan order, entities `concurrency` at a time. It carries out `failure-policy.ts`:
 * order per record (an item that must follow an event left to the queue goes back untried),
 * merged items refused as invalid sent one by one, creates Mautic may have applied never sent
 * again, a time Mautic named waited for, a repeated 5xx narrowed down to its item, calls past
 * Mautic's health (`gatedCall`), `match` contacts per chunk, bulk actions, calls named.
 */
export async function deliverChunks(
  chunks: ReadonlyArray<Chunk>,
  deadline: number,
  deps: DeliveryDeps,
  options: DeliveryOptions = DEFAULT_DELIVERY_OPTIONS,
  signal?: AbortSignal,
): Promise<Map<string, MessageOutcome>> {
  const run = new DeliveryRun(chunks, deadline, deps, options, signal);
  await byEntity(chunks, options.concurrency, (chunk) => run.deliverChunk(chunk));
  return run.outcomes;
}

/** The state of one delivery run, and the carrying out of the failure policy's decisions. */
class DeliveryRun {
  readonly outcomes = new Map<string, MessageOutcome>();
  /** The records of items left to the queue: later items that must follow them wait. */
  readonly #waiting: Array<{ record: RecordRef; outcome: MessageOutcome & { kind: 'retry' } }> = [];
  readonly #halt: RunHalt = {};
  readonly #gate: { mayWait: boolean; callsUntil: number; leaseUntil: number };
  readonly #refs: ContactReferences;
  readonly #deadline: number;
  readonly #deps: DeliveryDeps;
  readonly #options: DeliveryOptions;
  readonly #signal: AbortSignal | undefined;

  constructor(
    chunks: ReadonlyArray<Chunk>,
    deadline: number,
    deps: DeliveryDeps,
    options: DeliveryOptions,
    signal: AbortSignal | undefined,
  ) {
    this.#refs = new ContactReferences(chunks);
    this.#deadline = deadline;
    this.#deps = deps;
    this.#options = options;
    this.#signal = signal;
    this.#gate = { mayWait: true, callsUntil: this.#callsUntil(), leaseUntil: deadline };
    // A time Mautic named in an earlier run of this container still holds, never past the cap.
    const [named, now] = [deps.namedPause?.until, deps.clock.now()];
    if (named !== undefined && named > now)
      this.#halt.rateLimitedUntil = Math.min(named, now + options.maxNamedPauseMs);
  }

  async deliverChunk(chunk: Chunk): Promise<void> {
    // Items of one chunk never follow each other, so one check at its start covers them all.
    let ready = chunk.items.filter((item) => !this.#blocked(item));
    if (ready.some((item) => item.match !== undefined)) ready = await this.#resolve(chunk, ready);
    // No two items of a chunk name one contact: each kind of reference has its own phase.
    await this.#deliverAction(chunk, ready);
    this.#refs.after(chunk, chunk.items, this.outcomes);
  }

  /** The chunk's action, in bulk where Mautic has a bulk form, else one call per event. */
  async #deliverAction(chunk: Chunk, items: PlannedItem[]): Promise<void> {
    const { action } = chunk;
    const inCalls = (some: PlannedItem[]) => this.#deliverInCalls(chunk, some, this.#limit());
    if (action === 'create') {
      const settle = (item: PlannedItem, outcome: MessageOutcome) => this.#settle([item], outcome);
      const run = { send: inCalls, settle, outcomes: this.outcomes };
      return deliverCreates(this.#deps, chunk.entity, items, run);
    }
    if (['edit', 'delete', 'addDoNotContact', 'removeDoNotContact'].includes(action))
      return inCalls(items);
    if (action === 'addToSegment') {
      for (const segment of Map.groupBy(items, (item) => item.fields?.segmentId).values())
        await inCalls(segment);
      return;
    }
    for (const [index, item] of items.entries()) {
      // Company links go in bulk once Mautic named a version that has it (its first answer may).
      if (action === 'linkCompany' && linksCompaniesInBulk(this.#deps.mauticVersion?.value))
        return this.#deliverInCalls(chunk, items.slice(index), this.#limit());
      if (action === 'addPoints') await this.#deliverOnce(chunk, item);
      else await this.#deliverItems(chunk, [item]);
    }
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

  /**
   * Gives each item named by `match` its contact's id, looking up what the run has not resolved
   * yet; settles the items whose reference names no contact or several. Returns the rest.
   */
  async #resolve(chunk: Chunk, items: PlannedItem[]): Promise<PlannedItem[]> {
    const unresolved = items.filter((item) => this.#refs.unresolved(item));
    if (unresolved.length > 0) {
      const byField = this.#refs.toLookUp(unresolved);
      const values = [...byField.values()].reduce((sum, list) => sum + list.length, 0);
      const lookUp = (call: CallOptions) => this.#refs.lookUp(this.#deps.api, byField, call);
      const attempt = await this.#attempt(chunk, unresolved, lookUp, 'lookup');
      if (attempt.kind === 'split') this.#settle(attempt.items, lookupRefused());
      if (attempt.kind === 'answered') recordLookup(this.#deps, attempt.started, values);
    }
    return resolvedItems(this.#refs, chunk.action, items, (item, outcome) =>
      this.#settle([item], outcome),
    );
  }

  /** A non-idempotent action, at most once per event (`deliverOnce`). */
  async #deliverOnce(chunk: Chunk, item: PlannedItem): Promise<void> {
    const early = await deliverOnce(this.#deps, item.ledgerKey ?? '', chunk.action, async () => {
      await this.#deliverItems(chunk, [item], 'once');
      return this.outcomes.get(item.messageIds[0] ?? '');
    });
    if (early) this.#settle([item], early);
  }

  /** One Mautic call for the items, then whatever the failure policy decides, until settled. */
  async #deliverItems(chunk: Chunk, items: PlannedItem[], kind: CallKind = 'write'): Promise<void> {
    const probing = probeItem(this.#deps, chunk, items);
    if (probing !== undefined) {
      await this.#deliverItems(chunk, [probing.probe], kind);
      return this.#deliverItems(chunk, probing.rest, kind);
    }
    await this.#follow(chunk, await this.#attempt(chunk, items, this.#send(chunk), kind), kind);
  }

  /** An attempt's sequel: smaller calls, narrowed down, one item first, or its answer settled. */
  async #follow(chunk: Chunk, attempt: Attempt<ItemResult[]>, kind: CallKind): Promise<void> {
    if (attempt.kind === 'split') {
      // Mautic's stated batch limit, kept for the rest of the container's life.
      const [stated, learned] = [attempt.decision.learnedLimit, this.#deps.learnedLimit];
      if (stated !== undefined) learned.value = Math.min(stated, learned.value ?? stated);
      return this.#deliverInCalls(chunk, attempt.items, attempt.decision.size);
    }
    if (attempt.kind === 'narrow') return this.#narrow(chunk, attempt.items, attempt.outcome);
    if (attempt.kind === 'probe_one') return this.#deliverItems(chunk, attempt.items, kind);
    await this.#answered(chunk, attempt);
  }

  #send(chunk: Chunk) {
    return (call: CallOptions, items: PlannedItem[]) => sendChunk(this.#deps, chunk, items, call);
  }

  /** An answered call: logged, timed per item (for the size and timeout of later calls), settled. */
  async #answered(chunk: Chunk, attempt: Attempt<ItemResult[]>): Promise<void> {
    if (attempt.kind !== 'answered') return;
    const { items, started, answer } = attempt;
    const call = recordCall(this.#deps, chunk, items, started, answer, this.#limit());
    this.#deps.itemTime?.observe(items.length, this.#deps.clock.now() - started);
    await this.#settleResults(chunk, items, answer, call);
  }

  /** A call failed with a 5xx twice: narrowed down to the items at fault (`narrowDown`). */
  #narrow(chunk: Chunk, items: PlannedItem[], outcome: MessageOutcome): Promise<void> {
    return narrowDown(items, outcome, {
      tryOnce: async (part) => {
        const attempt = await this.#attempt(chunk, part, this.#send(chunk), 'write', true);
        if (attempt.kind === 'narrow') return attempt.outcome;
        await this.#follow(chunk, attempt, 'write');
        return undefined;
      },
      settle: (part, failure) => this.#settle(part, failure),
      outage: () => this.#deps.health?.holding(),
    });
  }

  /**
   * Makes one call until it is answered or the failure policy settles (or splits, narrows) the
   * items. A `once` call's failure that may have been applied settles them `ambiguous_result`; a
   * `lookup` refused is never the events' fault: back to the queue, not the dead letters. A time
   * Mautic named is waited for here when near (`wait`); a due probe takes one item (`probe_one`).
   */
  async #attempt<T>(
    chunk: Chunk,
    items: PlannedItem[],
    send: (call: CallOptions, items: PlannedItem[]) => Promise<T>,
    kind: CallKind,
    narrowing = false,
  ): Promise<Attempt<T>> {
    let token: CallSituation['token'] = 'cached';
    let refused: string | undefined;
    for (let attempt = 1, waits = 0; ; ) {
      const now = this.#deps.clock.now();
      const aborted = this.#signal?.aborted ?? false;
      const stopped = noCallNow(this.#halt, now, this.#callsUntil(), aborted, this.#options);
      if (stopped?.kind === 'wait' && waits++ < MAX_WAITS_PER_CALL) {
        await this.#deps.sleep(stopped.untilMs - now);
        continue;
      }
      if (stopped)
        return this.#settled(items, stopped.kind === 'wait' ? waitedOut(this.#halt) : stopped);
      const accessToken = await this.#accessToken(token, refused);
      if (accessToken === undefined) return this.#settled(items, NO_TOKEN);
      if (kind === 'write') items = this.#fitToTime(items);
      if (items.length === 0) return { kind: 'settled' };
      const call = await gatedCall(this.#deps, { items, kind, run: this.#gate }, () =>
        send(this.#callOptions(accessToken, items.length), items),
      );
      if (call.kind === 'held') return this.#settled(items, call.outcome);
      if (call.kind === 'probe_one') return { kind: 'probe_one', items };
      if (call.kind === 'answered') return { ...call, items };
      const { error, started } = call;
      recordCall(this.#deps, chunk, items, started, error, this.#limit());
      if (kind === 'once' && !surelyNotApplied(error)) {
        return this.#settled(
          items,
          ambiguousAction(chunk.action, `its answer cannot tell (${describeError(error)})`),
        );
      }
      items = this.#setAsideUnrepeatable(chunk, items, error);
      if (items.length === 0) return { kind: 'settled' };
      const situation = { items: items.length, attempt, token, narrowing };
      const decision = decideAfterFailure(error, this.#situation(chunk, situation));
      if (decision.kind === 'renew_token') {
        if (decision.token === 'refused') refused = accessToken;
        token = decision.token;
      } else if (decision.kind === 'call_again') {
        await this.#deps.sleep(decision.afterMs);
        attempt++;
      } else if (decision.kind === 'wait') {
        // Counted: a time named that is already past must not loop the call.
        if (waits++ >= MAX_WAITS_PER_CALL) return this.#settled(items, waitedOut(this.#halt));
        this.#pause(decision.halt);
      } else if (decision.kind === 'split' || decision.kind === 'narrow') {
        return decision.kind === 'split'
          ? { kind: 'split', decision, items }
          : { kind: 'narrow', outcome: decision.outcome, items };
      } else {
        return this.#carryOut(decision, items, kind);
      }
    }
  }

  /** Settles the items as the policy decided, halting the run and alerting as it says. */
  #carryOut(decision: Decision & { kind: 'settle' }, items: PlannedItem[], kind: CallKind) {
    if (decision.alert) this.#deps.logger.error(decision.alert.message, decision.alert.details);
    this.#pause(decision.halt ?? {});
    const { outcome } = decision;
    return this.#settled(
      items,
      kind === 'lookup' && outcome.kind === 'rejected' ? lookupRefused(outcome) : outcome,
    );
  }

  /** Halts the run; a time Mautic named holds for the container's later runs too. */
  #pause(halt: RunHalt): void {
    Object.assign(this.#halt, halt);
    const named = this.#deps.namedPause;
    if (named && halt.rateLimitedUntil !== undefined)
      named.until = Math.max(named.until ?? 0, halt.rateLimitedUntil);
  }

  #settled(items: PlannedItem[], outcome: MessageOutcome): Attempt<never> {
    this.#settle(items, outcome);
    return { kind: 'settled' };
  }

  /** The access token for a call; undefined when none can be had before the deadline. */
  #accessToken(token: CallSituation['token'], refused: string | undefined) {
    return accessTokenFor(this.#deps, { token, refused, waitUntil: this.#callsUntil() });
  }

  /** What a call can carry to end in time at Mautic's pace; the rest go back unsent, at once. */
  #fitToTime(items: PlannedItem[]): PlannedItem[] {
    const now = this.#deps.clock.now();
    const msPerItem = this.#deps.itemTime?.msPerItem;
    const fit = itemsThatFit(this.#callsUntil() - now, msPerItem, items.length);
    if (fit < items.length) this.#settle(items.slice(fit), notSent(now));
    return items.slice(0, fit);
  }

  /** A call's token, the run's signal, and a timeout from Mautic's pace (`callTimeoutMs`). */
  #callOptions(accessToken: string, items: number): CallOptions {
    const { itemTime } = this.#deps;
    const timeoutMs = callTimeoutMs(items, itemTime?.msPerItem, this.#options.callTimeoutCapMs);
    return { accessToken, signal: this.#signal, timeoutMs };
  }

  /** Settles the items that must not be sent again (a create Mautic may have applied); the rest. */
  #setAsideUnrepeatable(chunk: Chunk, items: PlannedItem[], error: unknown): PlannedItem[] {
    const mauticVersion = this.#deps.mauticVersion?.value;
    const unsafe = unrepeatable(error, { ...chunk, mauticVersion }, items);
    if (unsafe === undefined) return items;
    this.#settle(unsafe.items, unsafe.outcome);
    return items.filter((item) => !unsafe.items.includes(item));
  }

  #situation(chunk: Chunk, call: Pick<CallSituation, 'items' | 'attempt' | 'token' | 'narrowing'>) {
    return {
      ...call,
      entity: chunk.entity,
      action: chunk.action,
      now: this.#deps.clock.now(),
      callsUntil: this.#callsUntil(),
      halt: this.#halt,
      random: this.#deps.random,
      retry: this.#options,
    };
  }

  /** Settles each item by its result; a merged item refused as invalid goes again event by event. */
  async #settleResults(chunk: Chunk, items: PlannedItem[], answer: ItemResult[], call: CallRecord) {
    const oneByOne: PlannedItem[] = [];
    const creates = chunk.action === 'create';
    items.forEach((item, index) => {
      const decision = decideItem(answer[index], {
        merged: item.parts !== undefined,
        unrepeatable:
          creates && !isUpserted(chunk.entity, item.payload, this.#deps.mauticVersion?.value),
        perPair: chunk.action === 'linkCompany',
      });
      if (decision.kind === 'one_by_one') oneByOne.push(item);
      else this.#carryOut(withCall(decision, call), [item], 'write');
    });
    for (const item of oneByOne) {
      // Each event alone, in order, each after the one before.
      for (const part of item.parts ?? []) {
        if (!this.#blocked(part)) await this.#deliverItems(chunk, [part]);
      }
    }
  }

  /** Items per call: the configured batch size, or less once Mautic stated its limit. */
  #limit(): number {
    return Math.min(this.#options.batchSize, this.#deps.learnedLimit.value ?? Infinity);
  }

  /** No call starts after this: the deadline less its margin. */
  #callsUntil(): number {
    return this.#deadline - this.#options.deadlineMarginMs;
  }

  #settle(items: PlannedItem[], settled: MessageOutcome): void {
    const outcome = this.#deps.health?.heldIfOpen(settled) ?? settled;
    for (const item of items) {
      for (const [messageId, each] of perMessage(item, outcome)) this.outcomes.set(messageId, each);
      if (outcome.kind === 'retry') this.#waiting.push({ record: item.record, outcome });
    }
  }
}
