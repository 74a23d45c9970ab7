/**
 * One Mautic call of a delivery run: what it sends for a chunk's action, and the log line and
 * metrics it leaves (ids, statuses and counts, never record contents or contact references).
 */

import { describeError } from '../errors.ts';
import type { Action } from '../events.ts';
import { linksCompaniesInBulk } from '../mautic-versions.ts';
import type {
  ActionLedger,
  CallOptions,
  Clock,
  ItemResult,
  Logger,
  MauticBatchApi,
  MetricsSink,
  TokenSource,
} from '../ports.ts';
import { IN_CALL_RETRY } from '../retry-policy.ts';
import { ambiguousAction, isUpserted } from './answer-policy.ts';
import type { Chunk, PlannedItem } from './batch-plan.ts';
import { callKey } from './circuit.ts';
import { type Decision, isUnexpected, type MessageOutcome } from './failure-policy.ts';
import type { MauticHealth } from './mautic-health.ts';
import type { MauticItemTime } from './mautic-item-time.ts';

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
  /** Longest wait inside the invocation for a time Mautic named (`retry-policy.ts`). */
  maxInRunWaitMs: number;
  /** The furthest a time Mautic named holds the container's calls (`MAX_DELAY_SECONDS`). */
  maxNamedPauseMs: number;
  /** The longest a Mautic call may take (`MAUTIC_TIMEOUT_MS`); else from Mautic's pace alone. */
  callTimeoutCapMs?: number | undefined;
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
  /** Where non-idempotent actions (`addPoints`) are claimed before their call (contract §2). */
  ledger: ActionLedger;
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
  /**
   * The latest time Mautic named (a rate limit's reset, a 503's Retry-After). It lives as long
   * as the container, so no later run of it calls Mautic before then either.
   */
  namedPause?: { until?: number | undefined };
  /** Mautic's version as its API answers last named it: the company re-send, the bulk links. */
  mauticVersion?: { value?: string | undefined };
  /**
   * Mautic's observed time per item, learned from the calls it answered, for as long as the
   * container lives: what sizes and times the calls (`call-budget.ts`).
   */
  itemTime?: MauticItemTime;
  /** Mautic's health as every invocation shares it (contract §2): no gate when absent. */
  health?: MauticHealth;
}

/** Waits for a time Mautic named, per call: a clock that does not move cannot loop a call. */
export const MAX_WAITS_PER_CALL = 3;

/** A call that waited for Mautic's named time as often as it may: back then, via the queue. */
export function waitedOut(halt: { rateLimitedUntil?: number | undefined }): MessageOutcome {
  const notBefore = halt.rateLimitedUntil;
  return notBefore === undefined
    ? { kind: 'retry', reason: 'rate_limited' }
    : { kind: 'retry', reason: 'rate_limited', notBefore };
}

/** How a call may be repeated: a write, a non-idempotent write (`addPoints`), a contact lookup. */
export type CallKind = 'write' | 'once' | 'lookup';

/** What an attempt at one call came to: its answer, a split to carry out, or settled items. */
export type Attempt<T> =
  | { kind: 'answered'; answer: T; items: PlannedItem[]; started: number }
  | { kind: 'split'; decision: Decision & { kind: 'split' }; items: PlannedItem[] }
  /** A whole-call 5xx that an item may cause: the items are not settled yet. */
  | { kind: 'narrow'; outcome: MessageOutcome; items: PlannedItem[] }
  /** A probe is due: the items go again with one of them alone first (`probeItem`). */
  | { kind: 'probe_one'; items: PlannedItem[] }
  | { kind: 'settled' };

/** Runs each entity's chunks in plan order (its phases), entities `concurrency` at a time. */
export async function byEntity(
  chunks: ReadonlyArray<Chunk>,
  concurrency: number,
  deliver: (chunk: Chunk) => Promise<void>,
): Promise<void> {
  const queue = [...Map.groupBy(chunks, (chunk) => chunk.entity).values()];
  const worker = async () => {
    for (let entityChunks = queue.shift(); entityChunks; entityChunks = queue.shift()) {
      for (const chunk of entityChunks) await deliver(chunk);
    }
  };
  const workers = Math.max(1, Math.min(concurrency, queue.length));
  await Promise.all(Array.from({ length: workers }, worker));
}

/**
 * The call for a chunk's items, by action (contract §5 for the integrator actions); company
 * links in one call on a Mautic whose answers named a version that has it (7.x).
 */
