import type { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { TokenSecret } from '../../functions/core/token-secret.ts';
import {
  type SecretsManagerFake,
  startSecretsManagerFake,
} from '../../infra/local/secrets-manager-fake.ts';
import { type MauticSimulator, startMauticSimulator } from '../../mautic-simulator/server.ts';
import {
  authorizedTokens,
  captureOutput,
  createEnvironment,
  NON_ADMIN,
  refresher,
  secretsClient,
} from '../support/refresh.ts';

/**
 * Without reserved concurrency (an environment's choice, off for dev) two refresher
 * runs can overlap: a schedule tick and a forced run from the batch function, say. They may
 * both send the one refresh token Mautic holds; Mautic rotates it for the first and refuses the
 * second (invalid_grant). Whatever the order of their writes, the rotated refresh token must
 * end in the secret, or only a new authorization helps. The compare-and-swap writes (token-writes.ts)
 * keep the refresher the single writer that matters: each write is made on the version it read.
 * And the refused run pages nobody (needs_authorize, RefreshTokenSecondsLeft 0) when the rotated
 * tokens are stored within its bounded re-read of the secret (3 s): only a refusal no newer
 * tokens follow is a loss.
 */

const START = Date.parse('2026-11-21T00:00:00Z');
let now = START;
const clock = () => now;
let fake: SecretsManagerFake;
let sim: MauticSimulator;
let output: string[];
const clients: SecretsManagerClient[] = [];

beforeAll(async () => {
  fake = await startSecretsManagerFake();
});

afterAll(async () => {
  for (const client of clients) client.destroy();
  await fake.close();
});

beforeEach(async () => {
  now = START;
  sim = await startMauticSimulator({ now: clock, clients: [NON_ADMIN] });
  output = captureOutput();
});

afterEach(async () => {
  await sim.close();
});

/**
 * A client of the fake (one per container) that holds each call `held` picks until `release`
 * resolves, and says when it first held one.
 */
function heldClient(held: (command: string, input: { SecretId?: string }) => boolean) {
  const client = plainClient();
  let release: () => void = () => {};
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  let reached: () => void = () => {};
  const holding = new Promise<void>((resolve) => {
    reached = resolve;
  });
  client.middlewareStack.add(
    (next, context) => async (args) => {
      if (held(String(context.commandName), args.input as { SecretId?: string })) {
        reached();
        await released;
      }
      return next(args);
    },
    { step: 'initialize', name: 'holdForTheRace' },
  );
  return { client, holding, release };
}

/** A client of the fake, destroyed after the file. */
function plainClient(): SecretsManagerClient {
  const client = secretsClient(fake);
  clients.push(client);
  return client;
}

/** An authorization_code environment, ten minutes before its access token expires. */
async function environment() {
  const tokens = await authorizedTokens(sim, clock);
  const ids = await createEnvironment(
    plainClient(),
    {
      baseUrl: sim.url,
      clientId: NON_ADMIN.clientId,
      clientSecret: NON_ADMIN.clientSecret,
      grantType: 'authorization_code',
    },
    tokens,
  );
  now += 3_000_000;
  return { tokens, ids };
}

/** Calls `then` once, after the `nth` (from 1) call `picks` has been answered. */
function afterNthCall(
  client: SecretsManagerClient,
  nth: number,
  picks: (command: string, input: { SecretId?: string; VersionStage?: string }) => boolean,
  then: () => void,
) {
  let seen = 0;
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const result = await next(args);
      if (
        picks(
          String(context.commandName),
          args.input as { SecretId?: string; VersionStage?: string },
        )
      ) {
        seen++;
        if (seen === nth) then();
      }
      return result;
    },
    { step: 'initialize', name: 'afterNthCall' },
  );
}

const pages = () => ({
  needsAuthorize: output.filter((line) => line.includes('needs_authorize')),
  refreshTokenGone: output.filter((line) => line.includes('"RefreshTokenSecondsLeft":0')),
  failed: output.filter((line) => line.includes('"TokenRefreshFailed"')),
});
const noPages = { needsAuthorize: [], refreshTokenGone: [], failed: [] };

const stored = (tokenSecretId: string) =>
  JSON.parse(fake.current(tokenSecretId) ?? 'null') as TokenSecret;
const tokenCalls = () => sim.requests.filter((r) => r.path === '/oauth/v2/token');

/** The stored refresh token is the live one: a run an hour later refreshes with it. */
async function expectLiveRefreshToken(ids: { clientSecretId: string; tokenSecretId: string }) {
  now += 3_600_000;
  const later = await refresher(plainClient(), ids, clock)({});
  expect(later).toMatchObject({ action: 'refreshed', grant: 'refresh_token' });
}

