import type { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULTS } from '../../functions/shared/config.ts';
import { MIN_SECRET_WRITE_INTERVAL_SECONDS } from '../../infra/aws/environments.ts';
import {
  type SecretsManagerFake,
  startSecretsManagerFake,
} from '../../infra/local/secrets-manager-fake.ts';
import { startMauticSimulator } from '../../mautic-simulator/server.ts';
import {
  authorizedTokens,
  captureOutput,
  createEnvironment,
  NON_ADMIN,
  refresher,
  secretsClient,
} from '../support/refresh.ts';

/**
 * What `cdk synth` assumes of the refresher (infra/aws/environments.ts, checkSecretWrites): on
 * its schedule alone, it writes the token secret once a token lifetime less
 * max(REFRESH_AHEAD_SECONDS, half the lifetime), so 25-minute tokens and longer keep to AWS's one
 * PutSecretValue per 10 minutes, and 20-minute ones do not.
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

/** The seconds between the refresher's writes over 3 hours of runs every `scheduleSeconds`. */
async function writeIntervals(lifetimeSeconds: number, scheduleSeconds: number) {
  let now = Date.parse('2026-11-21T00:00:00Z');
  const clock = () => now;
  const sim = await startMauticSimulator({
    now: clock,
    clients: [NON_ADMIN],
    accessTokenLifetimeSeconds: lifetimeSeconds,
  });
  captureOutput();
  try {
    const ids = await createEnvironment(
      client,
      {
        baseUrl: sim.url,
        clientId: NON_ADMIN.clientId,
        clientSecret: NON_ADMIN.clientSecret,
        grantType: 'authorization_code',
      },
      await authorizedTokens(sim, clock),
    );
    const run = refresher(client, ids, clock);
    const writes: number[] = [now];
    const end = now + 3 * 3_600_000;
    while (now < end) {
      now += scheduleSeconds * 1000;
      if ((await run({})).action === 'refreshed') writes.push(now);
    }
    return writes.slice(1).map((at, i) => (at - (writes[i] ?? at)) / 1000);
  } finally {
    await sim.close();
  }
}

describe('the refresher’s writes on its schedule', () => {
  it.each([
    [25, 60],
    [25, 600],
    [60, 300],
  ])(
    'keeps to one write per 10 minutes with %i-minute tokens, run every %i s',
    async (minutes, schedule) => {
      const intervals = await writeIntervals(minutes * 60, schedule);

      expect(intervals.length).toBeGreaterThan(2);
      expect(Math.min(...intervals)).toBeGreaterThanOrEqual(MIN_SECRET_WRITE_INTERVAL_SECONDS);
      // And renews before expiry: never later than the lifetime.
      expect(Math.max(...intervals)).toBeLessThan(minutes * 60);
    },
  );

  it('writes more often with 20-minute tokens, which cdk synth refuses', async () => {
    const intervals = await writeIntervals(20 * 60, 60);

    expect(Math.min(...intervals)).toBeLessThan(MIN_SECRET_WRITE_INTERVAL_SECONDS);
    expect(DEFAULTS.refreshAheadSeconds).toBe(900);
  });
});
