/**
 * Merging the events of one record into one Mautic item (contract §2, docs/mautic.md §5.2): the
 * rules under which a merged item gives what the events give one after the other. The planner
 * (batch-plan.ts) decides which events meet; these rules decide whether they may become one.
 */
import type { Action, QueuedEvent } from '../events.ts';

/**
 * Contact keys Mautic handles outside its form as operations (add a do-not-contact entry, link
 * a company, record an IP, …), or whose effect depends on more than the value (`company` links
 * a company by name). Two of them in a row are not one of them with the later value, so an
 * event carrying one is never merged.
 */
const CONTACT_OPERATION_KEYS = new Set([
  'company',
  'companies',
  'doNotContact',
  'frequencyRules',
  'ipAddress',
  'lastActive',
  'utmtags',
]);
/** Contact keys that set a reference by id: merged only when the id is a positive integer. */
const CONTACT_REFERENCE_KEYS = new Set(['owner', 'stage']);
const NOT_FIELDS = new Set(['id', 'overwriteWithBlank']);

/** What an item accumulates as events are merged into it. */
export interface MergeState {
  entity: string;
  action: Action;
  /** False when the event(s) can take no other event (see `mergeStateOf`). */
  mergeable: boolean;
  /** The item's `overwriteWithBlank`, as Mautic reads it (PHP `!empty`). */
  overwriteWithBlank: boolean;
  /** The fields to send, `overwriteWithBlank: true` included when set. */
  fields: Record<string, unknown>;
}

/** One event as an item that others may be merged into. */
export function mergeStateOf(event: QueuedEvent): MergeState {
  const data = event.data ?? {};
  const overwriteWithBlank = phpTruthy(data.overwriteWithBlank);
  return {
    entity: event.entity,
    action: event.action,
    // An integrator action is an operation, not a field write: it takes no other event.
    mergeable:
      event.action === 'delete' ||
      ((event.action === 'create' || event.action === 'edit') && isMergeable(event.entity, data)),
    overwriteWithBlank,
    fields: { ...data },
  };
}

/**
 * Whether an event's data has only keys whose sequential effect the merge can reproduce: plain
 * fields with scalar values, and for contacts `tags` as an array of strings and `owner`/`stage`
 * as positive ids. Anything else (a list, an object, an operation key) and the event is sent in
 * an item of its own: when unsure, do not merge.
 */
function isMergeable(entity: string, data: Record<string, unknown>): boolean {
  const contact = entity === 'contacts';
  return Object.entries(data).every(([key, value]) => {
    if (NOT_FIELDS.has(key)) return key === 'id' || isScalar(value);
    if (contact && key === 'tags') {
      return Array.isArray(value) && value.every((tag) => typeof tag === 'string');
    }
    if (contact && CONTACT_OPERATION_KEYS.has(key)) return false;
    if (contact && CONTACT_REFERENCE_KEYS.has(key)) {
      return (
        (typeof value === 'number' && Number.isSafeInteger(value) && value > 0) ||
        (typeof value === 'string' && /^[1-9]\d{0,15}$/.test(value))
      );
    }
    return isScalar(value);
  });
}

/**
 * Merges `next` (a later event of the same record and action) into `into` when the merged item
 * gives what the two give one after the other, and says whether it did. Mautic refuses an item
 * as a whole when one of its values is invalid, so a merge must neither hide an invalid value
 * (the delivery sends a refused merged item again event by event) nor let part of an event
 * through that alone would have been refused. And the rules must hold whether or not the Mautic
 * version writes zeros (5.x drops numeric zeros on POST/PATCH even with `overwriteWithBlank`;
 * later versions keep them). Hence:
 *
 * - Events that set different fields merge (their union is what the two give in turn).
 * - Events that set some of the same fields merge only when the later one sets every field the
 *   item sets, with values that are not blank or zero, and the item carries no tags: then the
 *   later event decides every field, whatever became of the earlier ones.
 * - A blank or zero value (`""`, `null`, `false`, `0`, `"0"`, `"0.5"`, white space) never meets
 *   another value of the same field: whether it is skipped or written depends on the rules.
 * - `overwriteWithBlank` covers the whole item: events that differ in it merge only when
 *   neither carries a blank or zero value.
 * - Contact `tags` are operations: the lists are joined (an exact repeat dropped), unless a tag
 *   would appear both added and removed or spelled two ways, which Mautic does not apply in
 *   order within one item. The email of contact creates is their identity, not a field here.
 * - Deletes of one id always merge: deleting twice is deleting once.
 */
