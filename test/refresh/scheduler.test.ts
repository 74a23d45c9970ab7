import type { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { SecretsManagerTokenStore } from '../../functions/adapters/secrets-manager-token-store.ts';
import { MauticApiClient } from '../../functions/core/mautic/mautic-api.ts';
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

const SCHEDULE_SECONDS = 300;
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

type Step =
  | { kind: 'advance'; seconds: number }
  | { kind: 'forced' }
  | { kind: 'read' }
  | { kind: 'storeFails' }
  | { kind: 'mauticFails' };

const stepArbitrary: fc.Arbitrary<Step> = fc.oneof(
  fc.record({ kind: fc.constant('advance' as const), seconds: fc.integer({ min: 1, max: 2_400 }) }),
  fc.constant({ kind: 'forced' as const }),
  fc.constant({ kind: 'read' as const }),
  fc.constant({ kind: 'storeFails' as const }),
  fc.constant({ kind: 'mauticFails' as const }),
);

describe('token refresher scheduling', () => {
  it('never uses a refresh token twice, and readers never hold an expired token while a refresh was possible', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(stepArbitrary, { minLength: 1, maxLength: 25 }), async (steps) => {
        let now = Date.parse('2026-11-21T00:00:00Z');
        const clock = () => now;
        const sim = await startMauticSimulator({ now: clock, clients: [NON_ADMIN] });
        const output = captureOutput();
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
          const reader = new SecretsManagerTokenStore(client, ids.tokenSecretId, {
            cacheMs: 30_000,
            clock: { now: clock },
          });
          const api = new MauticApiClient({ baseUrl: sim.url, fetch });
          let nextScheduled = now;
          // A fault hits the next scheduled run that is due to refresh, one at a time and never
          // right after a failed run: faults that persist across runs would let any token
          // expire, which no refresher can prevent.
          let fault: 'store' | 'mautic' | undefined;
          let lastFailed = false;
          const due = () => {
            const stored = JSON.parse(fake.current(ids.tokenSecretId) ?? '{}') as {
              accessTokenExpiresAt?: string;
            };
            return Date.parse(stored.accessTokenExpiresAt ?? '') - now <= 900_000;
          };

          for (const step of steps) {
            if (step.kind === 'advance') {
              const target = now + step.seconds * 1000;
              // The schedule fires every 5 minutes of the simulated time that passes.
              while (nextScheduled <= target) {
                now = nextScheduled;
                if (fault && !lastFailed && due()) {
                  if (fault === 'store')
                    fake.failNext('PutSecretValue', 2, {
                      code: 'InternalServiceError',
                      status: 400,
                    });
                  else sim.inject({ path: '/oauth/v2/token' }, { status: 503, body: 'busy' });
                  fault = undefined;
                }
                lastFailed = (await run({})).action === 'failed';
                nextScheduled += SCHEDULE_SECONDS * 1000;
              }
              now = target;
            } else if (step.kind === 'forced') {
              await run({ force: true, reason: 'property' });
            } else if (step.kind === 'storeFails') {
              fault = 'store';
            } else if (step.kind === 'mauticFails') {
              fault = 'mautic';
            } else if (step.kind === 'read') {
              const token = await reader.accessToken();
              // Mautic itself judges the token: a 401 here would be a reader holding an expired one.
              await expect(
                api.list('contacts', { limit: 1 }, { accessToken: token }),
              ).resolves.toMatchObject({ total: 0 });
            }
          }

          // A refresh token refused by Mautic would be a 400: a refresh token used twice.
          const grants = sim.requests.filter((r) => r.path === '/oauth/v2/token');
          expect(grants.filter((r) => r.status === 400)).toEqual([]);
          expect(output.join('')).not.toContain('cannot be refreshed');
        } finally {
          vi.restoreAllMocks();
          await sim.close();
        }
      }),
      { numRuns: 150 },
    );
    // 150 runs take a few seconds on an idle machine; a busy one needs more.
  }, 90_000);
});
