/**
 * How Mautic 5 writes the fields of one batch item onto a stored record (docs/mautic.md §5.2), as a
 * pure function the simulator's REST half calls for every create and edit. Kept apart from the
 * HTTP code so that tests can drive it directly, and independent of functions/ so that it can
 * judge the relay's planner (which has its own, more cautious, idea of these rules).
 *
 * What it models, from Mautic 5.1.1's `CustomFieldsApiControllerTrait::setCustomFieldValues`,
 * `LeadModel::setFieldValues` and `LeadModel::modifyTags`:
 * - Contacts (LeadApiController), on POST (batch/new, also when it updates a contact matched by
 *   email) and PATCH: a numeric value whose integer part is 0 (`0`, `"0"`, `"0.5"`) is dropped
 *   before anything else, whatever `overwriteWithBlank` says; an empty `points` is dropped too;
 *   then `""` and `null` are skipped unless the item carries a truthy `overwriteWithBlank`.
 * - Every other entity, companies included (CompanyApiController calls setCustomFieldValues
 *   without the POST/PATCH flag, so with overwriteWithBlank), writes every value it is sent.
 * - PUT replaces the form fields (clear-missing) and writes blanks and zeros.
 * - A contact's `tags` (an array, or a comma-separated string) are operations, on every method:
 *   `name` adds the tag, `-name` removes it; other tags stay. Stored sorted, as a set.
 * - Every other key (`owner`, `stage`, …) is stored as sent, subject to the rules above. A
 *   contact's `doNotContact` and `companies` never get here: batch.ts turns them into Do Not
 *   Contact entries and company links.
 */
import type { WriteStyle } from './entities.ts';

export type WriteMode = 'post' | 'patch' | 'put';

/** How the item is written: the entity's style, and the tags that exist before it. */
export interface WriteTarget {
  style: WriteStyle;
  /** Every tag's exact name (contacts only): a removal finds only these. */
  knownTags?: ReadonlySet<string>;
}

/**
 * The record's fields after writing `submitted` onto `current` (neither is changed).
 * `submitted` holds the item's fields without `id`, `overwriteWithBlank` and other reserved keys.
 */
export function applyWrite(
  current: Readonly<Record<string, unknown>>,
  submitted: Readonly<Record<string, unknown>>,
  options: WriteTarget & { mode: WriteMode; overwriteWithBlank: boolean },
): Record<string, unknown> {
  const { mode } = options;
  const contact = options.style === 'contact';
  // PUT binds with clear-missing, so unsent fields go; POST and PATCH keep them. Tags live
  // outside the form, so even PUT keeps them.
  const result: Record<string, unknown> =
    mode === 'put' ? (contact && 'tags' in current ? { tags: current.tags } : {}) : { ...current };
  const filtered = contact && mode !== 'put';
  const keepBlanks = !filtered || options.overwriteWithBlank;
  for (const [key, value] of Object.entries(submitted)) {
    if (contact && key === 'tags') {
      result.tags = applyTags(result.tags, value, options.knownTags);
      continue;
    }
    if (filtered) {
      if (key === 'points' && phpEmpty(value)) continue;
      if (isNumericZero(value)) continue;
    }
    if (!keepBlanks && (value === '' || value === null)) continue;
    result[key] = value;
  }
  return result;
}

/**
 * `LeadModel::modifyTags`: `name` adds, `-name` removes, names trimmed first, empty names
 * ignored. A string is split at commas, as Mautic does. Mautic looks up the named tags once,
 * before the first operation, and matches the result by exact name, so a removal is
 * case-sensitive and finds only a tag that existed before this item (`known`, or one the
 * contact holds): `["x", "-x"]` keeps a new `x`. The result is sorted, so that two stores
 * holding the same tags compare equal whatever order they were added in.
 */
export function applyTags(
  current: unknown,
  operations: unknown,
  known: ReadonlySet<string> = new Set(),
): string[] {
  const tags = new Set(Array.isArray(current) ? current.map(String) : []);
  const existed = new Set([...known, ...tags]);
  const list = typeof operations === 'string' ? operations.split(',') : operations;
  if (Array.isArray(list)) {
    for (const raw of list) {
      if (typeof raw !== 'string' && typeof raw !== 'number') continue;
      const text = String(raw).trim();
      if (text.startsWith('-')) {
        if (existed.has(text.slice(1))) tags.delete(text.slice(1));
      } else if (text !== '') tags.add(text);
    }
  }
  return [...tags].sort();
}

/** PHP's `is_numeric($value) && (int) $value === 0`: what Mautic drops on POST and PATCH. */
export function isNumericZero(value: unknown): boolean {
  if (typeof value === 'number') return Number.isFinite(value) && Math.trunc(value) === 0;
  if (typeof value !== 'string') return false;
  if (!/^\s*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\s*$/.test(value)) return false;
  const number = Number(value.trim());
  return Number.isFinite(number) && Math.trunc(number) === 0;
}

/** PHP's empty(): null, '', '0', 0, false and empty arrays. */
function phpEmpty(value: unknown): boolean {
  if (value === undefined || value === null || value === false || value === 0) return true;
  if (value === '' || value === '0') return true;
  return Array.isArray(value) && value.length === 0;
}
