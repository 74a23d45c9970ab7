/**
 * A create that Mautic may have applied is never sent again (contract §2), also when its dead
 * letter could not be written at once and the queue hands its message out again. The action
 * ledger decides, keyed by the message (`create <message id>`), and only where it must:
 *
 * - a create whose outcome is `ambiguous_result` is marked (a claim left in place) before its
 *   dead letter is sent, so the ledger knows even when the dead-letter queue does not take it;
 * - a create of an entity Mautic does not upsert, on a message received before (its receive
 *   count above 1), is claimed before it is sent: a mark, or a claim of an earlier try that
 *   never got an outcome (a crash mid-call), is `ambiguous_result` again, never a second call; a
 *   try that was applied is done. After the call the claim is completed, kept (ambiguous again),
 *   or freed.
 *
 * A first delivery costs no ledger call: a redrive is a new message, sent as the operator meant.
 * Should the mark fail too (the table down as well as the queue), the error is logged
 * (`ambiguous_unmarked`) and the event stays on the queue, and is sent again on its next
 * delivery: the one case left, two stores failing at the same moment.
 */

import { describeError } from '../errors.ts';
import type { ActionLedger, Logger } from '../ports.ts';
import { ambiguousCreate, isUpserted } from './answer-policy.ts';
import type { PlannedItem } from './batch-plan.ts';
import type { MessageOutcome } from './failure-policy.ts';

interface MarkerDeps {
  ledger: ActionLedger;
  logger: Logger;
  mauticVersion?: { value?: string | undefined };
}

/** What the delivery run lends: the call for the items, their settling, their outcomes. */
export interface CreateRun {
  send(items: PlannedItem[]): Promise<void>;
  settle(item: PlannedItem, outcome: MessageOutcome): void;
  outcomes: ReadonlyMap<string, MessageOutcome>;
}

const keysOf = (item: PlannedItem) => item.messageIds.map((id) => `create ${id}`);

/** Delivers a chunk's creates, at most once each where a repeat could double the record. */
export async function deliverCreates(
  deps: MarkerDeps,
  entity: string,
  items: PlannedItem[],
  run: CreateRun,
): Promise<void> {
  const guarded = (item: PlannedItem) =>
    item.redelivered === true && !isUpserted(entity, item.payload, deps.mauticVersion?.value);
  const claims = await Promise.all(
    items.map(async (item) => (guarded(item) ? claimOnce(deps, item, run) : 'send')),
  );
  await run.send(items.filter((_, index) => claims[index] !== 'settled'));
  await Promise.all(
    items.map((item, index) => {
      const outcome = run.outcomes.get(item.messageIds[0] ?? '');
      if (claims[index] === 'claimed') return afterClaimed(deps, item, outcome);
      return claims[index] === 'send' && isAmbiguous(outcome) ? mark(deps, item) : undefined;
    }),
  );
}

/** Claims each message of a redelivered create; settles it when the ledger says not to send. */
async function claimOnce(
  deps: MarkerDeps,
  item: PlannedItem,
  run: CreateRun,
): Promise<'claimed' | 'settled'> {
  const answers = await Promise.allSettled(keysOf(item).map((key) => deps.ledger.claim(key)));
  const states = answers.map((answer) => (answer.status === 'fulfilled' ? answer.value : 'error'));
  if (states.every((state) => state === 'claimed')) return 'claimed';
  if (states.includes('unknown')) {
    // A claim of its own taken now stays: the event is ambiguous, and so is any repeat of it.
    run.settle(
      item,
      ambiguousCreate(
        'an earlier try has no known outcome (a dead letter not written, or a crash)',
      ),
    );
  } else if (states.includes('error')) {
    await release(deps, item, states);
    const failed = answers.find((answer) => answer.status === 'rejected');
    run.settle(item, {
      kind: 'retry',
      reason: 'ledger_unavailable',
      message: describeError(failed?.status === 'rejected' ? failed.reason : undefined),
    });
  } else {
    // An earlier try was applied (its delete from the queue failed): done, not done again.
    const taken = keysOf(item).filter((_, index) => states[index] === 'claimed');
    await Promise.all(taken.map((key) => deps.ledger.complete(key))).catch((error) =>
      logFailure(deps, 'complete', error),
    );
    run.settle(item, { kind: 'delivered', status: 200, id: 0 });
  }
  return 'settled';
}

/** After a claimed create's call: applied is done, ambiguous stays claimed, anything else freed. */
async function afterClaimed(
  deps: MarkerDeps,
  item: PlannedItem,
  outcome: MessageOutcome | undefined,
): Promise<void> {
  if (isAmbiguous(outcome)) return;
  const keys = keysOf(item);
  try {
    if (outcome?.kind === 'delivered')
      await Promise.all(keys.map((key) => deps.ledger.complete(key)));
    else
      await release(
        deps,
        item,
        keys.map(() => 'claimed'),
      );
  } catch (error) {
    // The claim stays: should the event come again, it is dead-lettered, never created twice.
    logFailure(deps, 'settle', error);
  }
}

/** Frees the claims of `item` that were taken (`states` says which). */
async function release(deps: MarkerDeps, item: PlannedItem, states: string[]): Promise<void> {
  const keys = keysOf(item).filter((_, index) => states[index] === 'claimed');
  await Promise.all(keys.map((key) => deps.ledger.release(key))).catch((error) =>
    logFailure(deps, 'release', error),
  );
}

/** Marks an ambiguous create before its dead letter is sent (a claim that is never settled). */
async function mark(deps: MarkerDeps, item: PlannedItem): Promise<void> {
  try {
    await Promise.all(keysOf(item).map((key) => deps.ledger.claim(key)));
  } catch (error) {
    deps.logger.error(
      'Could not mark an ambiguous create; only its dead letter keeps it from being sent again',
      {
        event: 'ambiguous_unmarked',
        messages: item.messageIds.length,
        error: describeError(error),
      },
    );
  }
}

function isAmbiguous(outcome: MessageOutcome | undefined): boolean {
  return outcome?.kind === 'rejected' && outcome.reason === 'ambiguous_result';
}

function logFailure(deps: MarkerDeps, step: string, error: unknown): void {
  deps.logger.warn('The action ledger failed', {
    event: 'ledger_failed',
    step,
    error: describeError(error),
  });
}
