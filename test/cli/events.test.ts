/**
 * `npx mautic-relay events show ID…` and `events list` (contract §4) on dynalite, found as a
 * running local stack's (`--local`): every sender's outcomes, the current one of each event, the
 * filters, the exit codes, and the off switch.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DynamoDbOutcomeStore } from '../../functions/adapters/dynamodb-outcome-store.ts';
import type { OutcomeRecord } from '../../functions/core/outcome-records.ts';
import { runCli } from '../../infra/cli/cli.ts';
import { EXIT } from '../../infra/cli/errors.ts';
import { endpointsPathIn, writeLocalEndpoints } from '../../infra/cli/local-endpoints.ts';
import { type LocalDynamoDb, startLocalDynamoDb } from '../support/dedup.ts';

const NOW = Date.now();
const iso = (ms: number) => new Date(ms).toISOString();
let db: LocalDynamoDb;
let store: DynamoDbOutcomeStore;
let tableName: string;
const dirs: string[] = [];

beforeAll(async () => {
  db = await startLocalDynamoDb();
  tableName = `outcomes-${randomUUID().slice(0, 8)}`;
  await db.createOutcomeTable(tableName);
  store = new DynamoDbOutcomeStore(db.client, tableName, {
    retentionSeconds: 3600,
    clock: Date,
  });
  const base = {
    entity: 'contacts',
    action: 'create',
    acceptedAt: iso(NOW - 60_000),
    attempts: 1,
  } as const;
  const records: OutcomeRecord[] = [
    {
      ...base,
      eventId: 'a',
      sender: 'webhook#1',
      slot: 'queued',
      status: 'queued',
      updatedAt: iso(NOW - 60_000),
      attempts: 0,
    },
    {
      ...base,
      eventId: 'a',
      sender: 'webhook#1',
      slot: 'state',
      status: 'delivered',
      updatedAt: iso(NOW - 50_000),
      mauticIds: [12],
      httpStatus: 201,
      deliveredAt: iso(NOW - 50_000),
      callId: 'call-a',
    },
    // The same id from another sender: another event.
    {
      ...base,
      eventId: 'a',
      sender: 'api-key#1',
      slot: 'queued',
      status: 'queued',
      updatedAt: iso(NOW - 40_000),
      attempts: 0,
    },
    {
      ...base,
      eventId: 'b',
      sender: 'webhook#1',
      slot: 'state',
      action: 'addToSegment',
      status: 'dead_lettered',
      updatedAt: iso(NOW - 30_000),
      reason: 'mautic_rejected_item',
      detail: 'Mautic found no segment 5',
      httpStatus: 404,
    },
    {
      ...base,
      eventId: 'c',
      sender: 'webhook#1',
      slot: 'state',
      entity: 'companies',
      status: 'retrying',
      updatedAt: iso(NOW - 3 * 3600_000),
      lastFailure: { class: 'mautic_server', httpStatus: 502 },
      nextAttemptAt: iso(NOW),
    },
  ];
  expect(await store.write(records, Date.now() + 10_000)).toBe(0);
});

afterAll(async () => {
  await db.close();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** A directory with an endpoints file, as a running npm start leaves it. */
function localStack(outcomes: { outcomeTableName?: string; outcomeRetentionSeconds?: number }) {
  const dir = mkdtempSync(join(tmpdir(), 'relay-events-'));
  dirs.push(dir);
  writeLocalEndpoints(endpointsPathIn(dir), {
    ingestUrl: 'http://127.0.0.1:1/events',
    sqsEndpoint: 'http://127.0.0.1:1',
    queueUrl: 'http://127.0.0.1:1/q',
    deadLetterQueueUrl: 'http://127.0.0.1:1/dlq',
    secretsEndpoint: 'http://127.0.0.1:1',
    tokenSecretId: 'token',
    dynamodbEndpoint: db.endpoint,
    ...outcomes,
    pid: process.pid,
    startedAt: iso(NOW),
  });
  return dir;
}

async function run(argv: string[], dir: string) {
  const out: string[] = [];
  let err = '';
  const code = await runCli(argv, {
    stdout: (line) => out.push(line),
    stderr: (text) => {
      err += text;
    },
    env: { MAUTIC_RELAY_DIR: dir },
    progressBar: false,
    now: () => NOW,
    sleep: async () => {},
    interrupted: () => false,
    readStdin: async () => new Uint8Array(),
    readSecret: async () => '',
  });
  return { code, out: out.join('\n'), err };
}

