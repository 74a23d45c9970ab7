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
