/**
 * PHP functions whose output a client can tell apart, for the Mautic simulator: parse_str,
 * urlencode and urldecode, empty(), is_numeric, the (int) cast, parse_url, filter_var's email,
 * URL and special-character filters, html_entity_decode, str_getcsv and serialize (json_encode
 * is php-json.ts).
 */
/** A PHP array as parse_str builds it: ordered, string keys, string or nested-array values. */
export type PhpArray = Map<string, PhpValue>;
/** One value of a parsed query string or form body. */
export type PhpValue = string | PhpArray;

/** PHP's urldecode: `+` is a space, malformed `%` sequences stay as they are. */
export function phpUrldecode(text: string): string {
  const source = Buffer.from(text, 'utf8');
  const bytes: number[] = [];
  for (let i = 0; i < source.length; i++) {
    const byte = source[i] ?? 0;
    if (byte === 0x2b) {
      bytes.push(0x20);
      continue;
    }
    if (byte === 0x25 && i + 2 < source.length) {
      const pair = source.subarray(i + 1, i + 3).toString('latin1');
      if (/^[0-9A-Fa-f]{2}$/.test(pair)) {
        bytes.push(Number.parseInt(pair, 16));
        i += 2;
        continue;
      }
    }
    bytes.push(byte);
  }
  return Buffer.from(bytes).toString('utf8');
}

/**
 * PHP's parse_str, which is how PHP reads query strings and form bodies: `a[]=1&a[]=2` and
 * `a[0]=1` make nested arrays, spaces and dots in names become underscores, later keys win.
 */
export function parsePhpQuery(query: string): PhpArray {
  const result: PhpArray = new Map();
  for (const pair of query.split('&')) {
    if (pair === '') continue;
    const eq = pair.indexOf('=');
    const name = phpUrldecode(eq === -1 ? pair : pair.slice(0, eq)).replace(/^ +/, '');
    const value = eq === -1 ? '' : phpUrldecode(pair.slice(eq + 1));
    assignPhpKey(result, name, value);
  }
  return result;
}

function assignPhpKey(target: PhpArray, name: string, value: string): void {
  const open = name.indexOf('[');
  let base = open === -1 ? name : name.slice(0, open);
  const segments: string[] = [];
  if (open !== -1) {
    let rest = name.slice(open);
    while (rest.startsWith('[')) {
      const close = rest.indexOf(']');
      if (close === -1) break;
      segments.push(rest.slice(1, close));
      rest = rest.slice(close + 1);
    }
    // An unmatched '[' cannot start an array, so PHP keeps the name with the '[' turned into '_'.
    if (segments.length === 0) base = name.replace('[', '_');
  }
  base = base.replace(/[ .]/g, '_');
  if (base === '') return;
  let container = target;
  let key = base;
  for (const segment of segments) {
    let next = container.get(key);
    if (!(next instanceof Map)) {
      next = new Map();
      container.set(key, next);
    }
    container = next;
    key = segment === '' ? String(nextPhpIndex(container)) : segment;
  }
  container.set(key, value);
}

function nextPhpIndex(array: PhpArray): number {
  let next = 0;
  for (const key of array.keys()) {
    if (isPhpIntKey(key)) next = Math.max(next, Number(key) + 1);
  }
  return next;
}

/** Whether PHP would store this array key as an integer. */
export function isPhpIntKey(key: string): boolean {
  return /^(0|-?[1-9]\d{0,17})$/.test(key);
}

/** The JSON-like value json_decode would have produced for the same PHP array. */
export function phpArrayToJs(value: PhpValue): unknown {
  if (typeof value === 'string') return value;
  const entries = [...value.entries()];
  if (entries.every(([key], index) => key === String(index))) {
    return entries.map(([, item]) => phpArrayToJs(item));
  }
  return Object.fromEntries(entries.map(([key, item]) => [key, phpArrayToJs(item)]));
}

/** PHP's empty(): null, '', '0', 0, false and empty arrays. */
export function phpEmpty(value: unknown): boolean {
  if (value === undefined || value === null || value === false || value === 0) return true;
  if (value === '' || value === '0') return true;
  if (Array.isArray(value)) return value.length === 0;
  if (value instanceof Map) return value.size === 0;
  if (typeof value === 'object') return Object.keys(value).length === 0;
  return false;
}

/** PHP's is_numeric for a string (PHP 8 allows leading and trailing whitespace). */
export function phpIsNumeric(text: string): boolean {
  return /^\s*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\s*$/.test(text);
}

