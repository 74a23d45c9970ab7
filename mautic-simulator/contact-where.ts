/**
 * `where[n][col|expr|val]` of `GET /api/contacts` (reference §11.1), as
 * FetchCommonApiController::getWhereFromRequest and CommonRepository::buildWhereClauseFromArray
 * build it, compiled to a test on a stored contact. Every value is first HTML-encoded by
 * InputHelper::cleanArray, so `eq` compares `o&#39;hara@x.com`, while `in` decodes it again and
 * splits it as CSV. What makes Mautic throw (a missing `expr` or `col`, a column the table lacks,
 * an array where a string belongs) throws PhpError, answered as its generic 500.
 */
import { CORE_COLUMNS, DEFAULT_CONTACT_FIELDS } from './contact-fields.ts';
import { contactPoints } from './field-groups.ts';
import {
  htmlEntityDecode,
  type PhpValue,
  phpEmpty,
  sanitizeSpecialChars,
  strGetCsv,
} from './php.ts';
import {
  collationKey,
  likeMatcher,
  type SqlValue,
  sqlCompare,
  sqlNumber,
  sqlValue,
} from './sql.ts';
import { type EntityState, type StoredRecord, sqlDate } from './store.ts';
import { PhpError } from './symfony.ts';

/** A compiled condition on one contact. */
export type ContactTest = (record: StoredRecord) => boolean;
/** Reads one column of a contact's row. */
export type ColumnReader = (record: StoredRecord) => SqlValue;

const DEFAULT_ALIASES = new Set(DEFAULT_CONTACT_FIELDS.map((field) => field.alias));

function coreColumn(name: string): ColumnReader | undefined {
  const date = (ms: number | null) => (ms === null ? null : sqlDate(ms));
  const readers: Record<string, ColumnReader> = {
    id: (record) => record.id,
    is_published: () => 1,
    date_added: (record) => sqlDate(record.addedAt),
    date_modified: (record) => date(record.modifiedAt),
    date_identified: (record) => date(record.identifiedAt),
    owner_id: (record) => (phpEmpty(record.fields.owner) ? null : sqlValue(record.fields.owner)),
    stage_id: (record) => (phpEmpty(record.fields.stage) ? null : sqlValue(record.fields.stage)),
  };
  return readers[name] ?? (CORE_COLUMNS.has(name) ? () => null : undefined);
}

/** The field a column name (case-insensitive, as MySQL's are) refers to, if the table has it. */
export function fieldAlias(state: EntityState, name: string): string | undefined {
  const lower = name.toLowerCase();
  if (DEFAULT_ALIASES.has(lower)) return lower;
  return [...state.customFields.keys()].find((alias) => alias.toLowerCase() === lower);
}

/** Reads a field of a contact as its column holds it. */
export function fieldReader(alias: string): ColumnReader {
  return alias === 'points' ? contactPoints : (record) => sqlValue(record.fields[alias]);
}

/** The column a `where` names, or undefined when the `leads` table has no such column. */
function contactColumn(state: EntityState, name: string): ColumnReader | undefined {
  const core = coreColumn(name.toLowerCase());
  if (core !== undefined) return core;
  const alias = fieldAlias(state, name);
  return alias === undefined ? undefined : fieldReader(alias);
}

/** InputHelper::cleanArray: every string HTML-encoded; a scalar becomes a one-item list. */
function cleanArray(value: PhpValue | undefined): PhpValue[] {
  const clean = (item: PhpValue): PhpValue =>
    typeof item === 'string'
      ? sanitizeSpecialChars(item)
      : new Map([...item.entries()].map(([key, inner]) => [key, clean(inner)]));
  if (value === undefined || phpEmpty(value)) return [];
  const cleaned = clean(value);
  return typeof cleaned === 'string' ? [cleaned] : [...cleaned.values()];
}

/** InputHelper::alphanum: letters, digits and the allowed characters, trimmed. */
function alphanum(value: PhpValue | undefined, allowed = ''): string {
  if (typeof value !== 'string') throw new PhpError('alphanum() expects a string');
  const pattern = allowed === '' ? /[^0-9a-z]+/gi : /[^0-9a-z_.]+/gi;
  return value.replace(pattern, '').trim();
}

function stringValue(value: PhpValue): string {
  if (typeof value !== 'string') throw new PhpError('array parameter without an array type');
  return value;
}

/**
 * The contacts' `where` as one test (the clauses ANDed), or undefined when it sets none.
 * Top-level statements that carry `internal` are dropped, as the controller does.
 */
export function whereTest(
  state: EntityState,
  where: PhpValue | undefined,
): ContactTest | undefined {
  const statements = cleanArray(where).filter(
    (statement) => !(statement instanceof Map && statement.has('internal')),
  );
  return groupTest(state, statements, 'and');
}

