/**
 * The circuit as a pure state machine (contract §2, "Mautic's health sets the pace"): what opens
 * it, when it probes, what closes it, when held events come back, and how the calls allowed in
 * flight follow Mautic's time per item.
 */
import { describe, expect, it } from 'vitest';
import {
  type CircuitSettings,
  callKey,
  circuitSettings,
  closedHealth,
  FAILURES_TO_OPEN,
  failureSays,
  gridAfter,
  heldUntil,
  paced,
  probeDue,
  recordAnswer,
  recordCallTime,
  recordFailure,
  releaseSlot,
  takeProbe,
  takeSlot,
} from '../../../functions/core/delivery/circuit.ts';
import {
  MauticAuthError,
  MauticBatchLimitError,
  MauticPermanentError,
  MauticRateLimitError,
  MauticResponseError,
  MauticTransientError,
} from '../../../functions/core/errors.ts';
import type { HealthState } from '../../../functions/core/health-state.ts';

/** A whole minute: on every point of the probe grids below. */
const T0 = Date.parse('2026-12-01T10:00:00Z');
const SETTINGS: CircuitSettings = { probeBaseMs: 5_000, probeMaxMs: 60_000, ceiling: 4 };
const fail = (call: string, at: number, status = 503) => ({
  call,
  at,
  status,
  message: `POST /api/contacts/batch/new failed with status ${status}`,
});

function failCalls(calls: string[], state = closedHealth(T0)): HealthState {
  return calls.reduce((s, call, i) => recordFailure(s, fail(call, T0 + i * 100), SETTINGS), state);
}

describe('what opens the circuit', () => {
  it(`opens on the ${FAILURES_TO_OPEN}rd distinct call failing with no answer between, with the next probe on the grid after it`, () => {
    const twice = failCalls(['a', 'b']);
    expect(twice.circuit).toBe('closed');

    const opened = recordFailure(twice, fail('c', T0 + 1_000), SETTINGS);

    expect(opened).toMatchObject({
      circuit: 'open',
      since: T0 + 1_000,
      probeIntervalMs: 5_000,
      nextProbeAt: T0 + 5_000,
      failures: [],
      lastFailure: { status: 503, message: expect.stringContaining('503') },
    });
  });

  it('never opens on one call failing again and again (an item that fails every call it is in)', () => {
    expect(failCalls(Array.from({ length: 20 }, () => 'poison')).circuit).toBe('closed');
  });

  it('starts counting again after an answered call, and forgets failures older than a minute', () => {
    const answered = recordAnswer(failCalls(['a', 'b']), T0 + 500);
    expect(answered.failures).toEqual([]);
    expect(recordFailure(answered, fail('c', T0 + 600), SETTINGS).circuit).toBe('closed');

    const old = failCalls(['a', 'b']);
    expect(recordFailure(old, fail('c', T0 + 61_000), SETTINGS).circuit).toBe('closed');
  });

  it('puts the first probe no earlier than a time Mautic named', () => {
    const named = T0 + 42_000;
    const opened = recordFailure(failCalls(['a', 'b']), fail('c', T0 + 300, 429), SETTINGS, named);

    expect(opened.nextProbeAt).toBe(named);
  });

  it('tells failures that say Mautic is down from answers and from the invocation’s own abort', () => {
    const down = [
      new MauticTransientError({ method: 'POST', path: '/p', kind: 'server', status: 503 }),
      new MauticTransientError({ method: 'POST', path: '/p', kind: 'network' }),
      new MauticTransientError({ method: 'POST', path: '/p', kind: 'timeout' }),
      new MauticRateLimitError({ method: 'POST', path: '/p', resetAt: T0, limit: 10 }),
    ];
    const up = [
      new MauticPermanentError({ method: 'POST', path: '/p', status: 422, mauticMessage: 'x' }),
      new MauticAuthError({ method: 'POST', path: '/p', reason: 'token_expired' }),
      new MauticBatchLimitError({ method: 'POST', path: '/p', limit: 100 }),
      new MauticResponseError('unreadable', {
        method: 'POST',
        path: '/p',
        status: 200,
        retryable: false,
      }),
    ];

    expect(down.map(failureSays)).toEqual(down.map(() => 'down'));
    expect(up.map(failureSays)).toEqual(up.map(() => 'up'));
    expect(
      failureSays(new MauticTransientError({ method: 'POST', path: '/p', kind: 'aborted' })),
    ).toBe('unknown');
    expect(failureSays(new Error('a bug'))).toBe('unknown');
  });

  it('gives a call and each half of it different keys', () => {
    const ids = Array.from({ length: 8 }, (_, i) => `m${i}`);
    const keys = new Set([callKey(ids), callKey(ids.slice(0, 4)), callKey(ids.slice(4))]);

    expect(keys.size).toBe(3);
    expect(callKey(ids)).toBe(callKey([...ids]));
  });
});