/** FILTER_SANITIZE_EMAIL: drops every character that may not appear in an email address. */
export function sanitizeEmail(text: string): string {
  return text.replace(/[^A-Za-z0-9!#$%&'*+\-=?^_`{|}~@.[\]]/g, '');
}

// PHP's FILTER_VALIDATE_EMAIL pattern (Michael Rushton's, ext/filter/logical_filters.c, the
// non-Unicode variant). The domain's `(?:label\.){1,126}){1,}` is written as `(?:label\.)+`:
// the same language, without the exponential backtracking that PCRE caps and JavaScript does not.
const EMAIL_PATTERN =
  // biome-ignore lint/suspicious/noControlCharactersInRegex: quoted local parts may hold control characters.
  /^(?!(?:(?:\x22?\x5C[\x00-\x7E]\x22?)|(?:\x22?[^\x5C\x22]\x22?)){255,})(?!(?:(?:\x22?\x5C[\x00-\x7E]\x22?)|(?:\x22?[^\x5C\x22]\x22?)){65,}@)(?:(?:[\x21\x23-\x27\x2A\x2B\x2D\x2F-\x39\x3D\x3F\x5E-\x7E]+)|(?:\x22(?:[\x01-\x08\x0B\x0C\x0E-\x1F\x21\x23-\x5B\x5D-\x7F]|(?:\x5C[\x00-\x7F]))*\x22))(?:\.(?:(?:[\x21\x23-\x27\x2A\x2B\x2D\x2F-\x39\x3D\x3F\x5E-\x7E]+)|(?:\x22(?:[\x01-\x08\x0B\x0C\x0E-\x1F\x21\x23-\x5B\x5D-\x7F]|(?:\x5C[\x00-\x7F]))*\x22)))*@(?:(?:(?!.*[^.]{64,})(?:(?:xn--)?[a-z0-9]+(?:-+[a-z0-9]+)*\.)+(?:(?:[a-z][a-z0-9]*)|(?:(?:xn--)[a-z0-9]+))(?:-+[a-z0-9]+)*)|(?:\[(?:(?:IPv6:(?:(?:[a-f0-9]{1,4}(?::[a-f0-9]{1,4}){7})|(?:(?!(?:.*[a-f0-9][:\]]){7,})(?:[a-f0-9]{1,4}(?::[a-f0-9]{1,4}){0,5})?::(?:[a-f0-9]{1,4}(?::[a-f0-9]{1,4}){0,5})?)))|(?:(?:IPv6:(?:(?:[a-f0-9]{1,4}(?::[a-f0-9]{1,4}){5}:)|(?:(?!(?:.*[a-f0-9]:){5,})(?:[a-f0-9]{1,4}(?::[a-f0-9]{1,4}){0,3})?::(?:[a-f0-9]{1,4}(?::[a-f0-9]{1,4}){0,3}:)?)))?(?:(?:25[0-5])|(?:2[0-4][0-9])|(?:1[0-9]{2})|(?:[1-9]?[0-9]))(?:\.(?:(?:25[0-5])|(?:2[0-4][0-9])|(?:1[0-9]{2})|(?:[1-9]?[0-9]))){3}))\]))$/i;

/** FILTER_VALIDATE_EMAIL without flags (ASCII only, at most 320 characters). */
export function isValidEmail(text: string): boolean {
  return text.length <= 320 && EMAIL_PATTERN.test(text);
}

/** PHP's urlencode (RFC 1738 flavour used by http_build_query: spaces become `+`). */
export function phpUrlencode(text: string): string {
  let out = '';
  for (const byte of Buffer.from(text, 'utf8')) {
    const char = String.fromCharCode(byte);
    if (/[A-Za-z0-9_.-]/.test(char)) out += char;
    else if (byte === 0x20) out += '+';
    else out += `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

/** The parts of parse_url that matter here; absent parts are undefined, as PHP leaves them unset. */
interface ParsedUrl {
  scheme?: string;
  host?: string;
  port?: string;
  path?: string;
  query?: string;
  fragment?: string;
  userInfo?: string;
}

const URL_PATTERN =
  /^(?:([A-Za-z][A-Za-z0-9+.-]*):)?(?:\/\/(?:([^@/?#]*)@)?(\[[^\]]*\]|[^:/?#]*)(?::(\d*))?)?([^?#]*)(?:\?([^#]*))?(?:#([\s\S]*))?$/;

/** parse_url, close enough for redirect URIs. */
export function parseUrl(uri: string): ParsedUrl {
  const match = URL_PATTERN.exec(uri);
  const parsed: ParsedUrl = {};
  if (!match) return parsed;
  const [, scheme, userInfo, host, port, path, query, fragment] = match;
  if (scheme !== undefined) parsed.scheme = scheme;
  if (userInfo !== undefined) parsed.userInfo = userInfo;
  if (host !== undefined && host !== '') parsed.host = host;
  if (port !== undefined && port !== '') parsed.port = port;
  if (path !== undefined && path !== '') parsed.path = path;
  if (query !== undefined) parsed.query = query;
  if (fragment !== undefined) parsed.fragment = fragment;
  return parsed;
}

/** FILTER_SANITIZE_URL: drops every character that may not appear in a URL. */
export function sanitizeUrl(text: string): string {
  return text.replace(/[^A-Za-z0-9$\-_.+!*'(),{}|\\^~[\]`<>#%";/?:@&=]/g, '');
}

/**
 * PHP's (int) cast: a string's leading number (after whitespace; `1e3` is 1000, `0x1A` is 0),
 * a float truncated, an array 0 when empty and 1 otherwise.
 */
export function phpIntval(value: unknown): number {
  if (typeof value === 'number') return Number.isFinite(value) ? Math.trunc(value) : 0;
  if (typeof value === 'boolean') return value ? 1 : 0;
  if (Array.isArray(value)) return value.length > 0 ? 1 : 0;
  if (value instanceof Map) return value.size > 0 ? 1 : 0;
  if (value !== null && typeof value === 'object') return Object.keys(value).length > 0 ? 1 : 0;
  if (typeof value !== 'string') return 0;
  const leading = /^[ \t\n\r\v\f]*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?/.exec(value);
  const number = leading === null ? 0 : Number(leading[0].trim());
  return Number.isFinite(number) ? Math.trunc(number) : 0;
}

/**
 * filter_var with FILTER_SANITIZE_SPECIAL_CHARS (what InputHelper::clean does): `' " < > &` and
 * the control characters become decimal entities, so `o'hara` becomes `o&#39;hara`.
 */
export function sanitizeSpecialChars(text: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: the filter encodes control characters.
  return text.replace(/['"<>&\x00-\x1f]/g, (char) => `&#${char.charCodeAt(0)};`);
}

const NAMED_ENTITIES: Record<string, string> = {
  amp: '&',
  lt: '<',
  gt: '>',
  quot: '"',
  nbsp: '\u00a0',
};

/** Code points html_entity_decode decodes from a numeric entity under ENT_HTML401. */
function decodableCodePoint(code: number): boolean {
  if (code === 0x09 || code === 0x0a || code === 0x0d) return true;
  if (code >= 0x20 && code <= 0x7e) return true;
  if (code >= 0xa0 && code <= 0xd7ff) return true;
  return (
    code >= 0xe000 &&
    code <= 0x10ffff &&
    (code & 0xffff) < 0xfffe &&
    (code < 0xfdd0 || code > 0xfdef)
  );
}

/**
 * html_entity_decode with PHP 8's defaults (ENT_QUOTES | ENT_HTML401, UTF-8), one pass: numeric
 * entities and the named ones a cleaned value can hold; anything else stays as it is.
 */
export function htmlEntityDecode(text: string): string {
  return text.replace(
    /&(?:#(\d{1,7})|#[xX]([0-9a-fA-F]{1,6})|([A-Za-z]+));/g,
    (entity, dec, hex, name) => {
      if (name !== undefined) return NAMED_ENTITIES[name] ?? entity;
      const code = dec !== undefined ? Number(dec) : Number.parseInt(hex, 16);
      return decodableCodePoint(code) ? String.fromCodePoint(code) : entity;
    },
  );
}

/**
 * str_getcsv($text, ',', '"'): fields are not trimmed; a field that starts with a double quote
 * (after blanks) may hold commas, `""` in it is one quote, and what follows its closing quote up
 * to the next comma is kept. Like PHP, an empty string gives one null field.
 */
export function strGetCsv(text: string): Array<string | null> {
  const line = text.replace(/(\r\n|\n|\r)$/, '');
  if (line === '') return [null];
  const fields: string[] = [];
  let at = 0;
  while (at <= line.length) {
    const quoted = /^[ \t\v\f]*"/.exec(line.slice(at));
    let field = '';
    if (quoted !== null) {
      at += quoted[0].length;
      while (at < line.length) {
        const char = line[at] ?? '';
        if (char === '\\' && at + 1 < line.length) {
          field += char + (line[at + 1] ?? '');
          at += 2;
        } else if (char === '"' && line[at + 1] === '"') {
          field += '"';
          at += 2;
        } else if (char === '"') {
          at += 1;
          break;
        } else {
          field += char;
          at += 1;
        }
      }
    }
    const comma = line.indexOf(',', at);
    const end = comma === -1 ? line.length : comma;
    fields.push(field + line.slice(at, end));
    at = end + 1;
  }
  return fields;
}

/**
 * PHP's serialize() for what field properties hold: arrays (a JS array is a list, an object a
 * map), strings (their length in bytes), integers, floats, booleans and null.
 */
export function phpSerialize(value: unknown): string {
  if (value === null || value === undefined) return 'N;';
  if (typeof value === 'boolean') return `b:${value ? 1 : 0};`;
  if (typeof value === 'number') return Number.isInteger(value) ? `i:${value};` : `d:${value};`;
  if (typeof value === 'string') return `s:${Buffer.byteLength(value)}:"${value}";`;
  const entries: Array<[string | number, unknown]> = Array.isArray(value)
    ? value.map((item, index) => [index, item])
    : Object.entries(value as Record<string, unknown>);
  const body = entries
    .map(
      ([key, item]) =>
        `${typeof key === 'number' ? `i:${key};` : phpSerialize(key)}${phpSerialize(item)}`,
    )
    .join('');
  return `a:${entries.length}:{${body}}`;
}