describe('events --local', () => {
  it("shows each sender's current outcome of an id, in §1.6's shape with the sender", async () => {
    const dir = localStack({ outcomeTableName: tableName, outcomeRetentionSeconds: 3600 });

    const { code, out } = await run(['events', 'show', 'a', 'b', '--local', '--json'], dir);

    expect(code).toBe(EXIT.ok);
    const events = JSON.parse(out).events as Array<Record<string, unknown>>;
    expect(events.map((e) => [e.eventId, e.sender, e.status])).toEqual(
      expect.arrayContaining([
        ['a', 'webhook#1', 'delivered'],
        ['a', 'api-key#1', 'queued'],
        ['b', 'webhook#1', 'dead_lettered'],
      ]),
    );
    expect(events).toHaveLength(3);
    expect(events.find((e) => e.sender === 'webhook#1' && e.eventId === 'a')).toEqual({
      eventId: 'a',
      entity: 'contacts',
      action: 'create',
      status: 'delivered',
      acceptedAt: iso(NOW - 60_000),
      updatedAt: iso(NOW - 50_000),
      attempts: 1,
      mauticIds: [12],
      httpStatus: 201,
      deliveredAt: iso(NOW - 50_000),
      callId: 'call-a',
      sender: 'webhook#1',
    });
  });

  it('says which ids it does not know, and exits 1', async () => {
    const dir = localStack({ outcomeTableName: tableName, outcomeRetentionSeconds: 3600 });

    const { code, out, err } = await run(['events', 'show', 'b', 'zzz', '--local'], dir);

    expect(code).toBe(EXIT.failed);
    expect(out).toContain(
      'dead_lettered  contacts addToSegment  b (from webhook#1): mautic_rejected_item 404, Mautic found no segment 5',
    );
    expect(err).toContain('No outcome of zzz');
  });

  it('lists the newest first, filtered by status, entity, action and time', async () => {
    const dir = localStack({ outcomeTableName: tableName, outcomeRetentionSeconds: 3600 });
    const list = async (...filters: string[]) => {
      const { code, out } = await run(['events', 'list', '--local', '--json', ...filters], dir);
      expect(code).toBe(EXIT.ok);
      return (JSON.parse(out).events as Array<{ eventId: string; sender: string }>).map(
        (e) => `${e.eventId}/${e.sender}`,
      );
    };

    expect(await list()).toEqual(['b/webhook#1', 'a/api-key#1', 'a/webhook#1', 'c/webhook#1']);
    expect(await list('--status', 'queued')).toEqual(['a/api-key#1']);
    expect(await list('--since', '2h')).toEqual(['b/webhook#1', 'a/api-key#1', 'a/webhook#1']);
    expect(await list('--entity', 'companies')).toEqual(['c/webhook#1']);
    expect(await list('--action', 'addToSegment')).toEqual(['b/webhook#1']);
    expect(await list('--limit', '1')).toEqual(['b/webhook#1']);
    const lines = await run(['events', 'list', '--local', '--status', 'retrying'], dir);
    expect(lines.out).toContain('c (from webhook#1): try 1 failed, mautic_server 502; next at');
  });

  it('says outcomes are off when the retention is 0, and what to do when there is no table', async () => {
    const off = await run(
      ['events', 'show', 'a', '--local'],
      localStack({ outcomeTableName: tableName, outcomeRetentionSeconds: 0 }),
    );
    const older = await run(['events', 'list', '--local'], localStack({}));

    expect(off.code).toBe(EXIT.failed);
    expect(off.err).toContain('keeps no outcomes of events (OUTCOME_RETENTION_SECONDS=0)');
    expect(older.code).toBe(EXIT.setup);
    expect(older.err).toContain('start it again with this version');
  });

  it.each([
    [['events', '--local'], /events needs one of: show ID…, list/],
    [['events', 'show', '--local'], /events show needs one or more event ids/],
    [['events', 'show', 'a', '--status', 'queued', '--local'], /--status is for events list/],
    [['events', 'list', 'a', '--local'], /events list takes no ids/],
    [
      ['events', 'list', '--status', 'done', '--local'],
      /--status must be one of: queued, retrying/,
    ],
    [['events', 'list', '--action', 'upsert', '--local'], /--action must be one of: create/],
    [['events', 'list', '--since', 'soon', '--local'], /--since must be like 90s/],
    [['events', 'list', '--limit', '0', '--local'], /--limit must be a whole number from 1/],
  ])('refuses %j before reading anything', async (argv, message) => {
    const { code, err } = await run(argv, '/nonexistent');
    expect(code).toBe(EXIT.usage);
    expect(err).toMatch(message);
  });
});
