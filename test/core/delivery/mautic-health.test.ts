/**
 * Mautic's shared health as containers see it (`MauticHealth` over one store): what one
 * container's failures do to another's calls, one probe at a time, a prober that dies, a store
 * that is down, the calls in flight while paced, and how often it writes.
 */
import { describe, expect, it } from 'vitest';
import type { CircuitSettings } from '../../../functions/core/delivery/circuit.ts';
import { type CallTimes, MauticHealth } from '../../../functions/core/delivery/mautic-health.ts';
import { MauticTransientError } from '../../../functions/core/errors.ts';
import { InMemoryHealthStore } from '../../support/health-store.ts';
import { recorder } from '../../support/observe.ts';

const T0 = Date.parse('2026-12-01T10:00:00Z');
const SETTINGS: CircuitSettings = { probeBaseMs: 5_000, probeMaxMs: 60_000, ceiling: 2 };
const down = () =>
  new MauticTransientError({ method: 'POST', path: '/api/x', kind: 'server', status: 503 });

/** Containers on one store and one fake clock; `sleep` moves the clock. */
function fleet(count: number, store = new InMemoryHealthStore()) {
  const clock = { at: T0, now: () => clock.at };
  const observed = recorder();
  const containers = Array.from(
    { length: count },
    () =>
      new MauticHealth({
        store,
        clock,
        sleep: async (ms) => {
          clock.at += ms;
        },
        logger: observed.logger,
        settings: SETTINGS,
      }),
  );
  return { containers, store, clock, observed };
}

/** A call's admission with the invocation's usual bounds: waits up to 15 s, lease for a minute. */
const admit = (health: MauticHealth, now: number) =>
  health.admit({ waitUntil: now + 15_000, leaseUntil: now + 60_000 });

/** Three distinct failing calls from `health`: the circuit opens. */
async function openCircuit(health: MauticHealth) {
  for (const call of ['a', 'b', 'c']) {
    const admitted = await admit(health, T0);
    if (admitted.kind !== 'go') throw new Error('not admitted');
    await health.failed(admitted.ticket, call, down());
  }
}

describe('MauticHealth across containers', () => {
  it('holds every container’s calls once one container’s calls opened the circuit, until the next probe', async () => {
    const { containers, clock } = fleet(2);
    const [a, b] = containers as [MauticHealth, MauticHealth];
    await openCircuit(a);

    await b.refresh();
    const admitted = await b.admit({
      waitUntil: clock.at + 1_000,
      leaseUntil: clock.at + 60_000,
    });

    expect(admitted).toEqual({
      kind: 'hold',
      outcome: expect.objectContaining({
        kind: 'retry',
        reason: 'mautic_unavailable',
        notBefore: T0 + 5_000,
        grid: 40_000,
        status: 503,
      }),
    });
  });

  it('lets one container probe while the other waits for its answer, then both call', async () => {
    const { containers, clock } = fleet(2);
    const [a, b] = containers as [MauticHealth, MauticHealth];
    await openCircuit(a);
    await b.refresh();
    clock.at = T0 + 5_000;

    const probe = await admit(a, clock.at);
    expect(probe).toEqual({ kind: 'go', ticket: { probe: true } });
    // b waits (polling the store) while a's probe is in flight; the probe answers meanwhile.
    const waiting = admit(b, clock.at);
    await a.answered((probe as { ticket: { probe: boolean } }).ticket, { items: 1, ms: 40 });

    expect(await waiting).toEqual({ kind: 'go', ticket: { probe: false } });
    expect(a.closed()).toBe(true);
  });

  it('reopens with the interval doubled when the probe fails, and holds the waiting container until then', async () => {
    const { containers, clock } = fleet(2);
    const [a, b] = containers as [MauticHealth, MauticHealth];
    await openCircuit(a);
    await b.refresh();
    clock.at = T0 + 5_000;

    const probe = await admit(a, clock.at);
    if (probe.kind !== 'go') throw new Error('no probe');
    await a.failed(probe.ticket, 'p', down());
    await b.refresh();

    const held = await b.admit({
      waitUntil: clock.at + 1_000,
      leaseUntil: clock.at + 60_000,
    });
    // Back at the next probe; held longer (receives running short), on the coarsest probe grid.
    expect(held).toMatchObject({ kind: 'hold', outcome: { notBefore: T0 + 10_000, grid: 40_000 } });
  });

  it('lets another container probe once a prober that died has let its lease run out', async () => {
    const { containers, clock } = fleet(2);
    const [a, b] = containers as [MauticHealth, MauticHealth];
    await openCircuit(a);
    clock.at = T0 + 5_000;
    // a takes the probe with a lease of 20 s, then dies: no answer ever comes.
    expect(await a.admit({ waitUntil: clock.at, leaseUntil: clock.at + 20_000 })).toMatchObject({
      kind: 'go',
      ticket: { probe: true },
    });

    await b.refresh();
    const before = await b.admit({
      waitUntil: clock.at + 1_000,
      leaseUntil: clock.at + 60_000,
    });
    expect(before.kind).toBe('hold');

    clock.at = T0 + 25_000;
    expect(await admit(b, clock.at)).toEqual({ kind: 'go', ticket: { probe: true } });
  });

  it('waits in the invocation for a probe due within its wait, and probes then', async () => {
    const { containers, clock } = fleet(1);
    const [a] = containers as [MauticHealth];
    await openCircuit(a);

    expect(await admit(a, clock.at)).toEqual({ kind: 'go', ticket: { probe: true } });
    expect(clock.at).toBe(T0 + 5_000);
  });
});

