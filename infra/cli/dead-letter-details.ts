/**
 * A dead letter's detail as `dead-letters` shows it without `--show-data` (contract §4: no record
 * contents). The relay's own details name fields, never values; Mautic's messages may quote a
 * value (`email: ann@example.com is invalid.`, a value in quotes), and those are masked here.
 */

/** Mautic's refusals that put the value itself before the words (reference §5.3). */
const MAUTIC_VALUE_MESSAGES =
  /(^|: )([^:]*?)( is invalid\.| has characters not allowed in email addresses\.)/g;

/** `detail` with every value it may quote replaced by `…`. */
export function maskedDetail(detail: string | null): string | null {
  if (detail === null) return null;
  return (
    detail
      .replace(MAUTIC_VALUE_MESSAGES, '$1…$3')
      .replace(/"(?:[^"\\]|\\.)*"/g, '"…"')
      // Whatever else looks like an address: an email is the record content most often quoted.
      .replace(/[^\s"'<>(),;:]+@[^\s"'<>(),;:]+/g, '…')
  );
}
