/**
 * `events show ID…` and `events list` (contract §4): what became of events (§1.6), read from the
 * outcome table with the operator's own credentials, every sender's events alike. The same view
 * `GET /events/{eventId}` gives a sender, with the sender named.
 */
import { type AttributeValue, QueryCommand, ScanCommand } from '@aws-sdk/client-dynamodb';
import { fromItem } from '../../functions/adapters/dynamodb-outcome-store.ts';
import { CONTACT_ACTIONS } from '../../functions/core/events.ts';
import { currentOutcomes, outcomeAnswer } from '../../functions/core/ingest/outcome-view.ts';
import { ENTITY_PATTERN } from '../../functions/core/mautic-names.ts';
import {
  OUTCOME_STATUSES,
  OUTCOME_TABLE,
  type OutcomeRecord,
  type OutcomeStatus,
} from '../../functions/core/outcome-records.ts';
import type { Command, Values } from './command.ts';
import { parseSince } from './dead-letter-filters.ts';
import { EXIT, SetupError, UsageError } from './errors.ts';
import { withTarget } from './options.ts';
import type { Target } from './target.ts';

/** Most ids one `events show` takes, as a sender's `?ids=` does. */
const MAX_SHOW_IDS = 100;
/**
 * `events list` reads the table with a Scan, page by page, and stops after this many items: at
 * a few days of retention and modest traffic that is the whole table; beyond it, it says the
 * list is partial (a GSI would cost a write per event more, for a command run now and then).
 */
const MAX_SCANNED_ITEMS = 100_000;
const SCAN_PAGE_ITEMS = 1_000;

const ACTIONS = ['create', 'edit', 'delete', ...Object.keys(CONTACT_ACTIONS)];

/** `events show ID…` and `events list`, as `npx mautic-relay events --help` shows it. */
export const eventsCommand: Command = {
  name: 'events',
  usage:
    'events (show ID… | list [--status S] [--entity E] [--action A] [--since T] [--limit N]) (--env NAME | --local) [--json]',
  summary: "what became of events: each one's outcome, by id or by filter",
  details: `Reads each event's outcome (contract §1.6) from the relay's outcome table: queued, retrying
(its tries, the last failure, the next try), delivered (Mautic's record ids, the status, the call
that carried it, as its mautic_call log line names it), dead_lettered (the reason; dead-letters
lists the letter), ignored (a source's filter), skipped (an addPoints already applied) or
coalesced (into which later event). Ids, statuses and times only: never a field's value. Every
sender's events, each named with its sender. Outcomes are kept OUTCOME_RETENTION_SECONDS
(outcomeRetentionSeconds in cdk.json); a source's event is found by the id its answer gave, a
payload its filter ignored by <source>:<idempotency key>.
  show ID…     the events of these ids (at most ${MAX_SHOW_IDS}); exit 1 when one is not known
  list         the newest outcomes first; it reads at most ${MAX_SCANNED_ITEMS.toLocaleString('en')} of the table's records and
               says so when it stopped before the end
  --env NAME   a deployed environment (the usual AWS environment; dynamodb:Query and
               dynamodb:Scan on its outcome table)
  --local      the running "npm start"
  --json       print {"events":[…]} on stdout
  --status S   list: only this status: ${OUTCOME_STATUSES.slice(0, 4).join(', ')},
               ${OUTCOME_STATUSES.slice(4).join(', ')}
  --entity E   list: only this entity
  --action A   list: only this action (create, edit, delete, addToSegment, …)
  --since T    list: only what changed in the last T (90s, 30m, 2h, 7d) or since an ISO 8601 time
  --limit N    list: at most N (default 100)`,
  options: {
    env: { type: 'string' },
    local: { type: 'boolean', default: false },
    json: { type: 'boolean', default: false },
    status: { type: 'string' },
    entity: { type: 'string' },
    action: { type: 'string' },
    since: { type: 'string' },
    limit: { type: 'string' },
  },
  positionals: 1 + MAX_SHOW_IDS,
  run: (values, positionals, io) => {
    const query = parseEventsCommand(values, positionals, io.now());
    return withTarget(values, io, (target) => runEvents(target, query, values.json === true, io));
  },
};

interface ListFilters {
  status?: OutcomeStatus | undefined;
  entity?: string | undefined;
  action?: string | undefined;
  /** Epoch ms. */
  since?: number | undefined;
  limit: number;
}

/** What `events` was asked, checked before anything is read. */
type EventsQuery = { kind: 'show'; ids: string[] } | { kind: 'list'; filters: ListFilters };

