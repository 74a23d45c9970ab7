import { beforeEach, describe, expect, it } from 'vitest';
import { TokenUnavailableError } from '../../../functions/core/errors.ts';
import type {
  RefreshAnswer,
  RefreshRequester,
  TokenReader,
  TokenVault,
} from '../../../functions/core/ports.ts';
import type { ClientSecret, TokenSecret } from '../../../functions/core/token-secret.ts';
import { refreshTokens } from '../../../functions/core/tokens/token-refresh.ts';
import { WaitingTokenSource } from '../../../functions/core/tokens/token-wait.ts';
import { LocalRefresher } from '../../../infra/local/local-refresher.ts';
import { recorder } from '../../support/observe.ts';

const START = Date.parse('2026-11-21T00:00:00Z');
let now = START;
let sleeps: number[];
let stored: { token: TokenSecret | undefined; versionId: string };
let grants: number;

const observed = recorder();
const { logger, lines: logs } = observed;

/** Fake time: a sleep moves the clock and lets every other caller run meanwhile. */
const sleep = async (ms: number) => {
  sleeps.push(ms);
  now += ms;
  await yieldTurns(3);
};
const yieldTurns = async (turns: number) => {
  for (let i = 0; i < turns; i++) await new Promise((resolve) => setImmediate(resolve));
};

const token = (name: string, lifetimeMs = 5_000): TokenSecret => ({
  accessToken: `${name}-access-token-value`,
  accessTokenExpiresAt: new Date(now + lifetimeMs).toISOString(),
  obtainedWith: 'client_credentials',
  updatedAt: new Date(now).toISOString(),
});

/** The token secret as a batch container reads it (no cache: each read is fresh). */
const reader: TokenReader = { read: async () => stored.token };

/** An in-memory token secret with compare-and-swap writes, for the real refresher core. */
const vault: TokenVault = {
  readClient: async () => ({
    client: {
      baseUrl: 'http://127.0.0.1:1',
      clientId: '1_a',
      clientSecret: 'client-secret-value',
      grantType: 'client_credentials',
    } satisfies ClientSecret,
  }),
  readToken: async () => ({ token: stored.token, versionId: stored.versionId }),
  readPending: async () => undefined,
  writeToken: async (next, requestToken, basedOn) => {
    if (basedOn !== stored.versionId) return 'superseded';
    stored = { token: next, versionId: requestToken };
    return 'written';
  },
};

/** The real refresher core, one run at a time (reserved concurrency 1), with a slow Mautic. */
function refresherWithReservedConcurrency(): LocalRefresher {
  const run = (event: unknown) =>
    refreshTokens(event as { force: boolean; reason: string; staleUpdatedAt?: string | null }, {
      vault,
      granterFor: () => ({
        clientCredentials: async () => {
          grants++;
          // The token call takes a while: other callers find the refresher busy meanwhile.
          await yieldTurns(10);
          now += 300;
          return {
            accessToken: `granted-${grants}-access-token-value`,
            accessTokenExpiresAt: now + 5_000,
            obtainedAt: now,
            scope: null,
          };
        },
        refresh: async () => {
          throw new Error('not used');
        },
      }),
      clock: { now: () => now },
      logger,
      metrics: { addMetric: () => {} },
      refreshAheadSeconds: 900,
      refreshTokenLifetimeSeconds: 1_209_600,
      // Only a refused refresh token makes it pause (real time); client_credentials has none.
      sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
      unsaved: { value: undefined },
    });
  return new LocalRefresher(run, logger, 300);
}

const source = (refresher: RefreshRequester, pause: (ms: number) => Promise<void> = sleep) =>
  new WaitingTokenSource({
    reader,
    refresher,
    clock: { now: () => now },
    sleep: pause,
    logger,
    defaultWaitMs: 10_000,
  });

beforeEach(() => {
  now = START;
  sleeps = [];
  observed.clear();
  grants = 0;
  stored = { token: undefined, versionId: 'v0' };
});