describe('MauticHealth and its store', () => {
  it('goes on alone when the store is down: calls go, its own failures still open its own circuit, logged once', async () => {
    const { containers, store, observed } = fleet(1);
    const [a] = containers as [MauticHealth];
    store.down = true;

    await a.refresh();
    expect(await admit(a, T0)).toEqual({ kind: 'go', ticket: { probe: false } });
    await openCircuit(a);

    expect(a.closed()).toBe(false);
    expect(observed.events('health_store_failed')).toHaveLength(1);
  });

  it('writes an answered call only when it changes the circuit, or at most every 10 s with its call time', async () => {
    const { containers, store, clock } = fleet(1);
    const [a] = containers as [MauticHealth];
    for (let call = 0; call < 30; call++) {
      clock.at = T0 + call * 1_000;
      const admitted = await admit(a, clock.at);
      if (admitted.kind !== 'go') throw new Error('not admitted');
      await a.answered(admitted.ticket, { items: 200, ms: 4_000 });
    }

    expect(store.writes).toBe(3);
    expect(store.state?.msPerItem).toBe(20);
    // What sizing a call and its timeout read: Mautic's recent time per item.
    const times: CallTimes = a;
    expect(times.recentMsPerItem()).toBe(20);
  });
});

describe('MauticHealth while paced', () => {
  async function pacedFleet() {
    const setup = fleet(2);
    const [a] = setup.containers as [MauticHealth, MauticHealth];
    // Mautic's usual pace, then ten times slower: the allowance halves from 2 to 1.
    for (const [msPerItem, at] of [
      [20, 0],
      [200, 11_000],
    ] as const) {
      setup.clock.at = T0 + at;
      const admitted = await admit(a, setup.clock.at);
      if (admitted.kind !== 'go') throw new Error('not admitted');
      await a.answered(admitted.ticket, { items: 200, ms: msPerItem * 200 });
    }
    return setup;
  }

  it('lets one call in flight across containers when one is allowed; the other waits for its slot', async () => {
    const { containers, clock, store } = await pacedFleet();
    const [a, b] = containers as [MauticHealth, MauticHealth];
    expect(store.state?.allowance).toBe(1);
    await b.refresh();

    const first = await admit(a, clock.at);
    expect(first).toMatchObject({ kind: 'go', ticket: { slot: expect.any(String) } });
    const second = b.admit({
      waitUntil: clock.at + 5_000,
      leaseUntil: clock.at + 60_000,
    });
    if (first.kind === 'go') await a.answered(first.ticket, { items: 200, ms: 40_000 });

    expect(await second).toMatchObject({ kind: 'go', ticket: { slot: expect.any(String) } });
  });

  it('serves calls in turn: one that just released its slot waits behind a call already waiting', async () => {
    const { store, clock, observed } = await pacedFleet();
    // Two containers whose waits end only when the test says so.
    const asleep: Array<() => void> = [];
    const container = () =>
      new MauticHealth({
        store,
        clock,
        sleep: (ms) =>
          new Promise<void>((resolve) => {
            asleep.push(() => {
              clock.at += ms;
              resolve();
            });
          }),
        logger: observed.logger,
        settings: SETTINGS,
      });
    const [c, d] = [container(), container()];
    await c.refresh();
    await d.refresh();
    const settle = () => new Promise((resolve) => setTimeout(resolve, 10));
    const turn = { waitUntil: clock.at + 10_000, leaseUntil: clock.at + 60_000 };

    const first = await c.admit(turn);
    const waiting = d.admit(turn);
    await settle();
    expect(asleep).toHaveLength(1);
    if (first.kind === 'go') await c.answered(first.ticket, { items: 200, ms: 40_000 });
    // c goes on at once with its next call: it queues behind d.
    let next: string | undefined;
    void c.admit(turn).then((admitted) => {
      next = admitted.kind;
    });
    await settle();
    expect(next).toBeUndefined();

    asleep.shift()?.();
    expect(await waiting).toMatchObject({ kind: 'go', ticket: { slot: expect.any(String) } });
  });

  it('sends the items back to the queue when no slot frees within the wait', async () => {
    const { containers, clock } = await pacedFleet();
    const [a, b] = containers as [MauticHealth, MauticHealth];
    await b.refresh();
    await admit(a, clock.at);

    const held = await b.admit({
      waitUntil: clock.at + 1_000,
      leaseUntil: clock.at + 60_000,
    });
    // Not on the backoff: Mautic answers, it is only slow; back at the next point of the grid.
    expect(held).toMatchObject({
      kind: 'hold',
      outcome: { kind: 'retry', reason: 'mautic_slow', grid: 5_000, notBefore: expect.any(Number) },
    });
  });
});
