import { isIPv4 } from 'node:net';

/*
 * The email check of the ingest, made to accept what Mautic accepts and refuse what it refuses,
 * so that an address Mautic would refuse costs no Mautic call and no dead letter, and one it
 * takes is never refused here (docs/mautic.md §5.3). Mautic cleans an address first (PHP's
 * FILTER_SANITIZE_EMAIL: every character but ASCII letters, digits and !#$%&'*+-=?^_`{|}~@.[]
 * dropped; its batch test sends `…@email.com,` and gets the contact updated), then its
 * `EmailAddress` constraint applies `filter_var($email, FILTER_VALIDATE_EMAIL)` (without the
 * Unicode flag) and refuses `^ & * %`. PHP checks with one large regular expression; on a cleaned
 * address (no quotes, spaces or backslashes left) it comes down to these rules, written out:
 *
 * - at most 320 bytes, 254 characters, and a local part of at most 64;
 * - the local part: dot-separated, non-empty words of the characters cleaning leaves;
 * - the domain: two or more dot-separated labels of ASCII letters, digits and inner hyphens
 *   (an `xn--` prefix allowed), the last starting with a letter (or `xn--`), none of 64
 *   characters or more; or an IPv4 address literal (an IPv6 one loses its colons to cleaning).
 *
 * test/core/email-address.test.ts checks it against the simulator's copy of PHP's expression.
 */

const WORD = /^[A-Za-z0-9!#$%&'*+\-=?^_`{|}~]+$/;
const LABEL = /^(?:xn--)?[A-Za-z0-9]+(?:-+[A-Za-z0-9]+)*$/;
const LAST_LABEL = /^(?:[A-Za-z][A-Za-z0-9]*|xn--[A-Za-z0-9]+)(?:-+[A-Za-z0-9]+)*$/;
/** Mautic refuses these on top of PHP's check ("has characters not allowed"). */
const NOT_ALLOWED_BY_MAUTIC = /[\^&*%]/;

/** FILTER_SANITIZE_EMAIL: what Mautic keeps of an address (and stores). */
function cleanedEmail(value: string): string {
  return value.replace(/[^A-Za-z0-9!#$%&'*+\-=?^_`{|}~@.[\]]/g, '');
}

/**
 * A–Z to a–z and nothing else: how Mautic's columns compare the ASCII an address is made of,
 * without a locale. `toLowerCase()` folds more (U+212A KELVIN SIGN becomes `k`, U+0130 becomes
 * `i` and a combining dot), and so would turn one contact's look-alike into that contact.
 */
export function asciiLower(text: string): string {
  return text.replace(/[A-Z]+/g, (upper) => upper.toLowerCase());
}

/** White space of ASCII (space, tab, line breaks, vertical tab, form feed) around a value, gone. */
export function trimAscii(text: string): string {
  return text.replace(/^[ \t\n\v\f\r]+|[ \t\n\v\f\r]+$/g, '');
}

/**
 * The one form an email reference is compared, grouped and looked up in: the address Mautic
 * stores (cleaned), folded in ASCII only. `" Ann@Example.com"` and `"ann@example.com"` are one;
 * `"\u212Aate@example.com"` is `ate@example.com`, what a create with it makes, never `kate@…`.
 */
export function canonicalEmail(value: string): string {
  return asciiLower(cleanedEmail(value));
}

/**
 * Whether Mautic's cleaning would change the address beyond the ASCII white space around it:
 * such an address would name one contact in a create (Mautic upserts on the cleaned form) and
 * another, or none, in a lookup, so the ingest refuses it.
 */
export function cleaningChanges(value: string): boolean {
  const trimmed = trimAscii(value);
  return cleanedEmail(trimmed) !== trimmed;
}

export function isMauticEmail(value: string): boolean {
  const address = cleanedEmail(value);
  if (address.length > 254 || NOT_ALLOWED_BY_MAUTIC.test(address)) return false;
  const at = address.lastIndexOf('@');
  const local = address.slice(0, at);
  if (at <= 0 || local.length > 64) return false;
  if (!local.split('.').every((word) => WORD.test(word))) return false;
  return isDomain(address.slice(at + 1));
}

function isDomain(domain: string): boolean {
  // An address literal: only IPv4 is left once cleaned (cleaning drops an IPv6 one's colons).
  if (domain.startsWith('[') && domain.endsWith(']')) return isIPv4(domain.slice(1, -1));
  const labels = domain.split('.');
  if (labels.length < 2 || labels.some((label) => label.length >= 64)) return false;
  const last = labels.pop() as string;
  return labels.every((label) => LABEL.test(label)) && LAST_LABEL.test(last);
}
