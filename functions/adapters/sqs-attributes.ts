import type { MessageAttributeValue } from '@aws-sdk/client-sqs';

/**
 * The most UTF-8 bytes the relay writes in one attribute value: a dead letter's detail (a
 * Mautic message, a mapping error) is cut there. Every other value is far shorter.
 */
export const MAX_ATTRIBUTE_BYTES = 1024;

/**
 * One code point SQS takes in a message or a String attribute: #x9, #xA, #xD, #x20–#xD7FF,
 * #xE000–#xFFFD, #x10000–#x10FFFF (XML 1.0's characters). Anything else, an unpaired surrogate
 * included, is one code point that does not match.
 */
const SQS_CHARACTER = /^[\t\n\r\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]$/u;

/**
 * `value` as a String attribute SQS cannot refuse: each character SQS does not take replaced by
 * U+FFFD, cut to at most `maxBytes` of UTF-8 between two characters (never inside a surrogate
 * pair or a UTF-8 sequence), and `-` for an empty value, which SQS refuses too. One value SQS
 * refused would refuse the whole message: a dead letter that could not be kept is sent to Mautic
 * again and again until the queue moves it without a reason.
 */
export function sqsAttributeText(value: string, maxBytes = MAX_ATTRIBUTE_BYTES): string {
  let text = '';
  let bytes = 0;
  // for…of walks code points: a surrogate pair is one step, an unpaired surrogate one of its own.
  for (const char of value) {
    const safe = SQS_CHARACTER.test(char) ? char : '\uFFFD';
    const size = utf8Bytes(safe.codePointAt(0) ?? 0);
    if (bytes + size > maxBytes) break;
    text += safe;
    bytes += size;
  }
  return text === '' ? '-' : text;
}

/** A String message attribute holding `value` as `sqsAttributeText` makes it. */
export function stringAttribute(value: string, maxBytes?: number): MessageAttributeValue {
  return { DataType: 'String', StringValue: sqsAttributeText(value, maxBytes) };
}

function utf8Bytes(codePoint: number): number {
  if (codePoint < 0x80) return 1;
  if (codePoint < 0x800) return 2;
  return codePoint < 0x10000 ? 3 : 4;
}