describe('probing', () => {
  const open = failCalls(['a', 'b', 'c']);

  it('lets one holder take the probe once it is due, and no one before', () => {
    expect(probeDue(open, T0 + 4_999)).toBe(false);
    expect(takeProbe(open, 'x', T0 + 4_999, T0 + 60_000)).toBeUndefined();

    const probing = takeProbe(open, 'x', T0 + 5_000, T0 + 60_000);
    expect(probing).toMatchObject({
      circuit: 'half_open',
      probe: { holder: 'x', until: T0 + 60_000 },
    });
    expect(takeProbe(probing as HealthState, 'y', T0 + 5_001, T0 + 60_000)).toBeUndefined();
  });

  it('lets another take the probe once the lease of one that never answered has ended', () => {
    const probing = takeProbe(open, 'crashed', T0 + 5_000, T0 + 20_000) as HealthState;

    expect(takeProbe(probing, 'y', T0 + 19_999, T0 + 40_000)).toBeUndefined();
    expect(takeProbe(probing, 'y', T0 + 20_000, T0 + 40_000)?.probe?.holder).toBe('y');
  });

  it('doubles the interval after each failed probe, up to the longest base × 2^k within the max, on the grid', () => {
    let state = open;
    const intervals: number[] = [];
    for (let probe = 0; probe < 7; probe++) {
      const at = state.nextProbeAt as number;
      state = takeProbe(state, `p${probe}`, at, at + 1_000) as HealthState;
      state = recordFailure(state, fail(`p${probe}`, at + 200), SETTINGS);
      intervals.push(state.probeIntervalMs as number);
      expect((state.nextProbeAt as number) % (state.probeIntervalMs as number)).toBe(0);
    }

    expect(intervals).toEqual([10_000, 20_000, 40_000, 40_000, 40_000, 40_000, 40_000]);
    expect(state.since).toBe(open.since);
  });

  it('closes on the first answer, whether the probe’s or another call’s', () => {
    const probing = takeProbe(open, 'x', T0 + 5_000, T0 + 60_000) as HealthState;

    for (const state of [open, probing]) {
      const closed = recordAnswer(state, T0 + 6_000);
      expect(closed).toEqual({ ...closedHealth(T0 + 6_000), failures: [], slots: {} });
    }
  });

  it('holds events until the next probe; while one probes, until the probe after it should it fail', () => {
    expect(heldUntil(open, SETTINGS, T0 + 1_000)).toBe(T0 + 5_000);
    const probing = takeProbe(open, 'x', T0 + 5_000, T0 + 60_000) as HealthState;
    expect(heldUntil(probing, SETTINGS, T0 + 5_100)).toBe(T0 + 10_000);
    expect(recordFailure(probing, fail('x', T0 + 5_200), SETTINGS).nextProbeAt).toBe(T0 + 10_000);
    expect(heldUntil(closedHealth(T0), SETTINGS, T0)).toBeUndefined();
  });

  it('puts grid points strictly after the time given', () => {
    expect(gridAfter(T0, 5_000)).toBe(T0 + 5_000);
    expect(gridAfter(T0 + 1, 5_000)).toBe(T0 + 5_000);
  });
});

