/**
 * Contact references of one delivery run (contract §5): which contacts each `match` names, as
 * far as this run has seen. Filled by lookups and by the run's own creates (Mautic answers a
 * create with the contact's id: when a lookup had found at most one contact with the email,
 * that id is the one; otherwise the reference is looked up again, as Mautic may hold several
 * contacts with one email), emptied of deleted contacts, forgotten after an edit that may
 * change which contact a reference names. Never kept across runs: a contact may be merged or
 * deleted in between.
 */

import { type ContactMatch, matchKey } from '../events.ts';
import type { CallOptions, MauticBatchApi } from '../ports.ts';
import type { Chunk, PlannedItem } from './batch-plan.ts';
import type { MessageOutcome } from './failure-policy.ts';

export class ContactReferences {
  /** Ids by `matchKey`: every contact that has the value (one, none, or several). */
  readonly #known = new Map<string, number[]>();
  /** Every reference of the run, by key, to look them up together at the first need. */
  readonly #all = new Map<string, ContactMatch>();

  constructor(chunks: ReadonlyArray<Chunk>) {
    for (const chunk of chunks) {
      if (chunk.entity !== 'contacts') continue;
      for (const item of chunk.items)
        if (item.match) this.#all.set(matchKey(item.match), item.match);
    }
  }

  /** Whether the item names its contact by a reference this run has not resolved yet. */
  unresolved(item: PlannedItem): boolean {
    return item.match !== undefined && !this.#known.has(matchKey(item.match));
  }

  /**
   * What to look up now, by field: the references the items need, and with them every other
   * unresolved one of the run, so one lookup serves the whole run.
   */
  toLookUp(items: ReadonlyArray<PlannedItem>): Map<string, string[]> {
    const needed = new Map<string, ContactMatch>();
    for (const item of items) {
      if (item.match && this.unresolved(item)) needed.set(matchKey(item.match), item.match);
    }
    for (const [key, match] of this.#all) if (!this.#known.has(key)) needed.set(key, match);
    const byField = new Map<string, string[]>();
    for (const { field, value } of needed.values()) {
      byField.set(field, [...(byField.get(field) ?? []), value]);
    }
    return byField;
  }

  /**
   * Looks the values up, field by field, and learns the answers only once every field was
   * answered: the items of a lookup that failed part-way go back to the queue whole.
   */
  async lookUp(
    api: Pick<MauticBatchApi, 'findContacts'>,
    byField: ReadonlyMap<string, string[]>,
    call: CallOptions,
  ): Promise<void> {
    const answers: Array<[string, Map<string, number[]>]> = [];
    for (const [field, values] of byField) {
      answers.push([field, await api.findContacts(field, values, call)]);
    }
    for (const [field, found] of answers) {
      for (const [value, ids] of found) this.#known.set(`${field} ${value}`, [...ids]);
    }
  }

  /** The contacts the item's reference names; undefined when not looked up. */
  idsOf(item: PlannedItem): number[] | undefined {
    return item.match ? this.#known.get(matchKey(item.match)) : undefined;
  }

  /**
   * What a chunk's outcomes teach: created contacts, deleted ones, references an edit may move
   * (a barrier, whatever its outcome: a call that failed may have been applied).
   */
  after(
    chunk: Chunk,
    items: ReadonlyArray<PlannedItem>,
    outcomes: ReadonlyMap<string, MessageOutcome>,
  ): void {
    if (chunk.entity !== 'contacts') return;
    if (chunk.action === 'edit' && items.some((item) => item.record.barrier)) {
      this.#known.clear();
      return;
    }
    for (const item of items) {
      const outcome = outcomes.get(item.messageIds[0] ?? '');
      if (outcome?.kind !== 'delivered') continue;
      if (chunk.action === 'create') this.#created(item, outcome.id);
      else if (chunk.action === 'delete' && item.id !== undefined) this.#deleted(item.id);
    }
  }

  /**
   * A create Mautic answered with `id`: it made that contact, or updated the one that has the
   * email (or another unique field). What the contact's other references named, and every
   * reference on a field the create wrote, is looked up again.
   */
  #created(item: PlannedItem, id: number): void {
    const key = item.record.key;
    const before = key === undefined ? undefined : this.#known.get(key);
    const written = new Set(Object.keys(item.payload).filter((field) => field !== 'email'));
    for (const [other, ids] of this.#known) {
      if (ids.includes(id) || written.has(other.slice(0, other.indexOf(' ')))) {
        this.#known.delete(other);
      }
    }
    if (key === undefined) return;
    if (before !== undefined && before.length <= 1) this.#known.set(key, [id]);
    else this.#known.delete(key);
  }

  #deleted(id: number): void {
    for (const [key, ids] of this.#known) {
      if (ids.includes(id))
        this.#known.set(
          key,
          ids.filter((other) => other !== id),
        );
    }
  }
}

/**
 * What a resolved reference means for the item (contract §5): its contact's id, or an outcome
 * when no contact or several match (a delete with no match is done: nothing to delete).
 */
function resolution(
  item: PlannedItem,
  action: string,
  ids: ReadonlyArray<number>,
): { id: number } | { outcome: MessageOutcome } {
  const [only] = ids;
  if (ids.length === 1 && only !== undefined) return { id: only };
  const what = `match.${item.match?.field ?? 'email'}`;
  if (ids.length === 0) {
    if (action === 'delete') return { outcome: { kind: 'delivered', status: 404, id: 0 } };
    return {
      outcome: { kind: 'rejected', reason: 'no_match', message: `No contact matches ${what}` },
    };
  }
  return {
    outcome: {
      kind: 'rejected',
      reason: 'ambiguous_match',
      message: `Contacts ${ids.join(', ')} all match ${what}`,
    },
  };
}

/**
 * The items that go on to Mautic, each named by `match` given its contact's id; the others
 * settled: no contact or several match, or their lookup failed (settled with it already).
 */
export function resolvedItems(
  refs: ContactReferences,
  action: string,
  items: PlannedItem[],
  settle: (item: PlannedItem, outcome: MessageOutcome) => void,
): PlannedItem[] {
  return items.filter((item) => {
    if (item.match === undefined) return true;
    const ids = refs.idsOf(item);
    if (ids === undefined) return false;
    const resolved = resolution(item, action, ids);
    if ('outcome' in resolved) {
      settle(item, resolved.outcome);
      return false;
    }
    for (const part of [item, ...(item.parts ?? [])]) part.id = resolved.id;
    return true;
  });
}
