/**
 * How Mautic 5 writes the fields of one batch item onto a stored record (docs/mautic.md §5.2), as a
 * pure function the simulator's REST half calls for every create and edit. Kept apart from the
 * HTTP code so that tests can drive it directly, and independent of functions/ so that it can
 * judge the relay's planner (which has its own, more cautious, idea of these rules).
 *
 * What it models, from Mautic 5.x `CustomFieldsApiControllerTrait::setCustomFieldValues`,
 * `LeadModel::setFieldValues` and `LeadModel::modifyTags`:
 * - POST (batch/new, also when it updates a contact matched by email) and PATCH, on entities with
 *   custom fields (contacts, companies): a numeric value whose integer part is 0 (`0`, `"0"`,
 *   `"0.5"`) is dropped before anything else, whatever `overwriteWithBlank` says; a contact's
 *   empty `points` is dropped too; then `""` and `null` are skipped unless the item carries a
 *   truthy `overwriteWithBlank`.
 * - PUT replaces the form fields (clear-missing) and writes blanks and zeros.
 * - Entities without custom fields (segments) write every value they are sent.
 * - A contact's `tags` (an array, or a comma-separated string) are operations, on every method:
 *   `name` adds the tag, `-name` removes it; other tags stay. Stored sorted, as a set.
 * - Every other key (`owner`, `stage`, `companies`, …) is stored as sent, subject to the rules
 *   above: the simulator does not model what Mautic does with them beyond that, which is why the
 *   relay never merges events that carry the list-like ones. A contact's `doNotContact` never
 *   gets here: rest.ts turns it into Do Not Contact entries (contact-actions.ts).
 */

export type WriteMode = 'post' | 'patch' | 'put';

/** What an entity's controller does with blanks: custom-field entities skip them on POST/PATCH. */
export interface WriteTarget {
  /** Contacts: `tags` are operations and an empty `points` never overwrites. */
  contact: boolean;
  /** Contacts and companies (CustomFieldsApiControllerTrait); not segments. */
  customFields: boolean;
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
  const { mode, contact, customFields } = options;
  // PUT binds with clear-missing, so unsent fields go; POST and PATCH keep them. Tags live
  // outside the form, so even PUT keeps them.
  const result: Record<string, unknown> =
    mode === 'put' ? (contact && 'tags' in current ? { tags: current.tags } : {}) : { ...current };
  const filtered = customFields && mode !== 'put';
  const keepBlanks = !filtered || options.overwriteWithBlank;
  for (const [key, value] of Object.entries(submitted)) {
    if (contact && key === 'tags') {
      result.tags = applyTags(result.tags, value);
      continue;
    }
    if (filtered) {
      if (contact && key === 'points' && phpEmpty(value)) continue;
      if (isNumericZero(value)) continue;
    }
    if (!keepBlanks && (value === '' || value === null)) continue;
    result[key] = value;
  }
  return result;
}

/**
 * `LeadModel::modifyTags`: `name` adds, `-name` removes, names trimmed, empty names ignored.
 * A string is split at commas, as Mautic does. The result is sorted, so that two stores holding
 * the same tags compare equal whatever order they were added in.
 */
export function applyTags(current: unknown, operations: unknown): string[] {
  const tags = new Set(Array.isArray(current) ? current.map(String) : []);
  const list = typeof operations === 'string' ? operations.split(',') : operations;
  if (Array.isArray(list)) {
    for (const raw of list) {
      if (typeof raw !== 'string' && typeof raw !== 'number') continue;
      const text = String(raw).trim();
      if (text.startsWith('-')) tags.delete(text.slice(1).trim());
      else if (text !== '') tags.add(text);
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