describe('pacing by Mautic’s call times', () => {
  const timed = (state: HealthState, msPerItem: number, at: number, items = 200) =>
    recordCallTime(state, { items, ms: msPerItem * items, at }, SETTINGS);

  it('halves the calls allowed in flight when the time per item rises well above its usual level, once per cooldown', () => {
    let state = closedHealth(T0);
    for (let i = 0; i < 20; i++) state = timed(state, 30, T0 + i * 1_000);
    expect(paced(state, SETTINGS)).toBe(false);

    state = timed(state, 300, T0 + 30_000);
    state = timed(state, 300, T0 + 31_000);
    expect(state.allowance).toBe(2);
    state = timed(state, 300, T0 + 35_000);
    expect(state.allowance).toBe(2);
    state = timed(state, 300, T0 + 41_000);
    expect(state.allowance).toBe(1);
    state = timed(state, 300, T0 + 52_000);
    expect(state.allowance).toBe(1);
    expect(paced(state, SETTINGS)).toBe(true);
  });

  it('allows one more call in flight per cooldown once the time per item is back near its usual level', () => {
    let state: HealthState = {
      ...closedHealth(T0),
      msPerItem: 30,
      usualMsPerItem: 30,
      allowance: 1,
      pacedAt: T0,
    };
    const allowances: Array<number | string> = [];
    for (let i = 1; i <= 5; i++) {
      state = timed(state, 30, T0 + i * 10_000);
      allowances.push(state.allowance ?? 'not paced');
    }

    expect(allowances).toEqual([2, 3, 'not paced', 'not paced', 'not paced']);
    expect(paced(state, SETTINGS)).toBe(false);
  });

  it('does not pace a fast Mautic whose time per item jitters (under 5 ms an item: a second for 200)', () => {
    let state = closedHealth(T0);
    for (let i = 0; i < 20; i++) state = timed(state, 0.2, T0 + i * 1_000);
    state = timed(state, 4, T0 + 30_000);

    expect(state.msPerItem).toBeGreaterThan(2 * (state.usualMsPerItem as number));
    expect(paced(state, SETTINGS)).toBe(false);
  });

  it('learns nothing from calls of a few items, whose own overhead hides the time per item', () => {
    const state = closedHealth(T0);
    expect(timed(state, 500, T0, 3)).toBe(state);
  });

  const turn = (holder: string, now: number, until = now + 10_000, waitUntil = now + 5_000) => ({
    holder,
    now,
    until,
    waitUntil,
  });

  it('hands out as many slots as calls allowed in flight, drops ended leases, and frees a slot on release', () => {
    const state: HealthState = { ...closedHealth(T0), allowance: 2 };
    const one = takeSlot(state, turn('a', T0), SETTINGS) as HealthState;
    const two = takeSlot(one, turn('b', T0, T0 + 5_000), SETTINGS) as HealthState;

    expect(two.slots).toEqual({ a: T0 + 10_000, b: T0 + 5_000 });
    expect(takeSlot(two, turn('c', T0 + 5_000, T0 + 9_000), SETTINGS)?.slots).toEqual({
      a: T0 + 10_000,
      c: T0 + 9_000,
    });
    expect(takeSlot(releaseSlot(two, 'a'), turn('c', T0 + 1_000), SETTINGS)?.slots).toHaveProperty(
      'c',
    );
  });

  it('serves the calls waiting for a slot first come, first served, forgetting one that gave up', () => {
    const held: HealthState = { ...closedHealth(T0), allowance: 1, slots: { a: T0 + 10_000 } };
    const queued = takeSlot(held, turn('b', T0), SETTINGS) as HealthState;
    expect(queued.queue).toEqual([{ holder: 'b', until: T0 + 5_000 }]);
    expect(takeSlot(queued, turn('b', T0 + 250), SETTINGS)).toBeUndefined();

    // a is done and at once wants the slot again: b waited first.
    const released = releaseSlot(queued, 'a');
    const again = takeSlot(released, turn('a', T0 + 300), SETTINGS) as HealthState;
    expect(again.slots).toEqual({});
    expect(takeSlot(again, turn('b', T0 + 400), SETTINGS)).toMatchObject({
      slots: { b: T0 + 10_400 },
      queue: [{ holder: 'a' }],
    });
    // b gave up (its wait ended) before its turn: the next one in the queue is served.
    expect(takeSlot(again, turn('a', T0 + 5_000), SETTINGS)?.slots).toHaveProperty('a');
  });
});

describe('settings', () => {
  it('probes from 5 s to a minute, never longer apart than the first retry delay unless set', () => {
    const base = { maxConcurrency: 2, deliveryConcurrency: 2 };

    expect(circuitSettings({ ...base, retryBaseSeconds: 300 })).toEqual({
      probeBaseMs: 5_000,
      probeMaxMs: 60_000,
      ceiling: 4,
    });
    expect(circuitSettings({ ...base, retryBaseSeconds: 1 })).toMatchObject({
      probeBaseMs: 1_000,
      probeMaxMs: 1_000,
    });
    expect(
      circuitSettings({ ...base, retryBaseSeconds: 1, probeBaseSeconds: 2, probeMaxSeconds: 1 }),
    ).toMatchObject({ probeBaseMs: 2_000, probeMaxMs: 2_000 });
  });
});