describe('two refreshers racing on one refresh token, without reserved concurrency', () => {
  it('makes the loser keep the winner’s tokens, paging nobody, when the winner stores them just after Mautic refused the loser', async () => {
    const { tokens, ids } = await environment();
    const winner = heldClient((command) => command === 'PutSecretValueCommand');
    const winning = refresher(winner.client, ids, clock)({});
    await winner.holding;
    // The winner's write goes ahead 300 ms after the loser's first read of the tokens after its
    // refusal (its second token read of the run): long after the loser would have dropped them.
    const loser = plainClient();
    afterNthCall(
      loser,
      2,
      (command, input) =>
        command === 'GetSecretValueCommand' &&
        input.SecretId === ids.tokenSecretId &&
        input.VersionStage === undefined,
      () => setTimeout(winner.release, 300),
    );

    const lost = await refresher(loser, ids, clock)({});
    const won = await winning;

    expect(won).toMatchObject({ action: 'refreshed', grant: 'refresh_token' });
    expect(lost).toMatchObject({ action: 'none', why: 'superseded' });
    expect(pages()).toEqual(noPages);
    const after = stored(ids.tokenSecretId);
    expect(after.refreshToken).toMatch(/^[A-Za-z0-9_-]{86}$/);
    expect(after.refreshToken).not.toBe(tokens.refreshToken);
    expect(tokenCalls().map((call) => call.status)).toEqual([200, 200, 400]);
    await expectLiveRefreshToken(ids);
  });

  it('keeps the rotated refresh token when the loser drops the spent one before the winner stores it', async () => {
    const { tokens, ids } = await environment();
    // The winner's writes wait until the loser has finished: longer than the loser's re-read.
    const winner = heldClient((command) => command === 'PutSecretValueCommand');
    const winning = refresher(winner.client, ids, clock)({});
    await winner.holding;

    const lost = await refresher(plainClient(), ids, clock)({});
    // No newer tokens within its re-read: the loser dropped the refresh token Mautic refused.
    expect(lost).toMatchObject({ action: 'failed', why: 'needs_authorize' });
    expect(stored(ids.tokenSecretId)).not.toHaveProperty('refreshToken');
    winner.release();
    const won = await winning;

    expect(won).toMatchObject({ action: 'refreshed', grant: 'refresh_token' });
    const after = stored(ids.tokenSecretId);
    expect(after.refreshToken).toMatch(/^[A-Za-z0-9_-]{86}$/);
    expect(after.refreshToken).not.toBe(tokens.refreshToken);
    expect(tokenCalls().map((call) => call.status)).toEqual([200, 200, 400]);
    await expectLiveRefreshToken(ids);
  });

  it('makes the loser keep the winner’s tokens, with no alarm, when the winner stored them first', async () => {
    const { ids } = await environment();
    // The loser reads the tokens, then waits (before its token call) until the winner is done.
    const loser = heldClient(
      (command, input) =>
        command === 'GetSecretValueCommand' && input.SecretId === ids.clientSecretId,
    );
    const losing = refresher(loser.client, ids, clock)({});
    await loser.holding;

    const won = await refresher(plainClient(), ids, clock)({});
    const winners = stored(ids.tokenSecretId);
    loser.release();
    const lost = await losing;

    expect(won).toMatchObject({ action: 'refreshed', grant: 'refresh_token' });
    expect(lost).toMatchObject({ action: 'none', why: 'superseded' });
    expect(stored(ids.tokenSecretId)).toEqual(winners);
    expect(output.join('\n')).not.toContain('needs_authorize');
    expect(output.filter((line) => line.includes('"RefreshTokenSecondsLeft":0'))).toEqual([]);
    await expectLiveRefreshToken(ids);
  });

  it('keeps the winner’s rotated refresh token when its write failed and the loser’s drop came before its next run', async () => {
    const { tokens, ids } = await environment();
    const winner = refresher(plainClient(), ids, clock);
    // Both tries of the winner's write fail: it keeps the rotated tokens for its next run.
    fake.failNext('PutSecretValue', 2, { code: 'AccessDeniedException', status: 400 });
    const unsaved = await winner({});
    expect(unsaved).toMatchObject({ action: 'failed', why: 'write_failed' });

    // Nothing newer appears within the loser's re-read: a loss as far as it can tell.
    const lost = await refresher(plainClient(), ids, clock)({});
    expect(lost).toMatchObject({ action: 'failed', why: 'needs_authorize' });
    expect(stored(ids.tokenSecretId)).not.toHaveProperty('refreshToken');

    now += 300_000;
    const next = await winner({});

    expect(next).toMatchObject({ action: 'none', why: 'fresh' });
    const after = stored(ids.tokenSecretId);
    expect(after.refreshToken).toMatch(/^[A-Za-z0-9_-]{86}$/);
    expect(after.refreshToken).not.toBe(tokens.refreshToken);
    expect(tokenCalls().map((call) => call.status)).toEqual([200, 200, 400]);
    await expectLiveRefreshToken(ids);
  });

  it('ends with a live refresh token whichever run Mautic answers first', async () => {
    const { ids } = await environment();

    const outcomes = await Promise.all([
      refresher(plainClient(), ids, clock)({}),
      refresher(plainClient(), ids, clock)({ force: true, reason: 'token_refused' }),
    ]);

    expect(outcomes.filter((outcome) => outcome.action === 'refreshed')).toHaveLength(1);
    expect(stored(ids.tokenSecretId).refreshToken).toBeDefined();
    await expectLiveRefreshToken(ids);
  });
});
