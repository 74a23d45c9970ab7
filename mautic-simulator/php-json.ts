/**
 * PHP's json_encode, as Mautic's answers are written: the escaped slashes, the \u escapes and
 * the array-or-object choice behind Mautic's batch responses.
 */
/**
 * PHP's json_encode. `hex` adds the JSON_HEX_* flags that Symfony's JsonResponse uses (so an
 * apostrophe becomes \u0027). A Map stands for a PHP array: it becomes a JSON array only when its
 * keys are exactly 0..n-1 in order, otherwise an object, which is the root of Mautic's batch
 * response quirk. Object properties whose value is undefined are left out.
 */
export function phpJsonEncode(value: unknown, options: { hex?: boolean } = {}): string {
  return encodeValue(value, options.hex === true);
}

/**
 * A value whose json_encode output is computed once, for a part many answers repeat: within a
 * value given to phpJsonEncode it is encoded as `value` is (the text is only reused without
 * `hex`). `value` must not change afterwards.
 */
export class EncodedJson {
  readonly value: unknown;
  readonly json: string;
  constructor(value: unknown) {
    this.value = value;
    this.json = phpJsonEncode(value);
  }
}

// Written for speed as much as for PHP: a 200-contact answer is about 1 MB of JSON, and the
// simulator's thread encoding it competes for the CPU with the relay it serves in the benches.
function encodeValue(value: unknown, hex: boolean): string {
  switch (typeof value) {
    case 'string':
      return encodeString(value, hex);
    case 'number':
      return Number.isFinite(value) ? String(value) : '0';
    case 'boolean':
      return value ? 'true' : 'false';
    case 'object':
      if (value === null) return 'null';
      if (value instanceof EncodedJson) return hex ? encodeValue(value.value, true) : value.json;
      if (value instanceof Map) return encodeMap(value, hex);
      if (Array.isArray(value)) return encodeList(value, hex);
      return encodeObject(value as Record<string, unknown>, hex);
    default:
      return 'null';
  }
}

function encodeList(items: readonly unknown[], hex: boolean): string {
  let out = '[';
  for (let i = 0; i < items.length; i++) {
    if (i > 0) out += ',';
    out += encodeValue(items[i], hex);
  }
  return `${out}]`;
}

function encodeMap(map: Map<unknown, unknown>, hex: boolean): string {
  let index = 0;
  let isList = true;
  for (const key of map.keys()) {
    if (String(key) !== String(index++)) {
      isList = false;
      break;
    }
  }
  let out = isList ? '[' : '{';
  let first = true;
  for (const [key, item] of map) {
    if (!first) out += ',';
    first = false;
    if (!isList) out += `${encodeString(String(key), hex)}:`;
    out += encodeValue(item, hex);
  }
  return out + (isList ? ']' : '}');
}

function encodeObject(object: Record<string, unknown>, hex: boolean): string {
  let out = '{';
  let first = true;
  for (const key of Object.keys(object)) {
    const item = object[key];
    if (item === undefined) continue;
    if (!first) out += ',';
    first = false;
    out += `${encodeString(key, hex)}:${encodeValue(item, hex)}`;
  }
  return `${out}}`;
}

/** What json_encode writes as it is: ASCII from the space up, but the quote, backslash and slash. */
const PLAIN = /^[\x20\x21\x23-\x2e\x30-\x5b\x5d-\x7f]*$/;
/** What JSON.stringify leaves that PHP escapes: the slash, and every non-ASCII UTF-16 unit. */
const PHP_ONLY_ESCAPES = /[/\u0080-\uffff]/g;
/** The characters JSON_HEX_* escapes (the quote among them), which none of the others share. */
const HEX_CHARACTERS = /[<>&'"]/;
// JSON_HEX_TAG | JSON_HEX_AMP | JSON_HEX_APOS | JSON_HEX_QUOT, in PHP's own spelling.
const HEX_ESCAPES: Record<string, string> = {
  '<': '\\u003C',
  '>': '\\u003E',
  '&': '\\u0026',
  "'": '\\u0027',
  '"': '\\u0022',
};

function encodeString(text: string, hex: boolean): string {
  const hexed = hex && HEX_CHARACTERS.test(text);
  if (!hexed && PLAIN.test(text)) return `"${text}"`;
  if (hexed) {
    // The quote's escape differs from JSON.stringify's, so these strings are encoded in parts.
    return `"${text
      .split(/([<>&'"])/)
      .map((part, index) =>
        index % 2 === 1 ? HEX_ESCAPES[part] : encodeString(part, false).slice(1, -1),
      )
      .join('')}"`;
  }
  // JSON.stringify escapes the quote, the backslash and the control characters as PHP does
  // (\b \t \n \f \r, else \u00xx in lower case) and a lone surrogate as \udxxx; PHP also
  // escapes the slash and, without JSON_UNESCAPED_UNICODE, every non-ASCII UTF-16 unit (so a
  // character outside the BMP becomes a surrogate pair), in lower case.
  return JSON.stringify(text).replace(PHP_ONLY_ESCAPES, (char) =>
    char === '/' ? '\\/' : `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}
