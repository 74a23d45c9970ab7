import { isIPv4, isIPv6 } from 'node:net';

/*
 * The email check of the ingest, made to accept what Mautic accepts and refuse what it refuses,
 * so that an address Mautic would refuse costs no Mautic call and no dead letter, and one it
 * takes is never refused here (docs/mautic.md §5.3). Mautic's `EmailAddress` constraint is PHP's
 * `filter_var($email, FILTER_VALIDATE_EMAIL)` (without the Unicode flag) and then no `^ & * %`.
 * PHP checks with one large regular expression; this is the same grammar written out by rule,
 * which says why each part is there and can be read:
 *
 * - at most 320 bytes; at most 254 characters and a local part of at most 64 (a quoted
 *   string's quotes not counted, an escaped pair counted once);
 * - the local part: dot-separated words, each an atom (ASCII letters, digits and
 *   `!#$%&'*+-/=?^_\`{|}~`) or a quoted string (any ASCII but NUL, CR, LF, `"` and `\`
 *   unescaped; `\` escapes any ASCII);
 * - the domain: two or more dot-separated labels of ASCII letters, digits and inner hyphens
 *   (an `xn--` prefix allowed), the last starting with a letter (or `xn--`), none of 64
 *   characters or more; or an address literal, `[IPv4]` or `[IPv6:…]`.
 *
 * Checked against PHP's answers for the cases of issue 25 in test/core/email-address.test.ts.
 */

const ATOM = /^[A-Za-z0-9!#$%&'*+\-/=?^_`{|}~]+$/;
const LABEL = /^(?:xn--)?[A-Za-z0-9]+(?:-+[A-Za-z0-9]+)*$/;
const LAST_LABEL = /^(?:[A-Za-z][A-Za-z0-9]*|xn--[A-Za-z0-9]+)(?:-+[A-Za-z0-9]+)*$/;
/** Mautic refuses these on top of PHP's check ("has characters not allowed"). */
const NOT_ALLOWED_BY_MAUTIC = /[\^&*%]/;

export function isMauticEmail(value: string): boolean {
  if (Buffer.byteLength(value) > 320 || NOT_ALLOWED_BY_MAUTIC.test(value)) return false;
  const at = value.lastIndexOf('@');
  if (at <= 0) return false;
  const local = localPartLength(value.slice(0, at));
  if (local === undefined || local > 64) return false;
  const domain = value.slice(at + 1);
  if (local + 1 + domain.length > 254) return false;
  return isDomain(domain);
}

/** The local part's length as PHP's check counts it, or undefined when it is not one. */
function localPartLength(local: string): number | undefined {
  let length = 0;
  for (const word of wordsOf(local) ?? []) {
    if (word.startsWith('"')) {
      const inside = word.slice(1, -1);
      if (word.length < 2 || !word.endsWith('"') || !isQuotedInside(inside)) return undefined;
      length += inside.replace(/\\[\s\S]/g, 'x').length;
    } else if (ATOM.test(word)) length += word.length;
    else return undefined;
  }
  const words = wordsOf(local);
  return words === undefined || words.length === 0 ? undefined : length + words.length - 1;
}

/** Characters a quoted string may hold unescaped: ASCII but NUL, tab, LF, CR, space and `"`. */
const UNQUOTABLE = new Set([0x00, 0x09, 0x0a, 0x0d, 0x20, 0x22]);

/** A quoted string's inside: allowed characters, or a backslash and any ASCII character. */
function isQuotedInside(inside: string): boolean {
  for (let i = 0; i < inside.length; i++) {
    const code = inside.charCodeAt(i);
    if (code === 0x5c) {
      i++;
      if (i >= inside.length || inside.charCodeAt(i) > 0x7f) return false;
    } else if (code > 0x7f || UNQUOTABLE.has(code)) return false;
  }
  return true;
}

/** The dot-separated words of a local part, dots inside quoted strings kept; undefined if unclosed. */
function wordsOf(local: string): string[] | undefined {
  const words: string[] = [];
  let word = '';
  let quoted = false;
  for (let i = 0; i < local.length; i++) {
    const char = local[i] as string;
    if (quoted && char === '\\') {
      word += char + (local[++i] ?? '');
      continue;
    }
    if (char === '"' && (word === '' || quoted)) quoted = !quoted;
    if (char === '.' && !quoted) {
      words.push(word);
      word = '';
    } else word += char;
  }
  if (quoted) return undefined;
  words.push(word);
  return words;
}

function isDomain(domain: string): boolean {
  if (domain.startsWith('[') && domain.endsWith(']')) {
    const literal = domain.slice(1, -1);
    if (/^IPv6:/i.test(literal)) return isIPv6(literal.slice(5));
    return isIPv4(literal);
  }
  const labels = domain.split('.');
  if (labels.length < 2 || labels.some((label) => label.length >= 64)) return false;
  const last = labels.pop() as string;
  return labels.every((label) => LABEL.test(label)) && LAST_LABEL.test(last);
}
