import { type ChildProcess, spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { MauticSimulator } from '../../mautic-simulator/server.ts';
import { operatorCommand, post, startRelay, stopRunning } from '../support/relay-process.ts';
import { until } from '../support/until.ts';

/**
 * The operator commands against a real `npm start` (contract §4): dead letters with their
 * reasons, a redrive once the cause is fixed, an interrupted redrive, status and senders.
 * The commands run in this process (the same runCli the bin runs), except the redrive that is
 * killed, which runs as its own process.
 */
const children: ChildProcess[] = [];

afterEach(async () => {
  for (const child of children.splice(0)) {
    if (child.exitCode !== null || child.signalCode !== null) continue;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    try {
      process.kill(-(child.pid ?? 0), 'SIGKILL');
      await exited;
    } catch {
      // Already gone.
    }
  }
  await stopRunning();
});

/** `npm start` with its own endpoints directory; `env` points the operator commands at it. */
async function startOpsRelay() {
  const relay = await startRelay({});
  // A short hide time: a read killed half-way gives its dead letters back within seconds.
  const env = { MAUTIC_RELAY_DIR: relay.dir, MAUTIC_RELAY_HIDE_SECONDS: '3' };
  return { ...relay, env };
}

const cli = operatorCommand;

async function json<T = Record<string, unknown>>(argv: string[], env: Record<string, string>) {
  const { code, out, err } = await cli([...argv, '--json'], env);
  if (code !== 0) throw new Error(`${argv.join(' ')} exited ${code}: ${err}`);
  return JSON.parse(out) as T;
}

/** Posts `events` signed (or with the given signature); answers the status. */
async function postEvents(url: string, events: unknown, signature?: string): Promise<number> {
  const headers: Record<string, string> = signature ? { 'webhook-signature': signature } : {};
  return (await post(url, JSON.stringify(events), headers)).status;
}

/**
 * Whether the dead-letter queue holds `count` letters (`status --local`: the queue's counters,
 * where each `dead-letters` read ends in a long poll of a second that finds nothing more) and the
 * relay has printed `lines` `dead-lettered` lines in all: it prints each after its letter is
 * sent, so the count can come first. Waited for, then asserted exactly.
 */
async function deadLetters(
  env: Record<string, string>,
  output: string[],
  count: number,
  lines = count,
): Promise<boolean> {
  const status = await json<{ deadLetters: { count: number | null } }>(['status', '--local'], env);
  return (
    status.deadLetters.count === count &&
    output.filter((line) => line.startsWith('dead-lettered ')).length >= lines
  );
}

const companyEdits = (count: number) =>
  Array.from({ length: count }, (_, i) => ({
    entity: 'companies',
    action: 'edit',
    id: i + 1,
    data: { companyname: `Fixed ${i + 1}` },
  }));

/** Items Mautic took in company edit calls made from `since` on. */
const editedItems = (sim: MauticSimulator, since: number) =>
  sim.requests
    .filter((r) => r.path === '/api/companies/batch/edit' && r.at >= since && r.status === 200)
    .reduce((sum, r) => sum + (r.items ?? 0), 0);

const allFixed = (sim: MauticSimulator, count: number) =>
  sim.records('companies').filter((c) => String(c.companyname).startsWith('Fixed')).length ===
  count;

describe('operator commands against npm start', () => {
  it('lists refused events with their reasons, redrives them once the cause is fixed, and they are delivered once', async () => {
    const { sim, url, output, env, child } = await startOpsRelay();
    // Edits of companies Mautic does not have (yet): 404 per item, dead-lettered at once.
    expect(await postEvents(url, companyEdits(20))).toBe(202);
    expect(
      await postEvents(url, {
        entity: 'contacts',
        action: 'edit',
        id: 999,
        data: { firstname: 'X' },
      }),
    ).toBe(202);
    await until(
      () => deadLetters(env, output, 21),
      30_000,
      () => output.join('\n'),
    );

    const list = await json<{
      count: number;
      byReason: Record<string, number>;
      items: Array<Record<string, unknown>>;
    }>(['dead-letters', '--local'], env);
    expect(list.byReason).toEqual({ mautic_rejected_item: 21 });
    expect(list.items).toHaveLength(21);
    for (const item of list.items) {
      expect(Object.keys(item).sort()).toEqual(
        [
          'action',
          'deadLetteredAt',
          'detail',
          'entity',
          'eventId',
          'firstReceivedAt',
          'reason',
          'status',
        ].sort(),
      );
      expect(item).toMatchObject({ action: 'edit', reason: 'mautic_rejected_item', status: 404 });
      expect(Date.parse(String(item.deadLetteredAt))).toBeGreaterThanOrEqual(
        Date.parse(String(item.firstReceivedAt)),
      );
    }
    const times = list.items.map((item) => Date.parse(String(item.deadLetteredAt)));
    expect(times).toEqual([...times].sort((a, b) => b - a));
    expect(JSON.stringify(list)).not.toContain('Fixed');
    const contacts = await json<{ count: number }>(
      ['dead-letters', '--local', '--entity', 'contacts'],
      env,
    );
    expect(contacts.count).toBe(1);

    // The local log tells the truth: refused, not delivered; one line per dead letter.
    // 20 refused in all; the event source may hand the burst to two invocations at once (FIFO).
    const refusedCompanies = output
      .map((line) => /^refused (\d+) of companies edit: \1 items?, 404×\1/.exec(line)?.[1])
      .filter((count) => count !== undefined)
      .reduce((sum, count) => sum + Number(count), 0);
    expect(refusedCompanies).toBe(20);
    expect(output.filter((line) => line.startsWith('dead-lettered '))).toHaveLength(21);

    const status = await json(['status', '--local'], env);
    expect(status).toEqual({
      ingestUrl: url,
      queue: { visible: 0, inFlight: 0, delayed: 0, oldestAgeSeconds: null },
      deadLetters: { count: 21 },
      token: {
        accessTokenSecondsLeft: expect.any(Number),
        refreshTokenSecondsLeft: null,
        updatedAt: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T/),
        mauticVersion: '5.1.1',
      },
      dashboardUrl: null,
      // Mautic answered every call: the shared circuit is closed.
      mautic: expect.objectContaining({ circuit: 'closed', nextProbeAt: null, lastFailure: null }),
    });
    expect(
      (status.token as { accessTokenSecondsLeft: number }).accessTokenSecondsLeft,
    ).toBeGreaterThan(60);

    // Redriven before the cause is fixed: each event goes to Mautic once more and comes back as
    // a new dead letter while the (slowed) redrive still runs; it is not moved round again.
    const earlyStart = Date.now();
    const early = await json<{ matched: number; moved: number; left: number }>(
      ['redrive', '--local', '--entity', 'companies', '--rate', '5'],
      env,
    );
    // The 20 there at the start are moved; those written since (the same events, refused again
    // while the redrive runs) are not moved round again: they count in `left`, as many as were
    // written before the redrive ended.
    expect(early.moved).toBe(20);
    expect(early.left).toBeLessThanOrEqual(20);
    expect(early.matched).toBe(early.moved + early.left);
    await until(
      () => deadLetters(env, output, 21, 41),
      30_000,
      () => output.join('\n'),
    );
    expect(output.filter((line) => line.startsWith('dead-lettered '))).toHaveLength(41);
    const triedAgain = sim.requests
      .filter((r) => r.path === '/api/companies/batch/edit' && r.at >= earlyStart)
      .reduce((sum, r) => sum + (r.items ?? 0), 0);
    expect(triedAgain).toBe(20);

    // The cause is fixed: the companies exist now.
    for (let i = 1; i <= 20; i++)
      expect(sim.seed('companies', { companyname: `Old ${i}` }).id).toBe(i);
    const dry = await json(['redrive', '--local', '--entity', 'companies', '--dry-run'], env);
    expect(dry).toEqual({ matched: 20, moved: 0, left: 20 });
    const redriveStarted = Date.now();
    const redrive = await json(['redrive', '--local', '--entity', 'companies'], env);
    expect(redrive).toEqual({ matched: 20, moved: 20, left: 0 });
    await until(
      () => allFixed(sim, 20),
      20_000,
      () => output.join('\n'),
    );
    expect(editedItems(sim, redriveStarted)).toBe(20);

    const after = await json<{ count: number; items: Array<{ entity: string }> }>(
      ['dead-letters', '--local'],
      env,
    );
    expect(after.count).toBe(1);
    expect(after.items[0]?.entity).toBe('contacts');

    // A refused request is one line with its status, error code and request id.
    expect(
      await postEvents(url, companyEdits(1), `v1,${Buffer.alloc(32).toString('base64')}`),
    ).toBe(401);
    await until(
      () => output.some((line) => /^refused request \S+: 401 unauthorized$/.test(line)),
      5_000,
      () => output.join('\n'),
    );

    process.kill(-(child.pid ?? 0), 'SIGINT');
    await until(
      () => output.includes('Stopped.'),
      15_000,
      () => output.join('\n'),
    );
    expect(output).toContain('1 event was in the dead-letter queue.');
    // Gone with the stack: the commands say no local stack runs.
    const gone = await cli(['status', '--local'], env);
    expect(gone.code).toBe(3);
    expect(gone.err).toContain('No local stack is running');
  }, 120_000);

  it('a redrive killed half-way loses nothing, and running it again finishes the job', async () => {
    const { sim, url, output, env } = await startOpsRelay();
    expect(await postEvents(url, companyEdits(60))).toBe(202);
    await until(
      () => deadLetters(env, output, 60),
      30_000,
      () => output.join('\n'),
    );
    for (let i = 1; i <= 60; i++) sim.seed('companies', { companyname: `Old ${i}` });

    const started = Date.now();
    const redrive = spawn(
      process.execPath,
      ['infra/cli/mautic-relay.ts', 'redrive', '--local', '--rate', '10'],
      { detached: true, stdio: 'ignore', env: { ...process.env, ...env } },
    );
    children.push(redrive);
    await until(
      () => editedItems(sim, started) >= 10,
      20_000,
      () => `nothing redriven yet: ${output.join('\n')}`,
    );
    const killed = new Promise((resolve) => redrive.once('exit', resolve));
    process.kill(-(redrive.pid ?? 0), 'SIGKILL');
    await killed;
    expect(allFixed(sim, 60)).toBe(false);

    const rerun = await json<{ matched: number; moved: number; left: number }>(
      ['redrive', '--local', '--rate', '100'],
      env,
    );
    expect(rerun.left).toBe(0);
    expect(rerun.moved).toBeGreaterThan(0);
    expect(rerun.moved).toBeLessThan(60);
    await until(
      () => allFixed(sim, 60),
      30_000,
      () =>
        `${sim.records('companies').filter((c) => String(c.companyname).startsWith('Fixed')).length} of 60 fixed`,
    );
    const status = await json<{ deadLetters: { count: number }; queue: { visible: number } }>(
      ['status', '--local'],
      env,
    );
    expect(status.deadLetters.count).toBe(0);
    // At least once: an event sent but not yet deleted when the redrive was killed is sent again.
    expect(editedItems(sim, started)).toBeGreaterThanOrEqual(60);
  }, 120_000);

  it('senders --local adds a key the running ingest accepts within a second, and removes it', async () => {
    const { url, env } = await startOpsRelay();
    const listed = await json<{ senders: Array<{ id: string; createdAt: string }> }>(
      ['senders', 'list', '--local'],
      env,
    );
    expect(listed.senders).toEqual([
      { id: 'webhook-secret-1', kind: 'webhook_secret', createdAt: expect.any(String) },
    ]);
    const added = await json<{ added: { id: string; secret: string } }>(
      ['senders', 'add-key', '--local'],
      env,
    );
    const withKey = async () =>
      (
        await fetch(url, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            authorization: `Bearer ${added.added.secret}`,
          },
          body: JSON.stringify({
            entity: 'contacts',
            action: 'create',
            data: { email: 'k@example.com' },
          }),
        })
      ).status;
    await until(
      async () => (await withKey()) === 202,
      5_000,
      () => 'key not accepted',
    );
    // send --local finds the ingest URL the same way, and signs with the stack's own webhook
    // secret unless given a credential: a stale WEBHOOK_SECRET of an earlier start is not read.
    const file = join(env.MAUTIC_RELAY_DIR, 'event.json');
    writeFileSync(
      file,
      JSON.stringify({ entity: 'contacts', action: 'create', data: { email: 's@example.com' } }),
    );
    const stale = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
    const own = await cli(['send', '--local', file], { ...env, WEBHOOK_SECRET: stale });
    expect(own.code).toBe(0);
    expect(own.out).toContain('202 Accepted');
    const keyed = await cli(['send', '--local', '--api-key', added.added.secret, file], env);
    expect(keyed.code).toBe(0);
    expect(keyed.out).toContain('202 Accepted');
    const wrong = await cli(['send', '--local', '--secret', stale, file], env);
    expect(wrong.code).toBe(1);
    expect(wrong.out).toContain('401');
    await json(['senders', 'remove', added.added.id, '--local'], env);
    await until(
      async () => (await withKey()) === 401,
      5_000,
      () => 'key still accepted',
    );
  }, 60_000);
});