describe('WaitingTokenSource', () => {
  it('hands out a usable stored token without asking the refresher', async () => {
    stored.token = token('current');
    const asked: unknown[] = [];

    const got = await source({
      refreshNow: async (request) => {
        asked.push(request);
        return { kind: 'busy' };
      },
    }).accessToken();

    expect(got).toBe('current-access-token-value');
    expect(asked).toEqual([]);
  });

  it('runs the refresher synchronously for a missing token and uses what it stored', async () => {
    const asked: unknown[] = [];
    const got = await source({
      refreshNow: async (request, timeoutMs) => {
        asked.push({ ...request, timeoutMs });
        stored.token = token('new');
        return { kind: 'answered', action: 'refreshed' };
      },
    }).accessToken({ waitUntil: now + 8_000 });

    expect(got).toBe('new-access-token-value');
    expect(asked).toEqual([{ reason: 'token_missing', staleUpdatedAt: null, timeoutMs: 8_000 }]);
    expect(sleeps).toEqual([]);
  });

  it('names the expired or refused tokens it had, so the refresher can tell newer ones', async () => {
    stored.token = token('old', -1);
    const old = stored.token;
    const asked: Array<{ reason: string; staleUpdatedAt: string | null }> = [];
    const refresher: RefreshRequester = {
      refreshNow: async (request) => {
        asked.push(request);
        now += 10;
        stored.token = token(`new${asked.length}`);
        return { kind: 'answered', action: 'refreshed' };
      },
    };
    const tokens = source(refresher);

    const afterExpiry = await tokens.accessToken();
    const afterRefusal = await tokens.accessToken({ refused: afterExpiry });

    expect(afterExpiry).toBe('new1-access-token-value');
    expect(afterRefusal).toBe('new2-access-token-value');
    expect(asked).toEqual([
      { reason: 'token_expired', staleUpdatedAt: old.updatedAt },
      { reason: 'token_refused', staleUpdatedAt: expect.any(String) },
    ]);
  });

  it('polls the token secret with backoff while the refresher is busy, until a newer token appears', async () => {
    stored.token = token('old', -1);
    let asks = 0;
    const got = await source({
      refreshNow: async () => {
        asks++;
        // The run holding the refresher stores its tokens 1.6 s from now.
        if (now >= START + 1_600) stored.token = token('from-the-other-run');
        return { kind: 'busy' };
      },
    }).accessToken({ waitUntil: START + 10_000 });

    expect(got).toBe('from-the-other-run-access-token-value');
    expect(sleeps).toEqual([250, 500, 1000]);
    expect(asks).toBe(4);
  });

  it('treats a short-lived token with less than a tenth of its lifetime left as expired', async () => {
    stored.token = token('short', 2_000);
    const tokens = source({
      refreshNow: async () => {
        stored.token = token('long', 3_600_000);
        return { kind: 'answered', action: 'refreshed' };
      },
    });

    now += 1_750;
    const stillShort = await tokens.accessToken();
    now += 100;
    const renewed = await tokens.accessToken();

    expect(stillShort).toBe('short-access-token-value');
    expect(renewed).toBe('long-access-token-value');
  });

  it('gives up at waitUntil when no token arrives, saying so without any token', async () => {
    stored.token = token('old', -1);
    const tokens = source({ refreshNow: async (): Promise<RefreshAnswer> => ({ kind: 'busy' }) });

    const error = await tokens.accessToken({ waitUntil: START + 7_000 }).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(TokenUnavailableError);
    expect((error as Error).message).toBe('No usable Mautic access token arrived in time');
    expect(now).toBe(START + 7_000);
    expect(sleeps).toEqual([250, 500, 1000, 2000, 2000, 1250]);
    expect(logs.at(-1)).toMatchObject({
      level: 'warn',
      extra: [{ event: 'no_token', reason: 'token_expired', waitedMs: 7_000, asks: 6 }],
    });
    expect(JSON.stringify(logs)).not.toContain('access-token-value');
  });

  it('stops waiting at once when the refresher needs the operator', async () => {
    const tokens = source({
      refreshNow: async () => ({ kind: 'answered', action: 'failed', why: 'needs_authorize' }),
    });

    await expect(tokens.accessToken()).rejects.toThrow(
      'The token refresher cannot get a Mautic token (needs_authorize): its log names the fix',
    );
    expect(sleeps).toEqual([]);
  });

  it('keeps trying through a transient refresher failure and an unreachable refresher', async () => {
    let asks = 0;
    const got = await source({
      refreshNow: async () => {
        asks++;
        if (asks === 1) return { kind: 'answered', action: 'failed', why: 'transient' };
        if (asks === 2) throw new Error('connect ECONNREFUSED');
        stored.token = token('third-time');
        return { kind: 'answered', action: 'refreshed' };
      },
    }).accessToken();

    expect(got).toBe('third-time-access-token-value');
    expect(sleeps).toEqual([250, 500]);
    expect(logs.some((l) => l.message.startsWith('Could not run the token refresher'))).toBe(true);
  });

  it('shares one wait among the callers of one container', async () => {
    let asks = 0;
    const tokens = source({
      refreshNow: async () => {
        asks++;
        await yieldTurns(5);
        stored.token = token('shared');
        return { kind: 'answered', action: 'refreshed' };
      },
    });

    const got = await Promise.all([tokens.accessToken(), tokens.accessToken()]);

    expect(got).toEqual(['shared-access-token-value', 'shared-access-token-value']);
    expect(asks).toBe(1);
  });
});

