import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  contacts,
  deadLettered,
  drained,
  post,
  postAs,
  startRelay,
  stop,
  stopRunning,
} from '../support/relay-process.ts';
import { until } from '../support/until.ts';

afterEach(stopRunning);

describe('npm start, end to end', () => {
  it('delivers 2,000 creates sent 50 per request in no more than twice the ideal number of Mautic calls, then edits and deletes', async () => {
    // The batching is measured: without the bound's counters, whose two dynalite calls per
    // record make each 50-record request outlast the batch function's 100 ms of quiet, so that
    // it delivers each request's events on their own (performance.md, Ingest).
    const { sim, url, output, child } = await startRelay({}, { MAX_RECORD_EVENTS_PER_MINUTE: '0' });
    const events = contacts(2000, 'bulk');

    for (let i = 0; i < events.length; i += 50) {
      const response = await post(url, JSON.stringify(events.slice(i, i + 50)));
      expect(response).toEqual({ status: 202, body: expect.objectContaining({ accepted: 50 }) });
    }
    await until(
      () => sim.records('contacts').length === 2000,
      60_000,
      () => `${sim.records('contacts').length} delivered`,
    );

    const creates = sim.requests.filter((r) => r.path === '/api/contacts/batch/new');
    expect(creates.length).toBeLessThanOrEqual(2 * Math.ceil(2000 / 200));
    expect(creates.every((r) => r.status === 201)).toBe(true);
    expect(
      output.some((line) =>
        /^delivered contacts create: \d+ items, 201×\d+, ids [\d -]+( …)?, \d+ ms; call \S+:( msg_e2e\d+:\d+→#\d+)+$/.test(
          line,
        ),
      ),
    ).toBe(true);

    const [first, second, third] = sim.records('contacts');
    const changes = [
      { entity: 'contacts', action: 'edit', id: first?.id, data: { firstname: 'Edited' } },
      { entity: 'contacts', action: 'edit', id: second?.id, data: { city: 'Oslo' } },
      { entity: 'contacts', action: 'delete', id: third?.id },
      { entity: 'contacts', action: 'delete', id: 999_999 },
    ];
    expect((await post(url, JSON.stringify(changes))).status).toBe(202);
    await until(
      () => sim.records('contacts').length === 1999,
      20_000,
      () => 'delete not applied',
    );
    await until(
      () => sim.records('contacts').some((r) => r.id === second?.id && r.city === 'Oslo'),
      20_000,
      () => 'edit not applied',
    );
    expect(sim.records('contacts').find((r) => r.id === first?.id)?.firstname).toBe('Edited');

    // Ctrl-C reaches npm and the relay; npm's own exit status depends on how it saw the signal,
    // so what counts is that the relay stopped cleanly and everything exited.
    await stop(child);
    await until(
      () => output.includes('Stopped.'),
      15_000,
      () => output.join('\n'),
    );
  }, 120_000);

  it('answers bad requests as the contract says and delivers nothing of them', async () => {
    const { sim, url, dir } = await startRelay({});
    const good = JSON.stringify(contacts(1, 'bad'));
    const before = sim.requests.length;

    const answers = [
      await post(url, good, { 'webhook-signature': `v1,${Buffer.alloc(32).toString('base64')}` }),
      await post(url, good, { 'content-type': 'text/plain' }),
      await post(url, '{"entity":'),
      await post(
        url,
        JSON.stringify({ entity: 'contacts', action: 'create', data: { email: 'not-an-email' } }),
      ),
      await post(url, JSON.stringify([])),
      await post(url, 'x'.repeat(1024 * 1024 + 1)),
    ];

    expect(answers.map((a) => [a.status, a.body.error?.code])).toEqual([
      [401, 'unauthorized'],
      [415, 'unsupported_media_type'],
      [400, 'invalid_json'],
      [422, 'invalid_event'],
      [422, 'invalid_event'],
      [413, 'payload_too_large'],
    ]);
    // Nothing was queued (the ingest answers once the queue holds what it accepted), so nothing
    // can reach Mautic later: read from the queue rather than slept for two batching windows.
    await until(() => drained(dir), 10_000, 'the queue drained');
    expect(sim.requests.slice(before).filter((r) => r.path.startsWith('/api/'))).toEqual([]);
  }, 60_000);

  it('loses nothing and duplicates no contact through 5xx, dropped connections and short-lived tokens', async () => {
    const { sim, url, output } = await startRelay(
      { faults: { seed: 42, errorRate: 0.2, dropRate: 0.1 }, accessTokenLifetimeSeconds: 3 },
      {
        REFRESH_INTERVAL_SECONDS: '1',
        VISIBILITY_TIMEOUT_SECONDS: '2',
        BATCH_TIMEOUT_SECONDS: '2',
        RETRY_BASE_SECONDS: '1',
        RETRY_MAX_DELAY_SECONDS: '2',
        RETRY_HORIZON_SECONDS: '300',
        TOKEN_CACHE_SECONDS: '1',
        BATCH_SIZE: '50',
      },
    );
    const events = contacts(400, 'fault');

    for (let i = 0; i < events.length; i += 50) {
      expect((await post(url, JSON.stringify(events.slice(i, i + 50)))).status).toBe(202);
      // A sender retrying a request it thinks failed: the same events again.
      if (i === 100)
        expect((await post(url, JSON.stringify(events.slice(i, i + 50)))).status).toBe(202);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    await until(
      () => sim.records('contacts').length === 400,
      90_000,
      () => `${sim.records('contacts').length} of 400 delivered`,
    );

    const emails = sim.records('contacts').map((r) => String(r.email));
    expect(new Set(emails).size).toBe(400);
    expect(emails.sort()).toEqual(events.map((e) => e.data.email).sort());
    expect(output.filter((line) => line.startsWith('dead-lettered'))).toEqual([]);
    const statuses = new Set(sim.requests.map((r) => r.status));
    expect(statuses.has(0) || statuses.has(502) || statuses.has(503) || statuses.has(500)).toBe(
      true,
    );
    // Tokens lived 3 s: the relay went through several of them while delivering.
    const tokensUsed = new Set(
      sim.requests.filter((r) => r.path.startsWith('/api/')).map((r) => r.tokenId),
    );
    expect(tokensUsed.size).toBeGreaterThan(1);
  }, 150_000);

  for (const scenario of [
    { lifetime: 5, rotating: false, faultScope: 'api' as const },
    // The token endpoint fails too: the refresher's failed runs are waited through as well.
    { lifetime: 2, rotating: true, faultScope: 'all' as const },
  ]) {
    it(`waits for tokens instead of giving events up: ${scenario.lifetime} s tokens${scenario.rotating ? ', rotating refresh tokens' : ''}, 15 % 5xx, dropped connections, every token revoked mid-run`, async () => {
      const { sim, url, output } = await startRelay(
        {
          faults: { seed: 7, errorRate: 0.15, dropRate: 0.05, scope: scenario.faultScope },
          accessTokenLifetimeSeconds: scenario.lifetime,
          clientCredentialsRefreshToken: scenario.rotating,
        },
        // The schedule stays far apart: the batch function's own waits keep the tokens coming.
        { VISIBILITY_TIMEOUT_SECONDS: '10', BATCH_TIMEOUT_SECONDS: '10', BATCH_SIZE: '100' },
      );
      const started = Date.now();
      const events = contacts(1000, `tok${scenario.lifetime}`);

      const grantCount = () =>
        sim.requests.filter((r) => r.path === '/oauth/v2/token' && r.status === 200).length;
      // Revoke everything right after a grant, once events have flowed for a while: the stored
      // token then has most of its life ahead and is refused, not just expired.
      let revokedAt: number | undefined;
      let grantsBefore: number | undefined;
      const revoker = setInterval(() => {
        if (revokedAt !== undefined || Date.now() - started < 3_000) return;
        grantsBefore ??= grantCount();
        if (grantCount() > grantsBefore) {
          sim.revokeTokens();
          revokedAt = Date.now();
        }
      }, 20);
      try {
        for (let i = 0; i < events.length; i += 25) {
          expect((await post(url, JSON.stringify(events.slice(i, i + 25)))).status).toBe(202);
          await new Promise((resolve) => setTimeout(resolve, 250));
        }
      } finally {
        clearInterval(revoker);
      }
      expect(revokedAt).toBeDefined();
      await until(
        () => sim.records('contacts').length === 1000,
        45_000,
        () => `${sim.records('contacts').length} of 1000 delivered`,
      );
      const seconds = (Date.now() - started) / 1000;

      const emails = sim.records('contacts').map((r) => String(r.email));
      expect(new Set(emails).size).toBe(1000);
      expect(output.filter((line) => line.startsWith('dead-lettered'))).toEqual([]);
      const api = sim.requests.filter((r) => r.path.startsWith('/api/'));
      expect(api.some((r) => r.status === 401)).toBe(true);
      expect(api.some((r) => r.status >= 500 || r.status === 0)).toBe(true);
      // One grant per token lifetime at most (plus the first and the one after the revocation),
      // however many batches found the token expired at once.
      const grants = sim.requests.filter((r) => r.path === '/oauth/v2/token' && r.status === 200);
      expect(grants.length).toBeGreaterThan(2);
      expect(grants.length).toBeLessThanOrEqual(Math.ceil(seconds / scenario.lifetime) + 2);
      // The revoked refresh token is refused once, then client_credentials; again only when that
      // fallback itself met an injected failure, so the next run still held the revoked token.
      // Other failures of the token endpoint are the injected ones.
      const tokenCalls = sim.requests.filter((r) => r.path === '/oauth/v2/token');
      const refused = tokenCalls.filter((r) => r.status === 400);
      const fallbackFailed = tokenCalls.filter((r, i) => {
        const next = tokenCalls[i + 1];
        return r.status === 400 && next !== undefined && (next.status === 0 || next.status >= 500);
      });
      if (scenario.rotating) {
        expect(refused.length).toBeGreaterThanOrEqual(1);
        expect(refused.length - 1).toBeLessThanOrEqual(fallbackFailed.length);
      } else {
        expect(refused).toHaveLength(0);
      }
      const tokenFaults = sim.requests.filter(
        (r) => r.path === '/oauth/v2/token' && (r.status === 0 || r.status >= 500),
      );
      if (scenario.faultScope === 'all') expect(tokenFaults.length).toBeGreaterThan(0);
    }, 90_000);
  }

  it('creates one company when a signed companies create is sent twice (contract §1, Idempotency); with de-duplication off Mautic refuses the second as a duplicate', async () => {
    const company = JSON.stringify({
      entity: 'companies',
      action: 'create',
      data: { companyname: 'Acme Twice' },
    });

    const on = await startRelay({});
    expect(on.output.some((line) => line.includes('de-duplication: dynalite at'))).toBe(true);
    const first = await postAs(on.url, 'msg_company_1', company);
    await until(
      () => on.sim.records('companies').length === 1,
      20_000,
      () => 'company not delivered',
    );
    // The sender's retry after a timeout, signed again once the first was delivered, so no batch
    // holds both: only the ingest's de-duplication can stop it.
    const retry = await postAs(on.url, 'msg_company_1', company);
    const reused = await postAs(on.url, 'msg_company_1', company.replace('Twice', 'Other'));
    expect(first).toEqual({ status: 202, text: '{"accepted":1,"eventIds":["msg_company_1:0"]}' });
    expect(retry).toEqual(first);
    expect(reused.status).toBe(422);
    // Nothing left on the queue (the ingest answers once the queue holds what it accepted): the
    // retry was not queued, so no second delivery can come; read rather than slept for.
    await until(() => drained(on.dir), 10_000, 'the queue drained');
    expect(on.sim.records('companies')).toHaveLength(1);
    await stopRunning();

    const off = await startRelay({}, { DEDUP_WINDOW_SECONDS: '0' });
    expect(off.output.some((line) => line.includes('de-duplication: off'))).toBe(true);
    // The retry comes after the first was delivered, so no batch holds both: only the ingest's
    // de-duplication could have stopped it.
    expect((await postAs(off.url, 'msg_company_2', company)).status).toBe(202);
    await until(
      () => off.sim.records('companies').length === 1,
      20_000,
      () => 'company not delivered',
    );
    expect((await postAs(off.url, 'msg_company_2', company)).status).toBe(202);
    // Delivered again, and refused by Mautic as the real 5.1 does (company names are unique): the
    // event is dead-lettered `duplicate`, and there is still one company.
    await until(
      () => deadLettered(off.output).get('msg_company_2:0') === 'duplicate',
      20_000,
      () => off.output.join('\n'),
    );
    expect(off.sim.records('companies')).toHaveLength(1);
  }, 90_000);

  it('finishes the batch in hand when npm is told to stop (SIGTERM to npm alone)', async () => {
    const { sim, url, output, child } = await startRelay({
      faults: { seed: 1, latencyMs: { min: 2_000, max: 2_000 } },
    });
    expect((await post(url, JSON.stringify(contacts(3, 'inhand')))).status).toBe(202);
    await until(
      () => sim.requests.some((r) => r.path === '/api/contacts/batch/new'),
      20_000,
      () => 'no Mautic call yet',
    );

    const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) =>
      child.once('exit', (code, signal) => resolve({ code, signal })),
    );
    process.kill(child.pid ?? 0, 'SIGTERM');
    await until(
      () => output.includes('Stopped.'),
      15_000,
      () => output.join('\n'),
    );
    await exited;

    const delivered = output.findIndex((line) =>
      line.startsWith('delivered contacts create: 3 items'),
    );
    expect(delivered).toBeGreaterThan(-1);
    expect(delivered).toBeLessThan(output.indexOf('Stopped.'));
    expect(sim.records('contacts')).toHaveLength(3);
  }, 60_000);

  it('names the setting to change when its port is taken', async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const address = taken.address();
    const port = typeof address === 'object' && address ? address.port : 0;
    const dir = mkdtempSync(join(tmpdir(), 'relay-port-'));
    try {
      const started = spawnSync('npm', ['start'], {
        env: { ...process.env, PORT: String(port), MAUTIC_RELAY_DIR: dir },
        encoding: 'utf8',
        timeout: 30_000,
      });
      expect(started.status).toBe(1);
      expect(started.stderr).toContain(`EADDRINUSE`);
      expect(started.stderr).toContain('set PORT');
    } finally {
      taken.close();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 40_000);
});
