/**
 * `search` of `GET /api/contacts` (reference §11.1): the UI search box's syntax, parsed as
 * SearchStringHelper does (terms split at spaces outside quotes and parentheses, `command:value`,
 * `!` negates, `+` makes the value strict, values lower-cased, one `or`/`and` for the whole list,
 * the second term's) and matched as LeadRepository's commands are: `email:`, `name:`, `tag:`,
 * `company:` and the field commands are SQL LIKE prefixes (`_` and `%` are wildcards), `ids:` an
 * id list, a bare term `%term%` over the catch-all fields. The string is not cleaned.
 */
import { CATCH_ALL_ALIASES } from './contact-fields.ts';
import { type ContactTest, fieldAlias, fieldReader } from './contact-where.ts';
import { phpIntval } from './php.ts';
import { segmentAlias } from './present.ts';
import { likeMatcher, type SqlValue, sqlNumber, sqlValue } from './sql.ts';
import type { EntityState, StoredRecord } from './store.ts';

interface SearchFilter {
  type: string;
  command: string;
  string: string;
  not: boolean;
  strict: boolean;
  /** A parenthesized group; PHP arrays can have gaps, hence the undefined entries. */
  children?: Array<SearchFilter | undefined>;
}

const newFilter = (command: string): SearchFilter => ({
  type: 'and',
  command,
  string: '',
  not: false,
  strict: false,
});

/** PHP's trim. */
const phpTrim = (text: string) => text.replace(/^[ \t\n\r\0\v]+|[ \t\n\r\0\v]+$/g, '');
/** PHP 8's strtolower: ASCII only. */
const asciiLower = (text: string) => text.replace(/[A-Z]/g, (char) => char.toLowerCase());

/** SearchStringHelper::splitUpSearchString, statement for statement. */
function splitUp(input: string, overrideCommand = ''): Array<SearchFilter | undefined> {
  const filters: Array<SearchFilter | undefined> = [newFilter(overrideCommand)];
  const parse = { key: 0, command: overrideCommand, text: '' };
  const at = (key: number) => {
    filters[key] ??= newFilter(overrideCommand);
    return filters[key];
  };
  // setFilter: a type word sets the next term's join; otherwise the term is stored.
  const setFilter = (store: boolean, type = '', setUpNext = true) => {
    if (type !== '') at(parse.key).type = asciiLower(type);
    else if (store) {
      parse.text = phpTrim(asciiLower(parse.text));
      if (['', 'or', 'and'].includes(parse.text)) {
        filters[parse.key] = undefined;
        return;
      }
      storeTerm(at(parse.key), parse.text);
      if (setUpNext) filters[++parse.key] = newFilter(overrideCommand);
    }
    parse.text = '';
    parse.command = overrideCommand;
  };
  for (let pos = 0; pos < input.length; ) {
    const char = input[pos] ?? '';
    parse.text += char;
    pos += 1;
    const more = pos < input.length;
    if (char === ':') {
      parse.command = phpTrim(parse.text.slice(0, -1));
      if (parse.command.startsWith('!')) {
        at(parse.key).not = true;
        parse.command = parse.command.slice(1);
      }
      // A command without a value would search the whole table: it is dropped.
      if (!more) filters[parse.key] = undefined;
      else {
        at(parse.key).command = parse.command;
        parse.text = '';
      }
    } else if (char === ' ') {
      if (parse.text === ' ') continue;
      parse.text = phpTrim(parse.text);
      const word = asciiLower(parse.text);
      setFilter(true, word === 'or' || word === 'and' ? parse.text : '', more);
    } else if (char === '"' || char === '(') {
      pos = closeGroup(input, pos, char, parse, at, setFilter);
    } else if (!more) {
      at(parse.key).command = parse.command;
      setFilter(true, '', false);
    }
  }
  return filters;
}