/**
 * Fake time for many concurrent callers: a sleep waits until the clock reaches its end, and the
 * clock jumps to the next sleeper's end whenever everyone else is waiting.
 */
const timers: Array<{ at: number; resolve: () => void }> = [];
const timedSleep = (ms: number) => {
  sleeps.push(ms);
  return new Promise<void>((resolve) => timers.push({ at: now + ms, resolve }));
};
async function withFakeTime<T>(work: Promise<T>): Promise<T> {
  let done = false;
  work.then(
    () => {
      done = true;
    },
    () => {
      done = true;
    },
  );
  for (let round = 0; round < 10_000 && !done; round++) {
    await yieldTurns(20);
    if (done) break;
    timers.sort((a, b) => a.at - b.at);
    const next = timers.shift();
    if (next) {
      now = Math.max(now, next.at);
      next.resolve();
    }
  }
  return work;
}

describe('many containers and the real refresher with reserved concurrency 1', () => {
  it('twenty callers that find the token expired cause one token grant, and all get the new token', async () => {
    stored.token = token('old', -1);
    const refresher = refresherWithReservedConcurrency();
    const containers = Array.from({ length: 20 }, () => source(refresher, timedSleep));

    const got = await withFakeTime(
      Promise.all(containers.map((tokens) => tokens.accessToken({ waitUntil: START + 10_000 }))),
    );

    expect(new Set(got)).toEqual(new Set(['granted-1-access-token-value']));
    expect(grants).toBe(1);
    // The throttled ones polled the secret until the one run's token appeared.
    expect(sleeps.length).toBeGreaterThan(0);
    expect(JSON.stringify(logs)).not.toContain('access-token-value');
  });

  it('a revocation: every container refuses the same token, and one grant replaces it', async () => {
    stored.token = token('revoked', 3_600_000);
    const refresher = refresherWithReservedConcurrency();
    const containers = Array.from({ length: 10 }, () => source(refresher, timedSleep));

    const got = await withFakeTime(
      Promise.all(
        containers.map((tokens) =>
          tokens.accessToken({ refused: 'revoked-access-token-value', waitUntil: START + 10_000 }),
        ),
      ),
    );

    expect(new Set(got)).toEqual(new Set(['granted-1-access-token-value']));
    expect(grants).toBe(1);
  });
});