export function mergeEvents(into: MergeState, next: MergeState): boolean {
  if (!into.mergeable || !next.mergeable) return false;
  if (into.entity !== next.entity || into.action !== next.action) return false;
  if (into.action === 'delete') return true;
  const contact = into.entity === 'contacts';
  const identity = contact && into.action === 'create' ? 'email' : undefined;
  if (
    into.overwriteWithBlank !== next.overwriteWithBlank &&
    (hasBlank(into.fields, contact) || hasBlank(next.fields, contact))
  ) {
    return false;
  }
  const fieldsOf = (fields: Record<string, unknown>) =>
    Object.keys(fields).filter(
      (key) => !NOT_FIELDS.has(key) && key !== identity && !(contact && key === 'tags'),
    );
  const earlier = fieldsOf(into.fields);
  const later = new Set(fieldsOf(next.fields));
  if (earlier.some((key) => later.has(key))) {
    const tagged = Array.isArray(into.fields.tags) && into.fields.tags.length > 0;
    if (tagged || !earlier.every((key) => later.has(key))) return false;
    if (earlier.some((key) => isBlankOrZero(next.fields[key]))) return false;
  }
  const merged: Record<string, unknown> = { ...into.fields };
  for (const [key, value] of Object.entries(next.fields)) {
    if (NOT_FIELDS.has(key)) continue;
    if (contact && key === 'tags') {
      const tags = mergeTags(merged.tags, value);
      if (tags === undefined) return false;
      merged.tags = tags;
      continue;
    }
    // defineProperty, not assignment: a `__proto__` key must stay a plain field.
    Object.defineProperty(merged, key, {
      value,
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  const overwriteWithBlank = into.overwriteWithBlank || next.overwriteWithBlank;
  delete merged.overwriteWithBlank;
  delete merged.id;
  if (overwriteWithBlank) merged.overwriteWithBlank = true;
  into.fields = merged;
  into.overwriteWithBlank = overwriteWithBlank;
  return true;
}

function mergeTags(earlier: unknown, later: unknown): string[] | undefined {
  const tags = Array.isArray(earlier) ? [...(earlier as string[])] : [];
  for (const tag of later as string[]) if (!tags.includes(tag)) tags.push(tag);
  const names = new Set<string>();
  for (const tag of tags) {
    const trimmed = tag.trim();
    const name = (trimmed.startsWith('-') ? trimmed.slice(1) : trimmed).trim().toLowerCase();
    if (names.has(name)) return undefined;
    names.add(name);
  }
  return tags;
}

function hasBlank(fields: Record<string, unknown>, contact: boolean): boolean {
  return Object.entries(fields).some(
    ([key, value]) => !NOT_FIELDS.has(key) && !(contact && key === 'tags') && isBlankOrZero(value),
  );
}

/**
 * A value that Mautic may skip rather than write (blank, or numeric with integer part 0), on
 * the cautious side: PHP's `empty()` values, white space, and every numeric zero.
 */
function isBlankOrZero(value: unknown): boolean {
  if (value === null || value === undefined || value === false) return true;
  if (typeof value === 'number') return !Number.isFinite(value) || Math.trunc(value) === 0;
  if (typeof value !== 'string') return false;
  const text = value.trim();
  if (text === '') return true;
  const number = Number(text);
  return /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/.test(text) && Math.trunc(number) === 0;
}

function isScalar(value: unknown): boolean {
  return value === null || ['string', 'number', 'boolean'].includes(typeof value);
}

/** PHP's `!empty()` of a scalar. */
function phpTruthy(value: unknown): boolean {
  return !(
    value === undefined ||
    value === null ||
    value === false ||
    value === 0 ||
    value === '' ||
    value === '0'
  );
}
