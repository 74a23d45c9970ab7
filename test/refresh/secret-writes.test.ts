import type { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TokenSecret } from '../../functions/core/token-secret.ts';
import {
  type FreshnessPolicy,
  fewestSecondsLeftOnSchedule,
  keepsToWriteInterval,
  MIN_SECRET_WRITE_INTERVAL_SECONDS,
  scheduledFreshness,
} from '../../functions/core/tokens/token-freshness.ts';
import type { RefreshOutcome } from '../../functions/core/tokens/token-refresh.ts';
import { DEFAULTS } from '../../functions/shared/config.ts';
import { LocalRefresher } from '../../infra/local/local-refresher.ts';
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
 * AWS asks for at most one PutSecretValue per secret every 10 minutes. The refresher's scheduled
 * runs keep to it (functions/core/tokens/token-freshness.ts) while renewing tokens before they
 * expire, and `cdk synth` warns of a lifetime and schedule that cannot (keepsToWriteInterval):
 * both are measured here against the simulator, with the Secrets Manager stand-in.
 */

let fake: SecretsManagerFake;
let client: SecretsManagerClient;

beforeAll(async () => {
  fake = await startSecretsManagerFake();
  client = secretsClient(fake);
});

afterAll(async () => {
  client.destroy();
  await fake.close();
});

const START = Date.parse('2026-11-21T00:00:00Z');

/** An environment whose tokens `authorize` stored at `clock()`, its refresher, and the simulator. */
async function authorized(lifetimeSeconds: number, clock: () => number) {
  const sim: MauticSimulator = await startMauticSimulator({
    now: clock,
    clients: [NON_ADMIN],
    accessTokenLifetimeSeconds: lifetimeSeconds,
  });
  const tokens = await authorizedTokens(sim, clock);
  const ids = await createEnvironment(
    client,
    {
      baseUrl: sim.url,
      clientId: NON_ADMIN.clientId,
      clientSecret: NON_ADMIN.clientSecret,
      grantType: 'authorization_code',
    },
    tokens,
  );
  return { sim, tokens, run: refresher(client, ids, clock) };
}

const secondsLeftReported = (output: string[]) =>
  output
    .filter((line) => line.includes('"_aws"'))
    .map((line) => (JSON.parse(line) as Record<string, number | undefined>).AccessTokenSecondsLeft)
    .filter((value) => value !== undefined);

/**
 * The refresher on a schedule of `scheduleSeconds`, its first run `offsetSeconds` after the
 * tokens `authorize` stored, until it has written three times: the seconds between writes
 * (`authorize`'s included), what the token each write replaced had left, and the fewest seconds
 * left any run reported.
 */
async function onSchedule(lifetimeSeconds: number, scheduleSeconds: number, offsetSeconds: number) {
  let now = START;
  const clock = () => now;
  const output = captureOutput();
  const { sim, tokens, run } = await authorized(lifetimeSeconds, clock);
  try {
    let written = { at: now, expiresAt: Date.parse(tokens.accessTokenExpiresAt) };
    const intervals: number[] = [];
    const leftAtWrites: number[] = [];
    now += offsetSeconds * 1000;
    for (let runs = 0; intervals.length < 3 && runs < 60; runs++) {
      const outcome = await run({ scheduleSeconds });
      expect(outcome.action).not.toBe('failed');
      if (outcome.action === 'refreshed' && outcome.stored) {
        intervals.push((now - written.at) / 1000);
        leftAtWrites.push((written.expiresAt - now) / 1000);
        written = { at: now, expiresAt: Date.parse(outcome.stored.accessTokenExpiresAt) };
      }
      now += scheduleSeconds * 1000;
    }
    expect(intervals).toHaveLength(3);
    return { intervals, leftAtWrites, fewestLeft: Math.min(...secondsLeftReported(output)) };
  } finally {
    await sim.close();
  }
}

describe('the refresher’s writes on its schedule', () => {
  it.each([
    // cdk synth stays quiet: one write per 10 minutes at most, whatever the runs' phase.
    [60, 300],
    [25, 600],
    [21, 600],
    [20, 300],
    [16, 300],
    [12, 60],
    // cdk synth warns: renewing before expiry takes writes less than 10 minutes apart.
    [20, 600],
    [15, 300],
    [11, 60],
    [10, 300],
  ])(
    'with %i-minute tokens, run every %i s: as often as cdk synth says, never letting a token lapse',
    async (minutes, schedule) => {
      const policy: FreshnessPolicy = {
        refreshAheadSeconds: DEFAULTS.refreshAheadSeconds,
        scheduleSeconds: schedule,
      };
      const runs = [];
      for (const phase of [1, 0.37, 0.71, 0.95])
        runs.push(await onSchedule(minutes * 60, schedule, Math.round(phase * schedule)));
      const intervals = runs.flatMap((r) => r.intervals);

      expect(Math.min(...intervals) >= MIN_SECRET_WRITE_INTERVAL_SECONDS).toBe(
        keepsToWriteInterval(minutes * 60, policy),
      );
      // Every write came before the token it replaced expired, with the next run's slack to spare.
      expect(Math.min(...runs.flatMap((r) => r.leftAtWrites))).toBeGreaterThan(0);
      // The AccessTokenAlarm's threshold (at most this) is never crossed by a healthy refresher.
      expect(Math.min(...runs.map((r) => r.fewestLeft))).toBeGreaterThanOrEqual(
        fewestSecondsLeftOnSchedule(minutes * 60, policy),
      );
    },
  );
});