/** Checks the command line: a `UsageError` naming what to fix, or the query. */
function parseEventsCommand(values: Values, positionals: string[], now: number): EventsQuery {
  const [what, ...ids] = positionals;
  const text = (name: string) => (typeof values[name] === 'string' ? values[name] : undefined);
  const filtersGiven = ['status', 'entity', 'action', 'since', 'limit'].filter(
    (name) => text(name) !== undefined,
  );
  if (what === 'show') {
    if (ids.length === 0) throw new UsageError('events show needs one or more event ids');
    if (filtersGiven.length > 0)
      throw new UsageError(`--${filtersGiven[0]} is for events list, not events show`);
    return { kind: 'show', ids: [...new Set(ids)] };
  }
  if (what !== 'list') throw new UsageError('events needs one of: show ID…, list');
  if (ids.length > 0)
    throw new UsageError(`Unexpected argument "${ids[0]}": events list takes no ids`);
  return { kind: 'list', filters: listFilters(text, now) };
}

function listFilters(text: (name: string) => string | undefined, now: number): ListFilters {
  const status = text('status');
  if (status !== undefined && !(OUTCOME_STATUSES as ReadonlyArray<string>).includes(status))
    throw new UsageError(`--status must be one of: ${OUTCOME_STATUSES.join(', ')}`);
  const entity = text('entity');
  if (entity !== undefined && !ENTITY_PATTERN.test(entity))
    throw new UsageError('--entity must be a Mautic entity such as contacts');
  const action = text('action');
  if (action !== undefined && !ACTIONS.includes(action))
    throw new UsageError(`--action must be one of: ${ACTIONS.join(', ')}`);
  const sinceText = text('since');
  const since = sinceText === undefined ? undefined : parseSince(sinceText, now);
  if (sinceText !== undefined && since === undefined)
    throw new UsageError('--since must be like 90s, 30m, 2h or 7d, or an ISO 8601 time');
  const limitText = text('limit') ?? '100';
  const limit = Number(limitText);
  if (!/^\d+$/.test(limitText) || limit < 1 || limit > 10_000)
    throw new UsageError('--limit must be a whole number from 1 to 10000');
  return { status: status as OutcomeStatus | undefined, entity, action, since, limit };
}

interface Io {
  stdout: (line: string) => void;
  stderr: (text: string) => void;
}

/** Runs a checked query on its target; resolves the exit code. */
async function runEvents(
  target: Target,
  query: EventsQuery,
  json: boolean,
  io: Io,
): Promise<number> {
  const outcomes = target.outcomes;
  if (outcomes === undefined) {
    throw new SetupError(
      target.local
        ? 'This npm start keeps no outcomes of events: it is a version before them; start it again with this version.'
        : `The stack MauticRelay-${target.name} has no outcome table: deploy this version of the relay (npx cdk deploy -c env=${target.name}).`,
    );
  }
  if (outcomes.retentionSeconds === 0) {
    io.stderr(
      `${target.local ? 'This npm start' : target.name} keeps no outcomes of events (${target.local ? 'OUTCOME_RETENTION_SECONDS=0' : 'outcomeRetentionSeconds 0 in cdk.json'}): the mautic_call and dead_lettered log lines name each event's id.\n`,
    );
    return EXIT.failed;
  }
  const table = { ...outcomes, name: outcomes.tableName };
  const found =
    query.kind === 'show' ? await show(table, query.ids) : await list(table, query.filters);
  if (json) io.stdout(JSON.stringify({ events: found.records.map(answerOf) }));
  else for (const line of eventLines(found.records)) io.stdout(line);
  const missing = query.kind === 'show' ? query.ids.filter((id) => !found.ids.has(id)) : [];
  for (const id of missing)
    io.stderr(
      `No outcome of ${id}: no event of this id, or its outcome is past the retention (${outcomes.retentionSeconds} s).\n`,
    );
  if (!found.complete)
    io.stderr(
      `The list is partial: it read the ${MAX_SCANNED_ITEMS.toLocaleString('en')} records it reads at most, not the whole table. Narrow it with events show ID, or look the event ids up in the mautic_call log lines.\n`,
    );
  return missing.length === 0 ? EXIT.ok : EXIT.failed;
}

type Table = { dynamodb: NonNullable<Target['outcomes']>['dynamodb']; name: string };

interface Found {
  records: OutcomeRecord[];
  ids: Set<string>;
  complete: boolean;
}