/** The quote or parenthesis group that starts at `pos`; returns the position after it. */
function closeGroup(
  input: string,
  start: number,
  opener: string,
  parse: { key: number; command: string; text: string },
  at: (key: number) => SearchFilter,
  setFilter: (store: boolean) => void,
): number {
  const closer = opener === '"' ? '"' : ')';
  let [opened, closed] = [1, 1];
  let pos = start;
  while (pos < input.length) {
    const char = input[pos] ?? '';
    parse.text += char;
    pos += 1;
    if (char === closer && opened === closed) {
      if (parse.text.startsWith('!')) {
        at(parse.key).not = true;
        parse.text = parse.text.slice(1);
      }
      if (parse.text.startsWith(opener) && parse.text.endsWith(char)) {
        parse.text = parse.text.slice(1, -1);
      }
      const nested = closer !== '"' && /[ ()]/.test(parse.text);
      if (nested) at(parse.key).children = splitUp(parse.text, parse.command);
      setFilter(!nested);
      break;
    }
    if (char === opener) opened += 1;
    else if (char === closer) closed += 1;
  }
  return pos;
}

/** A term's `+` (strict) and `!` (not) prefixes, as setFilter reads them. */
function storeTerm(filter: SearchFilter, text: string): void {
  let string = text;
  const [strictPos, notPos] = [string.indexOf('+'), string.indexOf('!')];
  if ([strictPos, notPos].some((position) => position === 0 || position === 1)) {
    if (strictPos !== -1 && notPos !== -1) {
      Object.assign(filter, { strict: true, not: true });
      string = string.slice(2);
    } else if (strictPos === 0 && notPos === -1) {
      Object.assign(filter, { strict: true, not: false });
      string = string.slice(1);
    } else if (strictPos === -1 && notPos === 0) {
      Object.assign(filter, { strict: false, not: true });
      string = string.slice(1);
    }
  }
  filter.string = string;
}

/** The contacts' `search` as one test, or undefined when it sets no condition. */
export function searchTest(state: EntityState, search: string): ContactTest | undefined {
  // `!empty($filter['string'])`: "0" searches nothing either.
  if (search === '' || search === '0') return undefined;
  return filtersTest(
    state,
    splitUp(search).filter((filter) => filter !== undefined),
  );
}

/** addAdvancedSearchWhereClause: all terms joined by the second term's type (else the first's). */
function filtersTest(
  state: EntityState,
  filters: ReadonlyArray<SearchFilter | undefined>,
): ContactTest | undefined {
  const first = filters[0];
  if (first === undefined) return undefined;
  const join = (filters[1] ?? first).type;
  const tests = filters.flatMap((filter) => {
    const test = filter === undefined ? undefined : filterTest(state, filter);
    return test === undefined ? [] : [test];
  });
  if (tests.length === 0) return undefined;
  return join === 'or'
    ? (record) => tests.some((test) => test(record))
    : (record) => tests.every((test) => test(record));
}

const LEAD_COMMANDS = new Set([
  'is:anonymous',
  'is:mine',
  'is:unowned',
  'segment',
  'name',
  'company',
  'company_id',
  'email',
  'owner',
  'ip',
  'tag',
  'stage',
  'common',
  'email_sent',
  'email_read',
  'email_queued',
  'email_pending',
  'page_source',
  'page_source_id',
  'import_id',
  'import_action',
  'page_id',
  'sms_sent',
  'web_sent',
  'mobile_sent',
  'ids',
]);

function filterTest(state: EntityState, filter: SearchFilter): ContactTest | undefined {
  if (filter.children !== undefined) return filtersTest(state, filter.children);
  if (filter.command === '') return catchAllTest(filter);
  // isSupportedSearchCommand: a command, a field alias, or `is:` with its subcommand.
  const joined = `${filter.command}:${filter.string}`;
  if (LEAD_COMMANDS.has(joined)) return commandTest(state, { ...filter, command: joined });
  const known =
    LEAD_COMMANDS.has(filter.command) || fieldAlias(state, filter.command) === filter.command;
  if (known) return commandTest(state, filter);
  // Unknown: the whole `command:value` is one strict word.
  return catchAllTest({ ...filter, string: joined, not: false, strict: true });
}

