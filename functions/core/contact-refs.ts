/**
 * Contact references of one delivery run (contract §5): which contacts each `match` names, as
 * far as this run has seen. Filled by lookups and by the run's own creates (Mautic answers a
 * create with the contact's id: when a lookup had found at most one contact with the email,
 * that id is the one; otherwise the reference is looked up again, as Mautic may hold several
 * contacts with one email), emptied of deleted contacts, forgotten after an edit that may
 * change which contact a reference names. Never kept across runs: a contact may be merged or
 * deleted in between.
 */
import type { Chunk, PlannedItem } from './batch-plan.ts';
import { type ContactMatch, matchKey } from './events.ts';
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

  /** A lookup's answer: ids by normalised value, for one field. */
  learn(field: string, found: ReadonlyMap<string, number[]>): void {
    for (const [value, ids] of found) this.#known.set(`${field} ${value}`, [...ids]);
  }

  /** The contacts the item's reference names; undefined when not looked up. */
  idsOf(item: PlannedItem): number[] | undefined {
    return item.match ? this.#known.get(matchKey(item.match)) : undefined;
  }

  /** What a chunk's outcomes teach: created contacts, deleted ones, references an edit may move. */
  after(
    chunk: Chunk,
    items: ReadonlyArray<PlannedItem>,
    outcomes: ReadonlyMap<string, MessageOutcome>,
  ) {
    if (chunk.entity !== 'contacts') return;
    if (chunk.action === 'edit' && items.some((item) => item.record.barrier)) {
      this.#known.clear();
      return;
    }
    for (const item of items) {
      const outcome = outcomes.get(item.messageIds[0] ?? '');
      if (outcome?.kind !== 'delivered') continue;
      if (chunk.action === 'create' && item.record.key) {
        const before = this.#known.get(item.record.key);
        if (before !== undefined && before.length <= 1)
          this.#known.set(item.record.key, [outcome.id]);
        else this.#known.delete(item.record.key);
      } else if (chunk.action === 'delete' && item.id !== undefined) {
        this.#deleted(item.id);
      }
    }
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
export function resolution(
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
 * The items cut into rounds in which no contact comes twice (two references may name one
 * contact): each round is one call, in order, so the later event applies after the earlier.
 */
export function roundsByContact(items: ReadonlyArray<PlannedItem>): PlannedItem[][] {
  const rounds: Array<{ ids: Set<number>; items: PlannedItem[] }> = [];
  for (const item of items) {
    const id = item.id;
    let round = rounds.at(-1);
    if (!round || (id !== undefined && round.ids.has(id))) {
      round = { ids: new Set(), items: [] };
      rounds.push(round);
    }
    if (id !== undefined) round.ids.add(id);
    round.items.push(item);
  }
  return rounds.map((round) => round.items);
}
