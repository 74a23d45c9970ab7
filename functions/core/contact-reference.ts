/**
 * One canonical form per contact reference (contract §5): the value of a `match`, or a contact
 * create's email, as Mautic stores and compares it. The record key (the FIFO group), the lookup
 * sent to Mautic and the check of each contact it lists all use it, so no two of them can
 * disagree on which contact a reference names.
 *
 * - An email: Mautic's cleaning, then A–Z folded to a–z (`canonicalEmail`).
 * - Any other field: the ASCII white space around it dropped, A–Z folded to a–z.
 *
 * A contact Mautic lists counts only when its stored value has this very form: SQL's collation
 * folds accents, U+212A into K, and more, and a look-alike must never resolve a reference.
 */
import { asciiLower, canonicalEmail, trimAscii } from './email-address.ts';

/** A reference's value in its canonical form, for `field`. */
export function canonicalReference(field: string, value: string): string {
  return field === 'email' ? canonicalEmail(value) : asciiLower(trimAscii(value));
}

/**
 * A contact's stored value as a reference's canonical form is compared with: the ASCII white
 * space around it dropped (MySQL's PAD SPACE ignores trailing spaces) and A–Z folded, nothing
 * else, not even what Mautic's collation would ignore. Not cleaned: a stored value that is not
 * what cleaning makes is not the contact an email reference names.
 */
export function storedForm(stored: string): string {
  return asciiLower(trimAscii(stored));
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: the characters Mautic's cleaning encodes.
const CONTROL = /[\x00-\x1f\x7f]/;

/**
 * Why Mautic's `where … in` lookup cannot carry a value exactly, if it cannot (reference §11.1):
 * InputHelper::cleanArray encodes control characters as entities that html_entity_decode leaves
 * (most of them) or that str_getcsv then splits at (line breaks); and str_getcsv's backslash
 * escape takes the closing quote of a quoted value (one holding a comma or a quote) that ends in
 * an odd run of backslashes, running it into the next value.
 */
export function lookupProblem(value: string): string | undefined {
  const quoted = /[",]/.test(value);
  const trailingBackslashes = /\\*$/.exec(value)?.[0].length ?? 0;
  if (CONTROL.test(value) || (quoted && trailingBackslashes % 2 === 1)) {
    return "must not hold a control character, nor end in a backslash when it holds a comma or a double quote (Mautic's lookup cannot carry it)";
  }
  return undefined;
}

/**
 * A value as PHP's `str_getcsv($val, ',', '"')` (escape `\`) reads it back: as it is unless it
 * holds a comma or a quote; else quoted, each quote doubled except one a backslash escapes
 * (str_getcsv keeps both the backslash and the quote after it, and would read a doubled one as
 * the end of the value). Values `lookupProblem` refuses are never given.
 */
export function csvField(value: string): string {
  if (!/[",]/.test(value)) return value;
  let field = '';
  let escaped = false;
  for (const char of value) {
    if (escaped) escaped = false;
    else if (char === '\\') escaped = true;
    else if (char === '"') field += '"';
    field += char;
  }
  return `"${field}"`;
}
