/**
 * One Mautic call of a delivery run: what it sends for a chunk's action, and the log line and
 * metrics it leaves (ids, statuses and counts, never record contents or contact references).
 */

import { randomBytes } from 'node:crypto';
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
import { ambiguousAction } from './answer-policy.ts';
import type { Chunk, PlannedItem } from './batch-plan.ts';
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
    return api.edit(entity, edits, call).then((results) => results.map(noContact(edits)));
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

/**
 * Each message of an item with the item's outcome; delivered, a merged item's earlier events
 * are coalesced `into` its last one's message, whose Mautic item carried their effect.
 */
export function perMessage(
  item: PlannedItem,
  outcome: MessageOutcome,
): Array<[string, MessageOutcome]> {
  const into = item.parts?.at(-1)?.messageIds[0];
  const last = new Set(item.parts?.at(-1)?.messageIds ?? item.messageIds);
  return item.messageIds.map((messageId) => [
    messageId,
    outcome.kind === 'delivered' && into !== undefined && !last.has(messageId)
      ? { ...outcome, into }
      : outcome,
  ]);
}

/** A Do Not Contact item's 404 is about its contact, the only record it names: said by id. */
function noContact(edits: ReadonlyArray<{ id: number }>) {
  return (result: ItemResult, index: number): ItemResult =>
    result.kind === 'rejected' && result.status === 404
      ? { ...result, message: `Mautic found no contact ${edits[index]?.id} (${result.message})` }
      : result;
}

interface Recorders {
  logger: Logger;
  metrics: MetricsSink;
  clock: { now(): number };
}

/** A Mautic call as its log line names it, and when it was answered (epoch ms). */
export interface CallRecord {
  id: string;
  at: number;
}

/**
 * One log line and the call metrics per Mautic call. The line names the call (`callId`, which
 * the events' outcomes name too) and each item's event ids with its result (Mautic's id, or its
 * status), so that a log search finds what became of an event even with outcomes off.
 */
export function recordCall(
  { logger, metrics, clock }: Recorders,
  chunk: Chunk,
  items: ReadonlyArray<PlannedItem>,
  started: number,
  answer: ItemResult[] | unknown,
  limit: number,
): CallRecord {
  const call = { id: randomBytes(8).toString('base64url'), at: clock.now() };
  const durationMs = call.at - started;
  metrics.addMetric('MauticCalls', 'Count', 1);
  metrics.addMetric('MauticLatency', 'Milliseconds', durationMs);
  metrics.addMetric('BatchFill', 'Percent', (100 * items.length) / limit);
  const line = {
    callId: call.id,
    entity: chunk.entity,
    action: chunk.action,
    items: items.length,
    durationMs,
  };
  if (Array.isArray(answer)) {
    const results = answer as ItemResult[];
    const statuses: Record<string, number> = {};
    for (const result of results) statuses[result.status] = (statuses[result.status] ?? 0) + 1;
    const ids = results.flatMap((result) => (result.kind === 'delivered' ? [result.id] : []));
    const events = items.map((item, index) => {
      const result = results[index];
      const eventIds = item.eventIds ?? [];
      return result?.kind === 'delivered'
        ? { eventIds, status: result.status, id: result.id }
        : { eventIds, status: result?.status ?? null };
    });
    logger.info('Mautic call', { event: 'mautic_call', ...line, statuses, ids, events });
    return call;
  }
  logger.warn('Mautic call failed', {
    event: 'mautic_call_failed',
    ...line,
    error: describeError(answer),
    eventIds: items.flatMap((item) => item.eventIds ?? []),
  });
  if (isUnexpected(answer)) {
    logger.error('Unexpected error delivering to Mautic', { error: describeError(answer) });
  }
  return call;
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
  if (claim === 'done') {
    const skipped = `an ${action} already applied for this event: not sent again`;
    return { kind: 'delivered', status: 200, id: 0, skipped };
  }
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

/** A decision to settle; one delivered names the Mautic call that carried it. */
export function withCall(
  decision: Decision & { kind: 'settle' },
  call: CallRecord,
): Decision & { kind: 'settle' } {
  const { outcome } = decision;
  return outcome.kind === 'delivered' ? { ...decision, outcome: { ...outcome, call } } : decision;
}
