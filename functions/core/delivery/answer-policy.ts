/**
 * What an answer says Mautic did, the other half of the failure policy (`failure-policy.ts`
 * decides what follows a failed call): whether a failed call may have been applied, so that a
 * create Mautic does not upsert or a non-idempotent action is never sent again blindly
 * (contract §2), and what each item's own result leads to, `duplicate` included.
 */
import {
  describeError,
  MauticAuthError,
  MauticPermanentError,
  MauticRateLimitError,
  MauticResponseError,
  MauticTransientError,
} from '../errors.ts';
import type { Action } from '../events.ts';
import { companyRepeat } from '../mautic-versions.ts';
import type { ItemResult } from '../ports.ts';
import type { MessageOutcome } from './failure-policy.ts';

/**
 * The items of a failed call that must not be sent again, with their outcome: the creates Mautic
 * may have applied without saying so (a 5xx other than the over-limit one, a 2xx it cannot read,
 * a timeout or a dropped connection after sending), unless a repeat cannot double them
 * (`isUpserted`) (contract §2, "No blind re-send").
 */
export function unrepeatable<T extends { payload: Record<string, unknown> }>(
  error: unknown,
  call: { entity: string; action: Action; mauticVersion?: string | undefined },
  items: ReadonlyArray<T>,
): { items: T[]; outcome: MessageOutcome } | undefined {
  if (call.action !== 'create' || !possiblyApplied(error)) return undefined;
  return {
    items: items.filter((item) => !isUpserted(call.entity, item.payload, call.mauticVersion)),
    outcome: ambiguousCreate(`its answer cannot tell (${describeError(error)})`),
  };
}

/** The outcome of a create Mautic may have applied (contract §2, "No blind re-send"). */
export function ambiguousCreate(why: string): MessageOutcome {
  return {
    kind: 'rejected',
    reason: 'ambiguous_result',
    message: `Mautic may have created this record; ${why}`,
  };
}

/** Whether a failed call may have been applied by Mautic all the same. */
export function possiblyApplied(error: unknown): boolean {
  return (
    (error instanceof MauticTransientError || error instanceof MauticResponseError) &&
    error.possiblyApplied
  );
}

/**
 * Whether a failed call certainly left Mautic unchanged: refused before any work (401, 429, a
 * 4xx, a 503 that says when to come back: a server declaring itself unavailable), or never sent
 * (connection refused). Any other 5xx, a timeout or an unreadable answer may come after the
 * work, so an action that is not idempotent (`addPoints`) must not be sent again.
 */
export function surelyNotApplied(error: unknown): boolean {
  if (
    error instanceof MauticAuthError ||
    error instanceof MauticRateLimitError ||
    error instanceof MauticPermanentError
  ) {
    return true;
  }
  return error instanceof MauticTransientError && !error.possiblyApplied;
}

/** The outcome of a non-idempotent action whose call may have been applied (contract §2). */
export function ambiguousAction(action: Action, why: string): MessageOutcome {
  return {
    kind: 'rejected',
    reason: 'ambiguous_result',
    message: `Mautic may have applied ${action} already; ${why}`,
  };
}

/**
 * Whether a repeat of the create is harmless: Mautic upserts a contact with an email, and a
 * company with a name is never doubled on a version whose answers said what it does with a
 * second create of the name (`companyRepeat`, while `companyname` is a unique identifier field,
 * as it ships): 5.1 and 5.2.0 refuse it (the repeat is dead-lettered `duplicate`), 5.2.1 to 7
 * upsert it (the repeat answers 200 with the same id: delivered). With an unknown version a
 * company create is not repeated.
 */
export function isUpserted(
  entity: string,
  payload: Record<string, unknown>,
  mauticVersion?: string,
): boolean {
  const filled = (value: unknown) => typeof value === 'string' && value.trim() !== '';
  if (entity === 'contacts') return filled(payload.email);
  return (
    entity === 'companies' &&
    companyRepeat(mauticVersion) !== undefined &&
    filled(payload.companyname)
  );
}

/** Mautic's refusal of a value another record holds: `companyname: This field must be unique.` */
const UNIQUE_REFUSAL = /^(\w+): This field must be unique\./;

/**
 * A record a user has open for editing: Mautic 7 refuses to edit it (per item, 409) until they
 * close it. Transient: back to the queue, with Mautic's status and message for the dead letter
 * should the retry horizon run out.
 */
const LOCKED = 409;

/** Per-item statuses that mean "never going to work". */
const PERMANENT_ITEM_STATUSES = new Set([400, 403, 404, 422]);
/** Per-item statuses that judge an item's content: a merged item so refused is split up. */
const INVALID_ITEM_STATUSES = new Set([400, 422]);

/**
 * What one item's result leads to: settled (delivered, refused for good, or back to the queue),
 * or, for a merged item Mautic refused as invalid, its events sent again one by one, in arrival
 * order, so each gets what it would have got alone.
 */
export function decideItem(
  result: ItemResult | undefined,
  item: {
    merged: boolean;
    unrepeatable: boolean;
    /** A pair of a bulk call that stands for a call of its own (a company link's). */
    perPair?: boolean;
  },
):
  | {
      kind: 'settle';
      outcome: MessageOutcome;
      alert?: { message: string; details: Record<string, unknown> };
    }
  | { kind: 'one_by_one' } {
  if (item.merged && result?.kind === 'rejected' && INVALID_ITEM_STATUSES.has(result.status)) {
    return { kind: 'one_by_one' };
  }
  const duplicate = result?.kind === 'rejected' ? UNIQUE_REFUSAL.exec(result.message) : null;
  if (result?.kind === 'rejected' && duplicate) {
    // Another record holds the value (a company's name, a contact's email on an edit). The
    // detail names the field, never the value: operators list details without --show-data.
    const field = duplicate[1] as string;
    const message = `${result.message} Another record has this ${field} (ignoring case and trailing spaces), perhaps this event's own earlier try.`;
    return {
      kind: 'settle',
      outcome: { kind: 'rejected', reason: 'duplicate', status: result.status, message },
    };
  }
  if (item.perPair && result?.kind === 'rejected' && result.status === 403) {
    // What the pair's own call would have been refused as: the API user's permissions, not the
    // event's fault. Back to the queue, loudly, as a whole-call 403 is (failure-policy.ts).
    const { status, message } = result;
    return {
      kind: 'settle',
      outcome: { kind: 'retry', reason: 'mautic_refused_403', status, message },
      alert: {
        message: "Mautic refused a contact's company link; check the API user's permissions",
        details: { status, error: message },
      },
    };
  }
  // A per-item 5xx of a create may follow its save (a listener failing after it).
  if (item.unrepeatable && result?.kind === 'rejected' && result.status >= 500) {
    const why = `it answered ${result.status} for this item (${result.message})`;
    return { kind: 'settle', outcome: ambiguousCreate(why) };
  }
  return { kind: 'settle', outcome: itemOutcome(result) };
}

function itemOutcome(result: ItemResult | undefined): MessageOutcome {
  if (result === undefined) return { kind: 'retry', reason: 'no_result' };
  if (result.kind === 'delivered')
    return { kind: 'delivered', status: result.status, id: result.id };
  if (result.status === LOCKED) {
    return { kind: 'retry', reason: 'mautic_locked', status: LOCKED, message: result.message };
  }
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