export function sendChunk(
  { api, mauticVersion }: Pick<DeliveryDeps, 'api' | 'mauticVersion'>,
  chunk: Chunk,
  items: ReadonlyArray<PlannedItem>,
  call: CallOptions,
): Promise<ItemResult[]> {
  const { entity, action } = chunk;
  const ids = items.map((item) => item.id ?? 0);
  if (action === 'create')
    return api.create(
      entity,
      items.map((item) => item.payload),
      call,
    );
  if (action === 'edit') {
    return api.edit(
      entity,
      items.map((item) => ({ ...item.payload, id: item.id ?? 0 })),
      call,
    );
  }
  if (action === 'delete') return api.delete(entity, ids, call);
  if (action === 'addDoNotContact' || action === 'removeDoNotContact') {
    // Mautic's batch edit takes Do Not Contact per item (reference §11.5): one call for many.
    const edits = items.map((item) => ({
      id: item.id ?? 0,
      doNotContact: [item.fields?.doNotContact],
    }));
    return api.edit(entity, edits, call);
  }
  // The delivery gives one segment's items at a time.
  if (action === 'addToSegment')
    return api.addToSegment(items[0]?.fields?.segmentId ?? 0, ids, call);
  if (action === 'linkCompany' && linksCompaniesInBulk(mauticVersion?.value)) {
    const links = items.map((item) => ({
      contactId: item.id ?? 0,
      companyId: item.fields?.companyId ?? 0,
    }));
    return api.linkCompanies(links, call);
  }
  return Promise.all(
    items.map((item) => api.contactAction(action, item.id ?? 0, item.fields ?? {}, call)),
  );
}

interface Recorders {
  logger: Logger;
  metrics: MetricsSink;
  clock: { now(): number };
}

/** One log line and the call metrics per Mautic call. */
export function recordCall(
  { logger, metrics, clock }: Recorders,
  chunk: Chunk,
  items: ReadonlyArray<PlannedItem>,
  started: number,
  answer: ItemResult[] | unknown,
  limit: number,
): void {
  const durationMs = clock.now() - started;
  metrics.addMetric('MauticCalls', 'Count', 1);
  metrics.addMetric('MauticLatency', 'Milliseconds', durationMs);
  metrics.addMetric('BatchFill', 'Percent', (100 * items.length) / limit);
  const line = { entity: chunk.entity, action: chunk.action, items: items.length, durationMs };
  if (Array.isArray(answer)) {
    const statuses: Record<string, number> = {};
    for (const result of answer as ItemResult[])
      statuses[result.status] = (statuses[result.status] ?? 0) + 1;
    const ids = (answer as ItemResult[]).flatMap((result) =>
      result.kind === 'delivered' ? [result.id] : [],
    );
    logger.info('Mautic call', { event: 'mautic_call', ...line, statuses, ids });
    return;
  }
  logger.warn('Mautic call failed', {
    event: 'mautic_call_failed',
    ...line,
    error: describeError(answer),
  });
  if (isUnexpected(answer)) {
    logger.error('Unexpected error delivering to Mautic', { error: describeError(answer) });
  }
}

/** The log line and metrics of a contact lookup: how many values and how long, never the values. */
export function recordLookup(
  { logger, metrics, clock }: Recorders,
  started: number,
  values: number,
) {
  const durationMs = clock.now() - started;
  metrics.addMetric('MauticCalls', 'Count', 1);
  metrics.addMetric('MauticLatency', 'Milliseconds', durationMs);
  logger.info('Mautic lookup', { event: 'mautic_lookup', entity: 'contacts', values, durationMs });
}

/**
 * A non-idempotent action, at most once per event (contract §2): claimed in the ledger before
 * its call (`send`, which settles the item and returns its outcome), marked done after it. An
 * event already done is settled without a call, and one whose earlier call has no known
 * outcome (an answer lost, a crash) is dead-lettered, never sent again blindly. Returns the
 * outcome when the item was settled without `send`.
 */
export async function deliverOnce(
  { ledger, logger }: { ledger: ActionLedger; logger: Logger },
  key: string,
  action: Action,
  send: () => Promise<MessageOutcome | undefined>,
): Promise<MessageOutcome | undefined> {
  const failed = (step: string, error: unknown) =>
    logger.warn('The action ledger failed', {
      event: 'ledger_failed',
      step,
      error: describeError(error),
    });
  let claim: Awaited<ReturnType<ActionLedger['claim']>>;
  try {
    claim = await ledger.claim(key);
  } catch (error) {
    failed('claim', error);
    return { kind: 'retry', reason: 'ledger_unavailable', message: describeError(error) };
  }
  if (claim === 'done') return { kind: 'delivered', status: 200, id: 0 };
  if (claim === 'unknown') {
    return ambiguousAction(
      action,
      'an earlier try has no known outcome (an answer lost, or a crash)',
    );
  }
  const outcome = await send();
  const applied = outcome?.kind === 'delivered';
  // An ambiguous outcome keeps the claim: should the event come again, it is dead-lettered.
  if (!applied && outcome?.kind === 'rejected' && outcome.reason === 'ambiguous_result') return;
  try {
    await (applied ? ledger.complete(key) : ledger.release(key));
  } catch (error) {
    // The claim stays: should the event come again, it is dead-lettered, never applied twice.
    failed(applied ? 'complete' : 'release', error);
  }
  return undefined;
}

