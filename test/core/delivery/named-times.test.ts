/**
 * A time Mautic names (a 429's `X-RateLimit-Reset`, a `Retry-After`) is read in the units Mautic
 * uses (reference §6.3: Unix seconds; RFC 9110: delay seconds or an HTTP date), checked for sense
 * and capped by the retry settings: one reset sent in milliseconds must not stop a container
 * calling Mautic for thousands of years, and one already past must not bring events back at once.
 * Through the real client against the simulator, and the policy on its own.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { planBatches } from '../../../functions/core/delivery/batch-plan.ts';
import { deliverChunks } from '../../../functions/core/delivery/delivery.ts';
import {
  DEFAULT_DELIVERY_OPTIONS,
  type DeliveryDeps,
} from '../../../functions/core/delivery/delivery-calls.ts';
import {
  type CallSituation,
  decideAfterFailure,
} from '../../../functions/core/delivery/failure-policy.ts';
import { MauticRateLimitError, MauticTransientError } from '../../../functions/core/errors.ts';
import { MauticApiClient } from '../../../functions/core/mautic/mautic-api.ts';
import { apiErrorFor } from '../../../functions/core/mautic/mautic-http.ts';
import {
  decideRequeue,
  IN_CALL_RETRY,
  retryDelaySeconds,
} from '../../../functions/core/retry-policy.ts';
import { type MauticSimulator, startMauticSimulator } from '../../../mautic-simulator/server.ts';
import { InMemoryActionLedger } from '../../support/action-ledger.ts';
import { incoming } from '../../support/events.ts';
import { recorder } from '../../support/observe.ts';

const NOW = Date.parse('2026-11-25T12:00:00Z');
const HOUR = 3_600_000;
let now = NOW;
let sim: MauticSimulator;

beforeEach(async () => {
  now = NOW;
  sim = await startMauticSimulator({ now: () => now });
});

afterEach(async () => {
  await sim.close();
});

const answer429 = (headers: Record<string, string>) => ({
  status: 429,
  headers: { 'content-type': 'text/html; charset=UTF-8', ...headers },
  body: JSON.stringify({
    errors: [{ code: 429, message: 'You exceeded the rate limit of 10 API calls per hour.' }],
  }),
});

function situation(overrides: Partial<CallSituation> = {}): CallSituation {
  return {
    entity: 'contacts',
    action: 'create',
    items: 1,
    attempt: 1,
    token: 'cached',
    now: NOW,
    callsUntil: NOW + 60_000,
    halt: {},
    random: () => 0.5,
    ...overrides,
  };
}

describe('a 429 whose X-RateLimit-Reset is in milliseconds, through the container', () => {
  it('pauses the container no longer than the longest delay, and calls Mautic again after it', async () => {
    const namedPause: { until?: number } = {};
    const observed = recorder();
    const deps: DeliveryDeps = {
      api: new MauticApiClient({ baseUrl: sim.url, fetch, now: () => now }),
      ledger: new InMemoryActionLedger(),
      // A token of the hour: the second run is an hour on.
      tokens: { accessToken: async () => sim.issueToken().accessToken },
      logger: observed.logger,
      metrics: observed.metrics,
      clock: { now: () => now },
      sleep: async (ms) => {
        now += ms;
      },
      random: () => 0.5,
      learnedLimit: { value: undefined },
      namedPause,
    };
    const options = { ...DEFAULT_DELIVERY_OPTIONS, maxNamedPauseMs: HOUR };
    sim.inject(
      { path: '/api/contacts/batch/new' },
      answer429({ 'X-RateLimit-Reset': String(NOW + 1_800_000) }),
    );
    const create = (n: number) =>
      incoming({ entity: 'contacts', action: 'create', data: { email: `c${n}@example.com` } });

    const first = create(1);
    const outcomes = await deliverChunks(planBatches([first], 200), now + 60_000, deps, options);

    expect(outcomes.get(first.messageId)).toMatchObject({ kind: 'retry', reason: 'rate_limited' });
    const pause = namedPause.until ?? 0;
    expect(pause).toBeGreaterThan(NOW);
    expect(pause).toBeLessThanOrEqual(NOW + HOUR);
    const notBefore = (outcomes.get(first.messageId) as { notBefore?: number }).notBefore ?? 0;
    expect(notBefore).toBeLessThanOrEqual(NOW + HOUR);

    // An hour on, the container calls Mautic again.
    now = NOW + HOUR + 1;
    const later = create(2);
    const after = await deliverChunks(planBatches([later], 200), now + 60_000, deps, options);
    expect(after.get(later.messageId)).toMatchObject({ kind: 'delivered' });
  });
});

describe('a named time already past', () => {
  const policy = {
    baseSeconds: 30,
    maxDelaySeconds: 900,
    horizonSeconds: 86_400,
    maxReceiveCount: 200,
  };

  it('reads X-RateLimit-Reset as Unix seconds', () => {
    const error = apiErrorFor(
      'POST',
      '/api/contacts/batch/new',
      {
        status: 429,
        headers: new Headers({ 'X-RateLimit-Reset': String(NOW / 1000 + 90) }),
        json: undefined,
        isJson: false,
      },
      NOW,
    ) as MauticRateLimitError;

    expect(error.resetAt).toBe(NOW + 90_000);
  });

  it('brings an event back after the backoff, never at once (over and over while Mautic answers 429)', () => {
    const requeue = decideRequeue(
      { reason: 'rate_limited', notBefore: NOW - 10_000, status: 429 },
      { receives: 1, firstReceivedAt: NOW },
      { now: NOW, policy, maxDelaySeconds: 3600, random: () => 0.5 },
    );

    expect(requeue).toEqual({
      kind: 'delay',
      seconds: retryDelaySeconds(policy, 1, 0.5),
      reason: 'rate_limited',
    });
    expect(retryDelaySeconds(policy, 1, 0.5)).toBeGreaterThan(0);
  });
});

describe('the policy on an absurd named time', () => {
  const retry = { ...IN_CALL_RETRY, maxNamedPauseMs: HOUR };

  it.each([
    ['milliseconds read as seconds', NOW * 1000],
    ['a reset a year ahead', NOW + 365 * 24 * HOUR],
  ])('caps %s at the longest delay', (_, resetAt) => {
    const error = new MauticRateLimitError({
      method: 'POST',
      path: '/x',
      resetAt,
      limit: undefined,
    });
    const decision = decideAfterFailure(error, situation({ retry }));

    expect(decision).toMatchObject({
      kind: 'settle',
      halt: { rateLimitedUntil: NOW + HOUR },
      outcome: { kind: 'retry', reason: 'rate_limited', notBefore: NOW + HOUR },
    });
  });

  it('caps a Retry-After of a 503 as well', () => {
    const error = new MauticTransientError({
      method: 'POST',
      path: '/x',
      kind: 'server',
      status: 503,
      possiblyApplied: false,
      retryAt: NOW + 100 * HOUR,
    });
    const decision = decideAfterFailure(error, situation({ retry }));

    expect(decision).toMatchObject({ halt: { rateLimitedUntil: NOW + HOUR } });
  });

  it('holds a later run no longer than the cap from its own clock, whatever the container kept', async () => {
    const token = sim.issueToken().accessToken;
    const observed = recorder();
    const created = incoming({ entity: 'contacts', action: 'create', data: { email: 'a@x.com' } });
    const outcomes = await deliverChunks(
      planBatches([created], 200),
      now + 60_000,
      {
        api: new MauticApiClient({ baseUrl: sim.url, fetch }),
        ledger: new InMemoryActionLedger(),
        tokens: { accessToken: async () => token },
        logger: observed.logger,
        metrics: observed.metrics,
        clock: { now: () => now },
        sleep: async () => {},
        random: () => 0.5,
        learnedLimit: { value: undefined },
        // What a container kept from before the cap: thousands of years ahead.
        namedPause: { until: NOW * 1000 },
      },
      { ...DEFAULT_DELIVERY_OPTIONS, maxNamedPauseMs: HOUR },
    );

    expect(outcomes.get(created.messageId)).toMatchObject({
      kind: 'retry',
      reason: 'rate_limited',
      notBefore: NOW + HOUR,
    });
  });
});
