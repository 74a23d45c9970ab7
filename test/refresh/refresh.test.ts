import { setTimeout as sleep } from 'node:timers/promises';
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import { PutSecretValueCommand, type SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { SecretsManagerTokenVault } from '../../functions/adapters/secrets-manager-token-vault.ts';
import { MauticOAuthClient } from '../../functions/core/mautic/mautic-oauth.ts';
import type { TokenVault } from '../../functions/core/ports.ts';
import type { TokenSecret } from '../../functions/core/token-secret.ts';
import { requestTokenFor } from '../../functions/core/tokens/token-writes.ts';
import { createRefreshHandler } from '../../functions/refresh/handler.ts';
import {
  type SecretsManagerFake,
  startSecretsManagerFake,
} from '../../infra/local/secrets-manager-fake.ts';
import {
  DEFAULT_SIMULATOR_CLIENT,
  type MauticSimulator,
  startMauticSimulator,
} from '../../mautic-simulator/server.ts';
import {
  authorizedTokens,
  captureOutput,
  createEnvironment,
  NON_ADMIN,
  refresher,
  secretsClient,
} from '../support/refresh.ts';

const START = Date.parse('2026-11-21T00:00:00Z');
let now = START;
const clock = () => now;
let fake: SecretsManagerFake;
let client: SecretsManagerClient;
let sim: MauticSimulator;
let output: string[];

beforeAll(async () => {
  fake = await startSecretsManagerFake();
  client = secretsClient(fake);
});

afterAll(async () => {
  client.destroy();
  await fake.close();
});

beforeEach(async () => {
  now = START;
  sim = await startMauticSimulator({ now: clock, clients: [DEFAULT_SIMULATOR_CLIENT, NON_ADMIN] });
  output = captureOutput();
});

afterEach(async () => {
  vi.restoreAllMocks();
  await sim.close();
});

const adminCredential = () => ({
  baseUrl: sim.url,
  clientId: DEFAULT_SIMULATOR_CLIENT.clientId,
  clientSecret: DEFAULT_SIMULATOR_CLIENT.clientSecret,
  grantType: 'client_credentials' as const,
});
const userCredential = () => ({
  baseUrl: sim.url,
  clientId: NON_ADMIN.clientId,
  clientSecret: NON_ADMIN.clientSecret,
  grantType: 'authorization_code' as const,
});
const stored = (ids: { tokenSecretId: string }) =>
  JSON.parse(fake.current(ids.tokenSecretId) ?? 'null') as TokenSecret;
const tokenCalls = () => sim.requests.filter((r) => r.path === '/oauth/v2/token');
const metric = (name: string) =>
  output
    .filter((line) => line.includes('"_aws"'))
    .map((line) => JSON.parse(line) as Record<string, unknown>)
    .map((emf) => emf[name])
    .filter((value) => value !== undefined);

function expectNoSecretsIn(lines: string[], secrets: ReadonlyArray<string | undefined>): void {
  const text = lines.join('');
  for (const secret of secrets) if (secret) expect(text).not.toContain(secret);
}

describe('token refresher with a client_credentials credential', () => {
  it('gets the first tokens, then leaves them alone while they are fresh, then refreshes ahead of expiry', async () => {
    const ids = await createEnvironment(client, adminCredential());
    const run = refresher(client, ids, clock);

    const first = await run({});
    const tokens = stored(ids);
    // Over half the hour's lifetime left: fresh. Less: refreshed (max(900 s, 1800 s) ahead).
    now += 1_500_000;
    const idle = await run({});
    now += 400_000;
    const second = await run({});

    expect(first).toMatchObject({ action: 'refreshed', grant: 'client_credentials' });
    expect(tokens).toEqual({
      accessToken: expect.stringMatching(/^[A-Za-z0-9_-]{86}$/),
      accessTokenExpiresAt: new Date(START + 3_600_000).toISOString(),
      obtainedWith: 'client_credentials',
      updatedAt: new Date(START).toISOString(),
      // Mautic names its version on API answers only (not on the token answer): asked with the
      // new token, as a client_credentials grant spent nothing that waits to be stored.
      mauticVersion: '5.1.1',
    });
    expect(idle).toMatchObject({ action: 'none', why: 'fresh' });
    expect(second).toMatchObject({ action: 'refreshed', grant: 'client_credentials' });
    expect(tokenCalls()).toHaveLength(2);
    // The second run holds a token that still works: it asks before its token call.
    expect(stored(ids).mauticVersion).toBe('5.1.1');
    expect(sim.requests.map((r) => `${r.method} ${r.path} ${r.status}`)).toEqual([
      'POST /oauth/v2/token 200',
      'GET /api/contacts 200',
      'GET /api/contacts 200',
      'POST /oauth/v2/token 200',
    ]);
    const versions = fake.versions(ids.tokenSecretId);
    expect(versions.find((v) => v.stages.includes('AWSPREVIOUS'))?.secretString).toBe(
      JSON.stringify(tokens),
    );
    expect(metric('TokenRefreshed')).toEqual([1, 1]);
    expect(metric('AccessTokenSecondsLeft')).toEqual([3600, 2100, 3600]);
    expect(metric('RefreshTokenSecondsLeft')).toEqual([]);
    expectNoSecretsIn(output, [
      tokens.accessToken,
      stored(ids).accessToken,
      DEFAULT_SIMULATOR_CLIENT.clientSecret,
    ]);
  });

  it('refreshes short-lived tokens once less than half their lifetime is left', async () => {
    await sim.close();
    sim = await startMauticSimulator({ now: clock, accessTokenLifetimeSeconds: 300 });
    const ids = await createEnvironment(client, adminCredential());
    const run = refresher(client, ids, clock, { refreshAheadSeconds: 60 });

    await run({});
    now += 140_000;
    const early = await run({});
    now += 12_000;
    const late = await run({});

    // REFRESH_AHEAD_SECONDS (60) alone would leave a 5-minute token alone until 1 minute is left.
    expect(early).toMatchObject({ action: 'none', why: 'fresh' });
    expect(late).toMatchObject({ action: 'refreshed' });
    expect(stored(ids).accessTokenExpiresAt).toBe(new Date(now + 300_000).toISOString());
  });

  it('falls back to client_credentials when its refresh token is refused', async () => {
    await sim.close();
    sim = await startMauticSimulator({ now: clock, clientCredentialsRefreshToken: true });
    const ids = await createEnvironment(client, adminCredential());
    const run = refresher(client, ids, clock);
    await run({});
    const issued = stored(ids).refreshToken ?? '';
    // Someone else spends the refresh token: Mautic will call it invalid.
    await fetch(`${sim.url}/oauth/v2/token`, {
      method: 'POST',
      body: new URLSearchParams({
        grant_type: 'refresh_token',
        refresh_token: issued,
        client_id: DEFAULT_SIMULATOR_CLIENT.clientId,
        client_secret: DEFAULT_SIMULATOR_CLIENT.clientSecret,
      }),
    });
    now += 3_000_000;

    const outcome = await run({});

    expect(outcome).toMatchObject({ action: 'refreshed', grant: 'client_credentials' });
    expect(tokenCalls().map((r) => r.status)).toEqual([200, 200, 400, 200]);
  });

  it('says how to fix a credential Mautic refuses, and writes nothing', async () => {
    const ids = await createEnvironment(client, {
      ...adminCredential(),
      clientSecret: 'wrong-secret',
    });

    const outcome = await refresher(client, ids, clock)({});

    expect(outcome).toMatchObject({ action: 'failed', why: 'invalid_client' });
    expect(output.join('')).toContain('run \\"npx mautic-relay credentials\\" with the right ones');
    expect(fake.current(ids.tokenSecretId)).toBeUndefined();
    expect(metric('TokenRefreshFailed')).toEqual([1]);
    expectNoSecretsIn(output, ['wrong-secret']);
  });

  it('waits for the next run after a network failure or a 5xx', async () => {
    const ids = await createEnvironment(client, adminCredential());
    const run = refresher(client, ids, clock);
    sim.setFaults({ seed: 3, dropRate: 1, scope: 'all' });
    const dropped = await run({});
    sim.setFaults({ seed: 3, errorRate: 1, scope: 'all' });
    const failing = await run({});
    sim.setFaults(undefined);
    const recovered = await run({});

    expect([dropped, failing]).toEqual([
      {
        action: 'failed',
        why: 'transient',
        detail: expect.stringMatching(
          /^dropped the connection \(127\.0\.0\.1:\d+ UND_ERR_SOCKET\)$/,
        ),
      },
      { action: 'failed', why: 'transient', detail: 'answered HTTP 500' },
    ]);
    expect(recovered).toMatchObject({ action: 'refreshed' });
    expect(fake.versions(ids.tokenSecretId)).toHaveLength(1);
  });
});

describe('token refresher with an authorization_code credential', () => {
  it('rotates the refresh token and stores the new one at once; the old one is dead at Mautic', async () => {
    const tokens = await authorizedTokens(sim, clock);
    const ids = await createEnvironment(client, userCredential(), tokens);
    now += 3_000_000;

    const outcome = await refresher(client, ids, clock)({});

    const next = stored(ids);
    expect(outcome).toMatchObject({ action: 'refreshed', grant: 'refresh_token' });
    expect(next.refreshToken).toMatch(/^[A-Za-z0-9_-]{86}$/);
    expect(next.refreshToken).not.toBe(tokens.refreshToken);
    expect(next.refreshTokenExpiresAt).toBe(new Date(now + 14 * 86_400_000).toISOString());
    expect(next.obtainedWith).toBe('refresh_token');
    const reuse = await fetch(`${sim.url}/oauth/v2/token`, {
      method: 'POST',
      body: new URLSearchParams({
        grant_type: 'refresh_token',
        refresh_token: tokens.refreshToken ?? '',
        client_id: NON_ADMIN.clientId,
        client_secret: NON_ADMIN.clientSecret,
      }),
    });
    expect(reuse.status).toBe(400);
    expect(metric('RefreshTokenSecondsLeft')).toEqual([14 * 86_400]);
    expectNoSecretsIn(output, [
      tokens.refreshToken,
      next.refreshToken,
      next.accessToken,
      NON_ADMIN.clientSecret,
    ]);
  });

  it('on invalid_grant drops the dead refresh token, names the fix, and makes no further token calls', async () => {
    const tokens = await authorizedTokens(sim, clock);
    const ids = await createEnvironment(client, userCredential(), {
      ...tokens,
      refreshToken: 'x'.repeat(86),
    });
    const run = refresher(client, ids, clock);
    now += 3_000_000;
    const callsBefore = tokenCalls().length;

    const first = await run({});
    now += 300_000;
    const second = await run({});

    expect([first, second]).toEqual([
      { action: 'failed', why: 'needs_authorize' },
      { action: 'failed', why: 'needs_authorize' },
    ]);
    expect(tokenCalls()).toHaveLength(callsBefore + 1);
    expect(stored(ids)).not.toHaveProperty('refreshToken');
    expect(stored(ids).accessToken).toBe(tokens.accessToken);
    const errors = output.filter((line) => line.includes('"level":"ERROR"'));
    expect(errors).toHaveLength(2);
    expect(errors[0]).toContain('Run \\"npx mautic-relay authorize\\"');
    expect(metric('TokenRefreshFailed')).toEqual([1, 1]);
    expect(metric('RefreshTokenSecondsLeft')).toEqual([0, 0]);
  });

  it('treats an expired refresh token like a missing one, without calling Mautic', async () => {
    const tokens = await authorizedTokens(sim, clock);
    const ids = await createEnvironment(client, userCredential(), {
      ...tokens,
      refreshTokenExpiresAt: new Date(START + 60_000).toISOString(),
    });
    now += 3_500_000;
    const callsBefore = tokenCalls().length;

    const outcome = await refresher(client, ids, clock)({});

    expect(outcome).toMatchObject({ action: 'failed', why: 'needs_authorize' });
    expect(tokenCalls()).toHaveLength(callsBefore);
  });
});

describe('the lost-response case', () => {
  it('a rotated refresh token whose answer was lost cannot be recovered: the next run says to run authorize, and the alarm metric fires', async () => {
    const tokens = await authorizedTokens(sim, clock);
    const ids = await createEnvironment(client, userCredential(), tokens);
    now += 3_000_000;
    // Mautic rotates the refresh token, then the connection drops before its answer arrives.
    sim.failAfterApply({ path: '/oauth/v2/token' }, 'drop');

    const lost = await refresher(client, ids, clock)({});
    now += 60_000;
    const next = await refresher(client, ids, clock)({});

    expect(lost).toMatchObject({ action: 'failed', why: 'transient' });
    expect(next).toMatchObject({ action: 'failed', why: 'needs_authorize' });
    expect(tokenCalls().map((r) => r.status)).toEqual([200, 0, 400]);
    const text = output.join('');
    expect(text).toContain('spent by a refresh whose answer was lost');
    expect(text).toContain('Run \\"npx mautic-relay authorize\\"');
    expect(text).toContain('"event":"needs_authorize"');
    // RefreshTokenAlarm (refresh token seconds left below 2 days) names the same fix.
    expect(metric('RefreshTokenSecondsLeft')).toContain(0);
    expect(stored(ids)).not.toHaveProperty('refreshToken');
    expectNoSecretsIn(output, [tokens.refreshToken, tokens.accessToken]);
  });
});

describe('a write left half-finished heals in a new container', () => {
  for (const grantType of ['authorization_code', 'client_credentials'] as const) {
    it(`with ${grantType}: put ok, stage move fails, container gone; the next run makes the rotated refresh token current`, async () => {
      let ids: { clientSecretId: string; tokenSecretId: string };
      if (grantType === 'authorization_code') {
        ids = await createEnvironment(client, userCredential(), await authorizedTokens(sim, clock));
      } else {
        await sim.close();
        // Client credentials that hand out rotating refresh tokens.
        sim = await startMauticSimulator({ now: clock, clientCredentialsRefreshToken: true });
        ids = await createEnvironment(client, adminCredential());
        await refresher(client, ids, clock)({});
      }
      const before = stored(ids);
      now += 3_000_000;
      // Both tries of the stage move fail (the put before each succeeds).
      fake.failNext('UpdateSecretVersionStage', 2, { code: 'AccessDeniedException', status: 400 });

      const broken = await refresher(client, ids, clock)({});
      const pending = fake
        .versions(ids.tokenSecretId)
        .find((v) => v.stages.includes('AWSPENDING') && !v.stages.includes('AWSCURRENT'));
      const rotated = JSON.parse(pending?.secretString ?? 'null') as TokenSecret;
      const callsBefore = tokenCalls().length;
      // A new container: a new handler, vault and memory.
      const healed = await refresher(client, ids, clock)({});
      const callsAtHeal = tokenCalls().length - callsBefore;
      now += 3_000_000;
      const later = await refresher(client, ids, clock)({});

      expect(broken).toMatchObject({ action: 'failed', why: 'write_failed' });
      expect(stored(ids)).not.toEqual(before);
      expect(rotated.refreshToken).toBeDefined();
      expect(rotated.refreshToken).not.toBe(before.refreshToken);
      expect(healed).toMatchObject({
        action: 'none',
        why: 'fresh',
        stored: { updatedAt: rotated.updatedAt },
      });
      expect(callsAtHeal).toBe(0);
      expect(later).toMatchObject({ action: 'refreshed', grant: 'refresh_token' });
      // Every refresh grant Mautic saw succeeded: no spent refresh token was ever sent.
      expect(tokenCalls().every((r) => r.status === 200)).toBe(true);
      expect(output.join('')).toContain('Completed a token write that an earlier run left');
      expectNoSecretsIn(output, [before.refreshToken, rotated.refreshToken, rotated.accessToken]);
    });
  }

  it('makes no token call while the pending version cannot be read, and heals on the next run', async () => {
    const ids = await createEnvironment(
      client,
      userCredential(),
      await authorizedTokens(sim, clock),
    );
    now += 3_000_000;
    fake.failNext('UpdateSecretVersionStage', 2, { code: 'AccessDeniedException', status: 400 });
    await refresher(client, ids, clock)({});
    const callsBefore = tokenCalls().length;
    // A new container whose read of AWSPENDING fails once (throttled, say).
    const vault = new SecretsManagerTokenVault(client, ids);
    let pendingReads = 0;
    const flaky: TokenVault = {
      readClient: () => vault.readClient(),
      readToken: () => vault.readToken(),
      writeToken: (...args) => vault.writeToken(...args),
      readPending: async () => {
        pendingReads++;
        if (pendingReads === 1) throw new Error('ThrottlingException: Rate exceeded');
        return vault.readPending();
      },
    };
    const run = createRefreshHandler({
      vault: flaky,
      granterFor: (credential) =>
        new MauticOAuthClient({ ...credential, fetch, clock: { now: clock }, timeoutMs: 2_000 }),
      clock: { now: clock },
      logger: new Logger({ serviceName: 'refresh-test', logLevel: 'SILENT' }),
      metrics: new Metrics({ namespace: 'MauticBatchRelayTest', serviceName: 'refresh-test' }),
      refreshAheadSeconds: 900,
      refreshTokenLifetimeSeconds: 1_209_600,
      sleep,
      unsaved: { value: undefined },
    });

    const blind = await run({});
    const healed = await run({});

    expect(blind).toEqual({ action: 'failed', why: 'pending_unreadable' });
    expect(healed).toMatchObject({ action: 'none', why: 'fresh' });
    expect(tokenCalls().length).toBe(callsBefore);
    expect(tokenCalls().every((r) => r.status === 200)).toBe(true);
  });

  it('leaves alone a pending version built on an older one (superseded by authorize)', async () => {
    const tokens = await authorizedTokens(sim, clock);
    const ids = await createEnvironment(client, userCredential(), tokens);
    now += 3_000_000;
    fake.failNext('UpdateSecretVersionStage', 2, { code: 'AccessDeniedException', status: 400 });
    await refresher(client, ids, clock)({});
    const fromAuthorize = await authorizedTokens(sim, clock);
    await client.send(
      new PutSecretValueCommand({
        SecretId: ids.tokenSecretId,
        SecretString: JSON.stringify(fromAuthorize),
      }),
    );

    const outcome = await refresher(client, ids, clock)({});

    expect(outcome).toMatchObject({ action: 'none', why: 'fresh' });
    expect(stored(ids)).toEqual(fromAuthorize);
  });
});

describe('forced runs and writes', () => {
  it('coalesces forced runs: callers that found the same tokens stale cause one token call', async () => {
    const ids = await createEnvironment(client, adminCredential());
    const run = refresher(client, ids, clock);
    await run({});
    const first = stored(ids);
    now += 30_000;
    const callers = [];
    for (let i = 0; i < 5; i++)
      callers.push(
        await run({ force: true, reason: 'mautic_invalid_grant', staleUpdatedAt: first.updatedAt }),
      );
    const second = stored(ids);
    const missing = await run({ force: true, reason: 'token_missing', staleUpdatedAt: null });
    const operator = await run({ force: true, reason: 'operator' });

    expect(callers[0]).toMatchObject({
      action: 'refreshed',
      stored: { updatedAt: second.updatedAt, accessTokenExpiresAt: second.accessTokenExpiresAt },
    });
    for (const later of callers.slice(1))
      expect(later).toMatchObject({ action: 'none', why: 'newer_stored' });
    expect(missing).toMatchObject({ action: 'none', why: 'newer_stored' });
    expect(operator).toMatchObject({ action: 'refreshed', grant: 'client_credentials' });
    expect(tokenCalls()).toHaveLength(3);
    expect(second.updatedAt).not.toBe(first.updatedAt);
    expect(JSON.stringify(callers)).not.toContain(second.accessToken);
  });

  it('refreshes when a forced run names the stored tokens stale, even long before they expire', async () => {
    const ids = await createEnvironment(client, adminCredential());
    const run = refresher(client, ids, clock);
    await run({});
    const revoked = stored(ids);
    now += 1_000;
    const outcome = await run({
      force: true,
      reason: 'mautic_invalid_grant',
      staleUpdatedAt: revoked.updatedAt,
    });
    expect(outcome).toMatchObject({ action: 'refreshed' });
    expect(stored(ids).accessToken).not.toBe(revoked.accessToken);
  });

  it('writes once however often the same write is retried', async () => {
    const ids = await createEnvironment(client, adminCredential());
    const vault = new SecretsManagerTokenVault(client, ids);
    const { versionId } = await vault.readToken();
    const token: TokenSecret = {
      accessToken: 'a'.repeat(20),
      accessTokenExpiresAt: new Date(START + 3_600_000).toISOString(),
      obtainedWith: 'client_credentials',
      updatedAt: new Date(START).toISOString(),
    };
    const requestToken = requestTokenFor(versionId, token);
    fake.failNext('PutSecretValue', 1);

    const first = await vault.writeToken(token, requestToken, versionId);
    const again = await vault.writeToken(token, requestToken, versionId);
    const rival = vault.writeToken(
      { ...token, accessToken: 'b'.repeat(20) },
      requestToken,
      versionId,
    );

    expect([first, again]).toEqual(['written', 'written']);
    // A writer reusing a token for other content is refused; ours derive it from the content.
    await expect(rival).rejects.toThrow(/can't modify an existing version/);
    expect(requestTokenFor(versionId, { ...token, accessToken: 'b'.repeat(20) })).not.toBe(
      requestToken,
    );
    expect(fake.versions(ids.tokenSecretId).filter((v) => v.stages.includes('AWSCURRENT'))).toEqual(
      [expect.objectContaining({ versionId: requestToken, secretString: JSON.stringify(token) })],
    );
    expect(requestToken).toMatch(/^[0-9a-f]{64}$/);
  });

  it('keeps tokens it could not store and stores them first on the next run, never spending the refresh token twice', async () => {
    const tokens = await authorizedTokens(sim, clock);
    const ids = await createEnvironment(client, userCredential(), tokens);
    const run = refresher(client, ids, clock);
    now += 3_000_000;
    fake.failNext('PutSecretValue', 2, { code: 'AccessDeniedException', status: 400 });

    const failed = await run({});
    const callsAfterFailure = tokenCalls().length;
    const next = await run({});

    expect(failed).toMatchObject({ action: 'failed', why: 'write_failed' });
    expect(next).toMatchObject({ action: 'none', why: 'fresh' });
    expect(tokenCalls()).toHaveLength(callsAfterFailure);
    expect(tokenCalls().every((r) => r.status === 200)).toBe(true);
    expect(stored(ids).refreshToken).not.toBe(tokens.refreshToken);
    expect(stored(ids).obtainedWith).toBe('refresh_token');
    expect(output.join('')).toContain('Could not store the Mautic tokens');
    expect(metric('TokenRefreshFailed')).toEqual([1]);
    expect(metric('AccessTokenSecondsLeft')[0]).toBe(600);
  });

  it('makes no token call while the write dropping a dead refresh token is still unsaved', async () => {
    const tokens = await authorizedTokens(sim, clock);
    const ids = await createEnvironment(client, userCredential(), {
      ...tokens,
      refreshToken: 'y'.repeat(86),
    });
    const run = refresher(client, ids, clock);
    now += 3_000_000;
    fake.failNext('PutSecretValue', 2, { code: 'AccessDeniedException', status: 400 });
    const before = tokenCalls().length;

    await run({});
    now += 300_000;
    const second = await run({});

    expect(tokenCalls()).toHaveLength(before + 1);
    expect(second).toMatchObject({ action: 'failed', why: 'needs_authorize' });
    expect(stored(ids)).not.toHaveProperty('refreshToken');
  });

  it("gives the token call most of the run's remaining time", async () => {
    const ids = await createEnvironment(client, adminCredential());
    const timeouts: number[] = [];
    const handler = createRefreshHandler({
      vault: new SecretsManagerTokenVault(client, ids),
      granterFor: (credential, timeoutMs) => {
        timeouts.push(timeoutMs);
        return new MauticOAuthClient({ ...credential, fetch, clock: { now: clock }, timeoutMs });
      },
      clock: { now: clock },
      logger: new Logger({ serviceName: 'refresh-test' }),
      metrics: new Metrics({ namespace: 'MauticBatchRelayTest', serviceName: 'refresh-test' }),
      refreshAheadSeconds: 900,
      refreshTokenLifetimeSeconds: 1_209_600,
      sleep,
      unsaved: { value: undefined },
    });

    await handler({}, { getRemainingTimeInMillis: () => 29_500 });

    // Then Mautic's version is asked under the new token, in 3 s at most (token-version.ts).
    expect(timeouts).toEqual([23_500, 3_000]);
  });

  it('keeps tokens that authorize stored while a refresh was under way', async () => {
    const tokens = await authorizedTokens(sim, clock);
    const ids = await createEnvironment(client, userCredential(), tokens);
    const fromAuthorize = {
      ...tokens,
      accessToken: 'z'.repeat(86),
      updatedAt: new Date(START + 1).toISOString(),
    };
    const handler = createRefreshHandler({
      vault: new SecretsManagerTokenVault(client, ids),
      granterFor: (credential) => {
        const real = new MauticOAuthClient({ ...credential, fetch, clock: { now: clock } });
        return {
          clientCredentials: () => real.clientCredentials(),
          refresh: async (refreshToken) => {
            const result = await real.refresh(refreshToken);
            // The operator runs authorize at this very moment.
            await client.send(
              new PutSecretValueCommand({
                SecretId: ids.tokenSecretId,
                SecretString: JSON.stringify(fromAuthorize),
              }),
            );
            return result;
          },
        };
      },
      clock: { now: clock },
      logger: new Logger({ serviceName: 'refresh-test' }),
      metrics: new Metrics({ namespace: 'MauticBatchRelayTest', serviceName: 'refresh-test' }),
      refreshAheadSeconds: 900,
      refreshTokenLifetimeSeconds: 1_209_600,
      sleep,
      unsaved: { value: undefined },
    });
    now += 3_000_000;

    const outcome = await handler({});

    expect(outcome).toMatchObject({ action: 'none', why: 'superseded' });
    expect(stored(ids)).toEqual(fromAuthorize);
  });
});