/**
 * The access token for a call, read past the cache unless `token` is `cached`, waiting for the
 * refresher until `waitUntil`; undefined (and an error line) when none can be had by then.
 */
export async function accessTokenFor(
  deps: Pick<DeliveryDeps, 'tokens' | 'logger'>,
  call: { token: 'cached' | 'reread' | 'refused'; refused: string | undefined; waitUntil: number },
): Promise<string | undefined> {
  try {
    return await deps.tokens.accessToken({
      fresh: call.token !== 'cached',
      ...(call.refused === undefined ? {} : { refused: call.refused }),
      waitUntil: call.waitUntil,
    });
  } catch (error) {
    deps.logger.error('No usable Mautic access token', { error: describeError(error) });
    return undefined;
  }
}

/** A call through the health gate: answered, failed, or its items held without a call. */
export type GatedCall<T> =
  | { kind: 'held'; outcome: MessageOutcome }
  | { kind: 'probe_one' }
  | { kind: 'answered'; answer: T; started: number }
  | { kind: 'failed'; error: unknown; started: number };

/**
 * One Mautic call, admitted by Mautic's shared health first (`mautic-health.ts`): held while the
 * circuit is open (waited for when the next probe comes within 15 s), the probe when one
 * is due, in a slot while paced; what its answer or failure says of Mautic is recorded for every
 * invocation. `leaseUntil`: when the call is aborted at the latest.
 */
export async function gatedCall<T>(
  { health, clock, itemTime }: Pick<DeliveryDeps, 'health' | 'clock' | 'itemTime'>,
  call: {
    items: ReadonlyArray<PlannedItem>;
    kind: CallKind;
    /**
     * The delivery run's: no call starts after `callsUntil`, each is aborted by `leaseUntil`. It
     * waits for a probe once at most: once its items were held or its probe failed, the rest are
     * held at once, so the invocation ends soon and never waits probe after probe.
     */
    run: { mayWait: boolean; callsUntil: number; leaseUntil: number };
  },
  send: () => Promise<T>,
): Promise<GatedCall<T>> {
  // A wait leaves the call its own expected time (Mautic's pace) before calls must stop.
  const expected = 1.5 * (itemTime?.msPerItem ?? 0) * call.items.length;
  const waitMs = call.run.mayWait ? IN_CALL_RETRY.maxInRunWaitMs : 0;
  const waitUntil = Math.min(call.run.callsUntil - expected, clock.now() + waitMs);
  // A lookup is one small call whatever its references: it may probe whole.
  const several = call.kind !== 'lookup' && call.items.length > 1;
  const admission = await health?.admit({ waitUntil, leaseUntil: call.run.leaseUntil, several });
  if (admission?.kind === 'probe_one') return admission;
  if (admission?.kind === 'hold') {
    if (admission.outcome.reason === 'mautic_unavailable') call.run.mayWait = false;
    return { kind: 'held', outcome: admission.outcome };
  }
  const ticket = admission?.ticket;
  const started = clock.now();
  try {
    const answer = await send();
    // A lookup's time says nothing of the time per item of a write.
    const items = call.kind === 'lookup' ? 0 : call.items.length;
    if (health && ticket) await health.answered(ticket, { items, ms: clock.now() - started });
    return { kind: 'answered', answer, started };
  } catch (error) {
    const key = callKey(call.items.flatMap((item) => item.messageIds));
    if (health && ticket) await health.failed(ticket, key, error);
    if (ticket?.probe) call.run.mayWait = false;
    return { kind: 'failed', error, started };
  }
}

/**
 * While Mautic's circuit is open, a call of several items is first made with one alone, the probe
 * (contract §2: one small call): an item that is safe to send again (not a create Mautic might
 * double unseen), else the first; then the rest. Undefined when the call may go whole (closed, or
 * another call probing: it waits for that one's answer).
 */
export function probeItem(
  { health, mauticVersion }: Pick<DeliveryDeps, 'health' | 'mauticVersion'>,
  chunk: Chunk,
  items: ReadonlyArray<PlannedItem>,
): { probe: PlannedItem; rest: PlannedItem[] } | undefined {
  // While another call probes, the whole call waits for its answer instead.
  if (items.length < 2 || health === undefined || health.closed() || health.probing())
    return undefined;
  const probe =
    items.find(
      (item) =>
        chunk.action !== 'create' || isUpserted(chunk.entity, item.payload, mauticVersion?.value),
    ) ?? items[0];
  if (probe === undefined) return undefined;
  return { probe, rest: items.filter((item) => item !== probe) };
}