describe('room for a failed scheduled renewal (docs/tokens.md)', () => {
  /**
   * The fewest seconds left when the run after a failed renewal comes, over every phase of the
   * schedule: the renewal is the first run that finds the tokens due.
   */
  function leftAtRetry(lifetimeSeconds: number, scheduleSeconds: number): number {
    const policy = { refreshAheadSeconds: DEFAULTS.refreshAheadSeconds, scheduleSeconds };
    const token = {
      updatedAt: new Date(START).toISOString(),
      accessTokenExpiresAt: new Date(START + lifetimeSeconds * 1000).toISOString(),
    };
    let fewest = Number.POSITIVE_INFINITY;
    for (let phase = 1; phase <= scheduleSeconds; phase++) {
      let at = phase;
      // Bounded: an expired token is always due.
      while (scheduledFreshness(token, START + at * 1000, policy) !== 'due') at += scheduleSeconds;
      fewest = Math.min(fewest, lifetimeSeconds - at - scheduleSeconds);
    }
    return fewest;
  }

  it.each([
    [1, 13],
    [5, 21],
    [10, 42],
  ])(
    'with runs every %i minutes, leaves the retry a minute from %i-minute tokens on, not below',
    (minutes, shortest) => {
      expect(leftAtRetry(shortest * 60, minutes * 60)).toBeGreaterThanOrEqual(60);
      expect(leftAtRetry((shortest - 1) * 60, minutes * 60)).toBeLessThan(60);
    },
  );
});

describe('a scheduled run that finds tokens due', () => {
  async function twentyMinuteTokens() {
    let now = START;
    const env = await authorized(20 * 60, () => now);
    return { ...env, at: (seconds: number) => (now = START + seconds * 1000) };
  }
  const storedOf = (tokens: TokenSecret) => ({
    updatedAt: tokens.updatedAt,
    accessTokenExpiresAt: tokens.accessTokenExpiresAt,
  });

  it('leaves them to the next run while they were written under 10 minutes ago', async () => {
    const output = captureOutput();
    const { sim, tokens, run, at } = await twentyMinuteTokens();
    try {
      at(300);
      // Less than max(900 s, half the lifetime) is left (900 s): due, but written 5 minutes ago.
      const recent = await run({ scheduleSeconds: 300 });
      at(600);
      const renewed = await run({ scheduleSeconds: 300 });

      expect(recent).toEqual({
        action: 'none',
        why: 'written_recently',
        stored: storedOf(tokens),
      });
      expect(renewed).toMatchObject({ action: 'refreshed', grant: 'refresh_token' });
      expect(secondsLeftReported(output)).toEqual([900, 1200]);
    } finally {
      await sim.close();
    }
  });

  it('renews them at once when they would expire before the next scheduled run could', async () => {
    let now = START;
    const a = await authorized(10 * 60, () => now);
    const b = await authorized(10 * 60, () => now);
    try {
      now = START + 300_000;
      // 300 s left: a run in 300 s (and its 60 s of slack) would come too late; one in 60 s not.
      expect(await a.run({ scheduleSeconds: 300 })).toMatchObject({ action: 'refreshed' });
      expect(await b.run({ scheduleSeconds: 60 })).toMatchObject({
        action: 'none',
        why: 'written_recently',
      });
      now = START + 480_000;
      expect(await b.run({ scheduleSeconds: 60 })).toMatchObject({ action: 'refreshed' });
    } finally {
      await a.sim.close();
      await b.sim.close();
    }
  });

  it('assumes the longest schedule, 10 minutes, when it is not told its own', async () => {
    const { sim, run, at } = await twentyMinuteTokens();
    try {
      at(300);
      const recent = await run({});
      // 640 s left: less than the 600 s of a 10-minute schedule and its 60 s of slack.
      at(560);
      const renewed = await run({ 'detail-type': 'Scheduled Event' });

      expect(recent).toMatchObject({ action: 'none', why: 'written_recently' });
      expect(renewed).toMatchObject({ action: 'refreshed' });
    } finally {
      await sim.close();
    }
  });

  it('is told the local timer’s period, REFRESH_INTERVAL_SECONDS, under npm start: an hourly timer renews what a 10-minute schedule would leave', async () => {
    const { sim, tokens, run, at } = await twentyMinuteTokens();
    const ran: RefreshOutcome[] = [];
    const local = new LocalRefresher(
      async (event) => {
        const outcome = await run(event);
        ran.push(outcome);
        return outcome;
      },
      { info: () => {}, warn: () => {}, error: () => {} },
      3600,
    );
    try {
      // 900 s left, written 5 minutes ago: put off on a 10-minute schedule, not on an hourly one.
      at(300);
      await local.scheduled();

      expect(ran).toEqual([
        expect.objectContaining({ action: 'refreshed', grant: 'refresh_token' }),
      ]);
      expect(ran[0]?.stored?.updatedAt).not.toBe(tokens.updatedAt);
    } finally {
      await sim.close();
    }
  });

  it('never holds back a forced run: the batch function’s stale token, or the operator’s refresh', async () => {
    const { sim, tokens, run, at } = await twentyMinuteTokens();
    try {
      at(300);
      const forced = await run({
        force: true,
        reason: 'refused',
        staleUpdatedAt: tokens.updatedAt,
      });
      at(301);
      const operator = await run({ force: true, reason: 'operator' });

      expect(forced).toMatchObject({ action: 'refreshed' });
      expect(operator).toMatchObject({ action: 'refreshed' });
    } finally {
      await sim.close();
    }
  });
});