/** addStandardCatchAllWhereClause: LIKE over the catch-all fields (all NOT LIKE when negated). */
function catchAllTest(filter: SearchFilter): ContactTest {
  const wrap = !filter.strict && !filter.string.includes('%');
  const matches = likeMatcher(wrap ? `%${filter.string}%` : filter.string);
  const readers = CATCH_ALL_ALIASES.map(fieldReader);
  if (!filter.not) return (record) => readers.some((read) => matches(read(record)));
  return (record) =>
    readers.every((read) => {
      const cell = read(record);
      return cell !== null && !matches(cell);
    });
}

/** `column LIKE pattern`, or NOT LIKE; NULL matches neither. */
function like(matches: (cell: SqlValue) => boolean, not: boolean) {
  return (cell: SqlValue) => cell !== null && matches(cell) !== not;
}

/** An EXISTS over the contact's related rows, or NOT EXISTS when negated. */
function exists(has: (record: StoredRecord) => boolean, not: boolean): ContactTest {
  return (record) => has(record) !== not;
}

function commandTest(state: EntityState, filter: SearchFilter): ContactTest {
  const { command, string, not } = filter;
  const matcher = likeMatcher(filter.strict ? string : `${string}%`);
  // LIKE, or NOT LIKE when negated; `matched` is the positive one, for EXISTS subqueries.
  const [pattern, matched] = [like(matcher, not), like(matcher, false)];
  const field = fieldReader;
  const links = (record: StoredRecord) => state.links.get(record.id);
  const linkedCompanies = (record: StoredRecord) =>
    [...(links(record)?.companies.keys() ?? [])].flatMap((id) => {
      const company = state.stores.companies.records.get(id);
      return company === undefined ? [] : [company];
    });
  const owner = (record: StoredRecord) => phpIntval(record.fields.owner);
  switch (command) {
    case 'ids': {
      const ids = new Set(string.split(',').map(phpIntval));
      return (record) => ids.has(record.id);
    }
    case 'email':
      return (record) => pattern(field('email')(record));
    case 'name':
      return (record) => pattern(field('firstname')(record)) || pattern(field('lastname')(record));
    case 'company':
      return exists(
        (record) =>
          linkedCompanies(record).some((company) => matched(sqlValue(company.fields.companyname))),
        not,
      );
    case 'company_id':
      return exists((record) => links(record)?.companies.has(sqlNumber(string)) === true, not);
    case 'tag':
      return exists((record) => {
        const tags = Array.isArray(record.fields.tags) ? record.fields.tags : [];
        return tags.some((tag) => matched(String(tag)));
      }, not);
    case 'segment':
      return exists((record) => inSegments(state, record, [string]), not);
    case 'common':
      return exists((record) => inSegments(state, record, string.split('+'), true), not);
    case 'is:anonymous':
      return (record) => (phpEmptyEmail(record) ? !not : not);
    case 'is:unowned':
      return (record) => (owner(record) === 0) !== not;
    case 'is:mine':
      return (record) => (owner(record) === API_USER_ID) !== not;
    default: {
      const alias = fieldAlias(state, command);
      if (alias === command) return (record) => pattern(fieldReader(alias)(record));
      // Emails sent, pages visited, IPs, imports, owners' names, stages: the simulator has none.
      return () => not;
    }
  }
}

/** The API user the simulator's calls act as (`is:mine`). */
const API_USER_ID = 1;

function phpEmptyEmail(record: StoredRecord): boolean {
  return typeof record.fields.email !== 'string' || record.fields.email === '';
}

/** Whether the contact is a current member of the segment(s) with these aliases (any, or all). */
function inSegments(
  state: EntityState,
  record: StoredRecord,
  aliases: readonly string[],
  all = false,
): boolean {
  const rows = state.links.get(record.id)?.segments;
  const member = (alias: string) =>
    [...state.stores.segments.records.values()].some((segment) => {
      const row = rows?.get(segment.id);
      return row !== undefined && !row.manuallyRemoved && segmentAlias(segment) === alias;
    });
  return all ? aliases.every(member) : aliases.some(member);
}
