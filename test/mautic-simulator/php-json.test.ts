import { describe, expect, it } from 'vitest';
import { EncodedJson, phpJsonEncode } from '../../mautic-simulator/php-json.ts';

describe("phpJsonEncode: PHP's json_encode, byte for byte", () => {
  it('escapes the slash, every non-ASCII UTF-16 unit and the control characters as PHP does', () => {
    const text = 'a/b "q" \\ \b\t\n\f\r \u0001\u001f \u007f é \u2028 😀 <&\'>';

    expect(phpJsonEncode(text)).toBe(
      '"a\\/b \\"q\\" \\\\ \\b\\t\\n\\f\\r \\u0001\\u001f \u007f \\u00e9 \\u2028 \\ud83d\\ude00 <&\'>"',
    );
    expect(phpJsonEncode(text, { hex: true })).toBe(
      '"a\\/b \\u0022q\\u0022 \\\\ \\b\\t\\n\\f\\r \\u0001\\u001f \u007f \\u00e9 \\u2028 \\ud83d\\ude00 \\u003C\\u0026\\u0027\\u003E"',
    );
  });

  it('shows a Map as a list only when its keys are 0..n-1 in order, and leaves out undefined properties', () => {
    const value = {
      list: new Map([
        ['0', 1],
        ['1', undefined],
      ]),
      object: new Map([
        ['1', 'b'],
        ['0', 'a'],
      ]),
      empty: new Map(),
      gone: undefined,
      numbers: [1.5, -0, Number.NaN, Number.POSITIVE_INFINITY, 1e21],
      flags: [true, false, null],
    };

    expect(phpJsonEncode(value)).toBe(
      '{"list":[1,null],"object":{"1":"b","0":"a"},"empty":[],"numbers":[1.5,0,0,0,1e+21],"flags":[true,false,null]}',
    );
  });

  it('writes an EncodedJson as its value would be written, with or without the hex flags', () => {
    const value = { name: "O'Hara/é", tags: new Map([['x', 1]]) };
    const encoded = new EncodedJson(value);

    expect(phpJsonEncode([encoded, encoded])).toBe(
      `[${phpJsonEncode(value)},${phpJsonEncode(value)}]`,
    );
    expect(phpJsonEncode({ a: encoded }, { hex: true })).toBe(
      `{"a":${phpJsonEncode(value, { hex: true })}}`,
    );
    expect(phpJsonEncode(value, { hex: true })).toBe(
      '{"name":"O\\u0027Hara\\/\\u00e9","tags":{"x":1}}',
    );
  });
});
