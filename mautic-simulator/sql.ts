/**
 * How MySQL compares a contact's column with a lookup's value, for the simulator's `where` and
 * `search` (reference §11.1): Mautic's columns use utf8mb4_unicode_ci, so `=` ignores case and
 * trailing spaces, and LIKE ignores case but not trailing spaces, with `%`, `_` and the `\`
 * escape. The collation's accent folding (`é` = `e`) is not modelled. A NULL column matches no
 * comparison, negated ones included, as in SQL.
 */

/** A column's value as MySQL holds it: NULL, a number (id, points) or a string. */
export type SqlValue = string | number | null;

/** A stored field as its column holds it: booleans as 1/0, nested values as their JSON. */
export function sqlValue(value: unknown): SqlValue {
  if (value === undefined || value === null) return null;
  if (typeof value === 'number') return Number.isFinite(value) ? value : null;
  if (typeof value === 'string') return value;
  if (typeof value === 'boolean') return value ? 1 : 0;
  return JSON.stringify(value);
}

/** The collation's sort key: case folded, trailing spaces dropped (PAD SPACE). */
export function collationKey(text: string): string {
  return text.replace(/ +$/, '').toLowerCase();
}

/** MySQL's string-to-number conversion: the leading number, else 0. */
export function sqlNumber(text: string): number {
  const leading = /^\s*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?/.exec(text);
  return leading === null ? 0 : Number(leading[0]);
}

/** `column <=> operand` under the collation: negative, 0 or positive; undefined for NULL. */
export function sqlCompare(column: SqlValue, operand: string): number | undefined {
  if (column === null) return undefined;
  if (typeof column === 'number') return Math.sign(column - sqlNumber(operand));
  const [left, right] = [collationKey(column), collationKey(operand)];
  return left === right ? 0 : left < right ? -1 : 1;
}

/** A LIKE pattern as a test: `%` any run, `_` one character, `\` escapes the next one. */
export function likeMatcher(pattern: string): (column: SqlValue) => boolean {
  let source = '';
  for (let at = 0; at < pattern.length; at++) {
    const char = pattern[at] ?? '';
    if (char === '\\' && at + 1 < pattern.length) {
      at += 1;
      source += escapeRegExp(pattern[at] ?? '');
    } else if (char === '%') source += '.*';
    else if (char === '_') source += '.';
    else source += escapeRegExp(char);
  }
  const regex = new RegExp(`^${source}$`, 'isu');
  return (column) => column !== null && regex.test(String(column));
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
}