/** Every sender's records of each id: one Query per id, consistent. */
async function show(table: Table, ids: string[]): Promise<Found> {
  const records: OutcomeRecord[] = [];
  for (const id of ids) {
    let start: Record<string, AttributeValue> | undefined;
    do {
      const page = await table.dynamodb.send(
        new QueryCommand({
          TableName: table.name,
          KeyConditionExpression: '#id = :id',
          ExpressionAttributeNames: { '#id': OUTCOME_TABLE.partitionKey },
          ExpressionAttributeValues: { ':id': { S: id } },
          ConsistentRead: true,
          ExclusiveStartKey: start,
        }),
      );
      records.push(...live(page.Items ?? []));
      start = page.LastEvaluatedKey;
    } while (start !== undefined);
  }
  const current = currentOutcomes(records);
  return { records: current, ids: new Set(current.map((r) => r.eventId)), complete: true };
}

/** A bounded Scan, filtered in DynamoDB by entity, action and time; the status after merging. */
async function list(table: Table, filters: ListFilters): Promise<Found> {
  const conditions: string[] = [];
  const names: Record<string, string> = {};
  const values: Record<string, AttributeValue> = {};
  const equal = (field: string, value: string | undefined) => {
    if (value === undefined) return;
    conditions.push(`#${field} = :${field}`);
    names[`#${field}`] = field;
    values[`:${field}`] = { S: value };
  };
  equal('entity', filters.entity);
  equal('action', filters.action);
  if (filters.since !== undefined) {
    conditions.push('#updatedAt >= :since');
    names['#updatedAt'] = 'updatedAt';
    values[':since'] = { S: new Date(filters.since).toISOString() };
  }
  const records: OutcomeRecord[] = [];
  let scanned = 0;
  let start: Record<string, AttributeValue> | undefined;
  do {
    const page = await table.dynamodb.send(
      new ScanCommand({
        TableName: table.name,
        Limit: SCAN_PAGE_ITEMS,
        ExclusiveStartKey: start,
        ...(conditions.length === 0
          ? {}
          : {
              FilterExpression: conditions.join(' AND '),
              ExpressionAttributeNames: names,
              ExpressionAttributeValues: values,
            }),
      }),
    );
    records.push(...live(page.Items ?? []));
    scanned += page.ScannedCount ?? 0;
    start = page.LastEvaluatedKey;
  } while (start !== undefined && scanned < MAX_SCANNED_ITEMS);
  const matching = currentOutcomes(records)
    .filter((record) => filters.status === undefined || record.status === filters.status)
    .sort((a, b) => (a.updatedAt < b.updatedAt ? 1 : a.updatedAt > b.updatedAt ? -1 : 0))
    .slice(0, filters.limit);
  return { records: matching, ids: new Set(), complete: start === undefined };
}

/** The records of items not past their TTL (DynamoDB may sweep them days later). */
function live(items: ReadonlyArray<Record<string, AttributeValue>>): OutcomeRecord[] {
  const now = Math.floor(Date.now() / 1000);
  return items.flatMap((item) => {
    const read = fromItem(item);
    return read === undefined || read.expiresAt <= now ? [] : [read.record];
  });
}

/** The §1.6 answer, with the sender: an operator sees every sender's events. */
function answerOf(record: OutcomeRecord): Record<string, unknown> {
  return { ...outcomeAnswer(record), sender: record.sender };
}

/** One line per event: when, status, what, which event and sender, and the status's facts. */
function eventLines(records: ReadonlyArray<OutcomeRecord>): string[] {
  if (records.length === 0) return ['No outcomes match.'];
  return records.map((record) => {
    const what = `${record.entity ?? '-'} ${record.action ?? '-'}`;
    return `${record.updatedAt}  ${record.status.padEnd(13)}  ${what}  ${record.eventId} (from ${record.sender})${factsOf(record)}`;
  });
}

function factsOf(record: OutcomeRecord): string {
  const status = (code: number | null | undefined) => (code == null ? '' : ` ${code}`);
  switch (record.status) {
    case 'retrying':
      return `: try ${record.attempts} failed, ${record.lastFailure?.class}${status(record.lastFailure?.httpStatus)}; next at ${record.nextAttemptAt}`;
    case 'delivered':
      return `: Mautic id ${record.mauticIds?.join(', ') || '(none)'},${status(record.httpStatus)} at ${record.deliveredAt}${record.callId ? `, call ${record.callId}` : ''}`;
    case 'dead_lettered':
      return `: ${record.reason}${status(record.httpStatus)}, ${record.detail}`;
    case 'skipped':
      return `: ${record.detail}`;
    case 'coalesced':
      return `: into ${record.into}`;
    case 'ignored':
      return ": its source's filter said no";
    default:
      return `: accepted ${record.acceptedAt}`;
  }
}