function groupTest(
  state: EntityState,
  clauses: readonly PhpValue[],
  join: 'and' | 'or',
): ContactTest | undefined {
  const tests = clauses.flatMap((clause) => {
    const test = clauseTest(state, clause);
    return test === undefined ? [] : [test];
  });
  if (tests.length === 0) return undefined;
  return join === 'and'
    ? (record) => tests.every((test) => test(record))
    : (record) => tests.some((test) => test(record));
}

function clauseTest(state: EntityState, clause: PhpValue): ContactTest | undefined {
  if (!(clause instanceof Map)) throw new PhpError('where statement is not an array');
  const expr = clause.get('expr');
  if (!phpEmpty(clause.get('internal')) && expr === 'formula') {
    throw new PhpError('the simulator runs no raw SQL');
  }
  if (expr === 'andX' || expr === 'orX') {
    const nested = clause.get('val');
    if (!(nested instanceof Map)) throw new PhpError('andX/orX needs an array of clauses');
    return groupTest(state, [...nested.values()], expr === 'andX' ? 'and' : 'or');
  }
  // CommonRepository::validateWhereClause
  if (phpEmpty(expr)) throw new PhpError('"expr" is missing in the where clause array.');
  if (phpEmpty(clause.get('col')) && phpEmpty(clause.get('column'))) {
    throw new PhpError('"col" is missing in the where clause array.');
  }
  const column = columnOf(state, alphanum(clause.get('column') ?? clause.get('col'), '_.'));
  const value = clause.get('value') ?? clause.get('val') ?? '';
  return exprTest(alphanum(expr), column, value);
}

/** `l.<name>` or `<name>`: another table alias, or a column the table lacks, is a SQL error. */
function columnOf(state: EntityState, col: string): ColumnReader {
  const [prefix, name, ...rest] = col.includes('.') ? col.split('.') : ['l', col];
  const reader = prefix === 'l' && rest.length === 0 ? contactColumn(state, name ?? '') : undefined;
  if (reader === undefined) throw new PhpError(`Unknown column ${col}`);
  return reader;
}

function exprTest(expr: string, column: ColumnReader, value: PhpValue): ContactTest | undefined {
  const compare = (operand: string, accept: (order: number) => boolean): ContactTest => {
    return (record) => {
      const order = sqlCompare(column(record), operand);
      return order !== undefined && accept(order);
    };
  };
  switch (expr) {
    case 'in':
    case 'notIn':
      return inTest(column, strGetCsv(htmlEntityDecode(stringValue(value))), expr === 'in');
    case 'eq':
      return compare(stringValue(value), (order) => order === 0);
    case 'neq':
      return compare(stringValue(value), (order) => order !== 0);
    case 'lt':
      return compare(stringValue(value), (order) => order < 0);
    case 'lte':
      return compare(stringValue(value), (order) => order <= 0);
    case 'gt':
      return compare(stringValue(value), (order) => order > 0);
    case 'gte':
      return compare(stringValue(value), (order) => order >= 0);
    case 'like':
    case 'notLike':
      return likeTest(column, stringValue(value), expr === 'like');
    default:
      return valuelessTest(expr, column, value);
  }
}

function likeTest(column: ColumnReader, pattern: string, like: boolean): ContactTest {
  const matches = likeMatcher(pattern);
  return (record) => {
    const cell = column(record);
    return cell !== null && matches(cell) === like;
  };
}

function valuelessTest(
  expr: string,
  column: ColumnReader,
  value: PhpValue,
): ContactTest | undefined {
  const empty = (cell: SqlValue) => cell === null || sqlCompare(cell, '') === 0;
  switch (expr) {
    case 'isNull':
      return (record) => column(record) === null;
    case 'isNotNull':
      return (record) => column(record) !== null;
    case 'isEmpty':
      return (record) => empty(column(record));
    case 'isNotEmpty':
      return (record) => !empty(column(record));
    case 'between':
    case 'notBetween': {
      // Anything but a two-element array adds no clause.
      if (!(value instanceof Map) || value.size !== 2) return undefined;
      const [low, high] = [...value.values()].map(stringValue) as [string, string];
      return (record) => {
        const [above, below] = [sqlCompare(column(record), low), sqlCompare(column(record), high)];
        if (above === undefined || below === undefined) return false;
        return (above >= 0 && below <= 0) === (expr === 'between');
      };
    }
    default:
      // Not an expression the builder knows with a column (e.g. `equals`): no clause at all.
      return undefined;
  }
}

/** `in` / `notIn`: several CSV values are an IN list, one is `=` / `<>`, none matches nothing. */
function inTest(column: ColumnReader, values: Array<string | null>, include: boolean): ContactTest {
  const strings = values.filter((value): value is string => value !== null);
  const keys = new Set(strings.map(collationKey));
  const numbers = new Set(strings.map(sqlNumber));
  return (record) => {
    const cell = column(record);
    if (cell === null || strings.length === 0) return false;
    const found = typeof cell === 'number' ? numbers.has(cell) : keys.has(collationKey(cell));
    return found === include;
  };
}
