import { SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { mockClient } from 'aws-sdk-client-mock';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import {
  MAX_ATTRIBUTE_BYTES,
  sqsAttributeText,
  stringAttribute,
} from '../../functions/adapters/sqs-attributes.ts';
import { SqsSourceDeadLetters } from '../../functions/adapters/sqs-source-dead-letters.ts';

/** What SQS takes in a String attribute, as SQS documents it (XML 1.0's characters). */
const SQS_TEXT = /^[\t\n\r\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]+$/u;
const ALLOWED_CHARACTER = /^[\t\n\r\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]$/u;

/** Each code point SQS would refuse as U+FFFD: what the helper keeps, before any cut. */
const sanitized = (value: string) =>
  [...value].map((char) => (ALLOWED_CHARACTER.test(char) ? char : '\uFFFD')).join('');

/**
 * Any UTF-16: arbitrary code units (unpaired surrogates, pairs cut in half), whole code points
 * of every plane, and strings built of the characters at the edges of every rule.
 */
const anyText = fc.oneof(
  fc.string({ unit: fc.integer({ min: 0, max: 0xffff }).map((unit) => String.fromCharCode(unit)) }),
  fc.string({ unit: 'binary', maxLength: 600 }),
  fc.string({
    unit: fc.constantFrom('a', '-', 'é', '€', '😀', '\t', '\u0001', '\u007f', '\ud800', '\udfff'),
    maxLength: 700,
  }),
  fc.string({
    unit: fc.constantFrom('\uFFFE', '\uFFFF', '\uFFFD', '\uE000', '\uD7FF', '\u{10FFFF}'),
  }),
);

describe('sqsAttributeText', () => {
  it('gives text SQS takes, within the byte limit, cut only between characters, for any string', () => {
    fc.assert(
      fc.property(anyText, fc.integer({ min: 1, max: 1_100 }), (value, maxBytes) => {
        const text = sqsAttributeText(value, maxBytes);
        const whole = sanitized(value);

        expect(text).toMatch(SQS_TEXT);
        expect(Buffer.byteLength(text)).toBeLessThanOrEqual(maxBytes);
        // No half of a surrogate pair: UTF-8 carries it there and back unchanged.
        expect(Buffer.from(text, 'utf8').toString('utf8')).toBe(text);
        // A prefix of what SQS would take, as long as fits: the next character would not.
        const kept = whole.startsWith(text) ? text : '';
        if (kept === '') expect(text).toBe('-');
        const next = [...whole.slice(kept.length)][0];
        if (next !== undefined) expect(Buffer.byteLength(kept + next)).toBeGreaterThan(maxBytes);
      }),
      { numRuns: 2_000 },
    );
  });

  it('leaves text SQS takes as it is when it fits', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', minLength: 1, maxLength: 100 }), (value) => {
        fc.pre(SQS_TEXT.test(value) && Buffer.byteLength(value) <= MAX_ATTRIBUTE_BYTES);
        expect(sqsAttributeText(value)).toBe(value);
      }),
    );
  });

  it.each([
    ['a\u0001b', 'a\uFFFDb'],
    ['key\ud800', 'key\uFFFD'],
    ['\udc00\ud83d', '\uFFFD\uFFFD'],
    ['\uFFFE\uFFFF', '\uFFFD\uFFFD'],
    ['tab\there', 'tab\there'],
    ['', '-'],
  ])('replaces what SQS refuses: %j', (value, expected) => {
    expect(sqsAttributeText(value)).toBe(expected);
  });

  it(`cuts at ${MAX_ATTRIBUTE_BYTES} bytes of UTF-8 by default, never inside a character`, () => {
    expect(sqsAttributeText('😀'.repeat(300))).toBe('😀'.repeat(256));
    expect(sqsAttributeText(`a${'😀'.repeat(300)}`)).toBe(`a${'😀'.repeat(255)}`);
    expect(sqsAttributeText('€'.repeat(400))).toBe('€'.repeat(341));
    expect(stringAttribute('x'.repeat(2_000), 10)).toEqual({
      DataType: 'String',
      StringValue: 'x'.repeat(10),
    });
  });
});

describe('SqsSourceDeadLetters', () => {
  const sqs = mockClient(SQSClient);
  afterEach(() => {
    sqs.reset();
  });

  it('writes every attribute as SQS takes it, whatever the key and the error quote', async () => {
    sqs.on(SendMessageCommand).resolves({ MessageId: 'm-1' });
    const body = '{"v":1,"source":"shop","eventId":"shop:\\u0001\\ud800"}';

    await new SqsSourceDeadLetters(
      new SQSClient({ region: 'eu-west-1' }),
      'https://sqs/dlq',
    ).deadLetter({
      id: 'shop:\u0001\ud800',
      source: 'shop',
      body,
      reason: 'mapping_failed',
      detail: `map: Unable to cast "\u0007${'😀'.repeat(600)}"`,
      receivedAt: '2026-11-21T12:00:00.000Z',
    });

    const input = sqs.commandCalls(SendMessageCommand)[0]?.args[0].input;
    expect(input?.MessageBody).toBe(body);
    const attributes = input?.MessageAttributes ?? {};
    expect(Object.keys(attributes).sort()).toEqual([
      'relay.detail',
      'relay.eventId',
      'relay.firstReceivedAt',
      'relay.reason',
      'relay.source',
    ]);
    for (const { DataType, StringValue = '' } of Object.values(attributes)) {
      expect(DataType).toBe('String');
      expect(StringValue).toMatch(SQS_TEXT);
      expect(Buffer.byteLength(StringValue)).toBeLessThanOrEqual(MAX_ATTRIBUTE_BYTES);
    }
    expect(attributes['relay.eventId']?.StringValue).toBe('shop:\uFFFD\uFFFD');
    expect(attributes['relay.detail']?.StringValue).toMatch(/^map: Unable to cast "\uFFFD😀+$/u);
  });
});
