/**
 * The delivery with Mautic's shared health, against the simulator over real HTTP (contract §2,
 * "Mautic's health sets the pace"): an outage opens the circuit within a few calls and stops the
 * narrowing; while open one item probes; an answered probe lets the rest go in one call; a poison
 * item is still narrowed down, and never opens the circuit.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { planBatches } from '../../../functions/core/delivery/batch-plan.ts';
import { closedHealth } from '../../../functions/core/delivery/circuit.ts';
import { deliverChunks } from '../../../functions/core/delivery/delivery.ts';
import {
  DEFAULT_DELIVERY_OPTIONS,
  type DeliveryDeps,
} from '../../../functions/core/delivery/delivery-calls.ts';
import type { MessageOutcome } from '../../../functions/core/delivery/failure-policy.ts';
import { MauticHealth } from '../../../functions/core/delivery/mautic-health.ts';
import type { QueuedEvent } from '../../../functions/core/events.ts';
import { MauticApiClient } from '../../../functions/core/mautic/mautic-api.ts';
import { type MauticSimulator, startMauticSimulator } from '../../../mautic-simulator/server.ts';
import { InMemoryActionLedger } from '../../support/action-ledger.ts';
import { incoming } from '../../support/events.ts';
import { InMemoryHealthStore } from '../../support/health-store.ts';
import { recorder } from '../../support/observe.ts';

/** A whole minute: on every point of the probe grid. */
const START = Date.parse('2026-12-01T10:00:00Z');
const SETTINGS = { probeBaseMs: 5_000, probeMaxMs: 60_000, ceiling: 4 };
let now = START;
let sim: MauticSimulator;
let store: InMemoryHealthStore;
let deps: DeliveryDeps;
const observed = recorder();

type Event = Pick<QueuedEvent, 'entity' | 'action'> & Partial<QueuedEvent>;

async function deliver(events: Event[], deadline = now + 60_000) {
  const chunks = planBatches(events.map(incoming), 200);
  const ids = chunks.flatMap((c) => c.items.flatMap((item) => item.messageIds));
  await deps.health?.refresh();
  const outcomes = await deliverChunks(chunks, deadline, deps, DEFAULT_DELIVERY_OPTIONS);
  return ids.map((id) => outcomes.get(id) as MessageOutcome);
}

const creates = (count: number): Event[] =>
  Array.from({ length: count }, (_, i) => ({
    entity: 'contacts',
    action: 'create',
    data: { email: `c${i}@example.com` },
  }));
const calls = (path = '/api/contacts/batch/new') => sim.requests.filter((r) => r.path === path);

/** The circuit as another invocation left it: open since a minute, its probe due now. */
async function openedElsewhere() {
  const state = {
    ...closedHealth(START - 60_000),
    circuit: 'open' as const,
    nextProbeAt: START,
    probeIntervalMs: 10_000,
    lastFailure: { status: 503, message: 'POST /api/contacts/batch/new failed with status 503' },
  };
  await store.write(state, 0);
}

beforeEach(async () => {
  now = START;
  observed.clear();
  sim = await startMauticSimulator({ now: () => now });
  store = new InMemoryHealthStore();
  const token = sim.issueToken().accessToken;
  const clock = { now: () => now };
  const sleep = async (ms: number) => {
    now += ms;
  };
  deps = {
    api: new MauticApiClient({ baseUrl: sim.url, fetch, now: () => now }),
    tokens: { accessToken: async () => token },
    logger: observed.logger,
    metrics: observed.metrics,
    clock,
    sleep,
    random: () => 0.5,
    learnedLimit: { value: undefined },
    ledger: new InMemoryActionLedger(),
    health: new MauticHealth({ store, clock, sleep, logger: observed.logger, settings: SETTINGS }),
  };
});

afterEach(async () => {
  await sim.close();
});

describe('an outage', () => {
  it('opens the circuit after four calls and holds every item for the next probe, narrowing no further', async () => {
    sim.setFaults({ seed: 1, errorRate: 1 });

    const outcomes = await deliver(creates(200));

    // Two tries of the call, then its two halves: three distinct calls failing.
    expect(calls().map((call) => call.items)).toEqual([200, 200, 100, 100]);
    expect(store.state).toMatchObject({ circuit: 'open', probeIntervalMs: 5_000 });
    const nextProbeAt = store.state?.nextProbeAt as number;
    expect(nextProbeAt % 5_000).toBe(0);
    expect(new Set(outcomes.map((o) => o.kind))).toEqual(new Set(['retry']));
    const held = outcomes.filter((o) => o.kind === 'retry' && o.reason === 'mautic_unavailable');
    // The second half's quarters were never tried: held until the probe.
    expect(held.length).toBeGreaterThanOrEqual(100);
    for (const outcome of held)
      expect(outcome).toMatchObject({ notBefore: nextProbeAt, grid: 40_000 });
    expect(observed.events('mautic_circuit')).toEqual([
      expect.objectContaining({ fields: expect.objectContaining({ circuit: 'open' }) }),
    ]);
  });

  it('probes with one item when the probe is due, and holds the rest when it fails, the interval doubled', async () => {
    await openedElsewhere();
    sim.setFaults({ seed: 2, errorRate: 1 });

    const outcomes = await deliver(creates(200));

    // The probe failed; the next one (20 s on) is beyond the 15 s an invocation waits.
    expect(calls().map((call) => call.items)).toEqual([1]);
    expect(store.state).toMatchObject({
      circuit: 'open',
      probeIntervalMs: 20_000,
      nextProbeAt: START + 20_000,
    });
    // The probe's item too: all 200 come back together, at the next probe.
    for (const outcome of outcomes) {
      expect(outcome).toMatchObject({ reason: 'mautic_unavailable', notBefore: START + 20_000 });
    }
  });
  it('holds a failed probe that has no time left to try again for the next probe, not for its backoff', async () => {
    await openedElsewhere();
    const company = sim.seed('companies', { companyname: 'Co' });
    sim.setFaults({ seed: 3, errorRate: 1, errorStatus: 503 });

    // Calls stop 50 ms from now: no time for the call again after the probe's failure.
    const deadline = now + DEFAULT_DELIVERY_OPTIONS.deadlineMarginMs + 50;
    const outcomes = await deliver(
      [
        {
          entity: 'companies',
          action: 'edit',
          id: company.id as number,
          data: { companyname: 'Co v1' },
        },
      ],
      deadline,
    );

    expect(calls('/api/companies/batch/edit').map((call) => call.items)).toEqual([1]);
    // Back with the events held, at the next probe (20 s on), not after a backoff of its receives.
    expect(outcomes).toEqual([
      expect.objectContaining({ kind: 'retry', notBefore: START + 20_000, grid: 40_000 }),
    ]);
  });
});

describe('a call of several items', () => {
  it('never is the probe: once its own failure opened the circuit, it waits for the probe and sends one item alone', async () => {
    // Two other calls failed a moment ago: this call's failure is the third, which opens it.
    await store.write(
      {
        ...closedHealth(START - 60_000),
        failures: [
          { call: 'other-1', at: START - 2_000 },
          { call: 'other-2', at: START - 1_000 },
        ],
      },
      0,
    );
    const seeded = Array.from({ length: 50 }, (_, i) =>
      sim.seed('contacts', { email: `s${i}@example.com` }),
    );
    sim.setFaults({ seed: 4, errorRate: 1 });

    const outcomes = await deliver(
      seeded.map((contact) => ({
        entity: 'contacts',
        action: 'edit',
        id: contact.id as number,
        data: { city: 'Renamed' },
      })),
    );

    // The call, then (the circuit open, its probe 5 s on) the probe of one item, which fails.
    expect(calls('/api/contacts/batch/edit').map((call) => call.items)).toEqual([50, 1]);
    expect(store.state).toMatchObject({ circuit: 'open', probeIntervalMs: 10_000 });
    for (const outcome of outcomes) expect(outcome).toMatchObject({ kind: 'retry' });
  });
});

describe('recovery', () => {
  it('sends the rest in one full call once the one-item probe is answered, and closes the circuit', async () => {
    await openedElsewhere();

    const outcomes = await deliver(creates(200));

    expect(calls().map((call) => call.items)).toEqual([1, 199]);
    expect(outcomes.every((o) => o.kind === 'delivered')).toBe(true);
    expect(store.state?.circuit).toBe('closed');
    expect(sim.records('contacts')).toHaveLength(200);
  });

  it('waits in the invocation for a probe due within 15 s rather than sending the events back', async () => {
    await openedElsewhere();
    const state = (await store.read())?.state;
    await store.write({ ...state, circuit: 'open', nextProbeAt: START + 10_000 } as never, 1);

    const outcomes = await deliver(creates(50));

    expect(now).toBeGreaterThanOrEqual(START + 10_000);
    expect(calls().map((call) => call.items)).toEqual([1, 49]);
    expect(outcomes.every((o) => o.kind === 'delivered')).toBe(true);
  });
});

describe('one bad item is not an outage', () => {
  it('narrows a poison item down with the circuit closed throughout, delivering the others', async () => {
    const seeded = Array.from({ length: 200 }, (_, i) =>
      sim.seed('contacts', { email: `p${i}@example.com` }),
    );
    const poisoned = seeded[137]?.id as number;
    sim.poison({ path: '/api/contacts/batch/edit' }, 'id', poisoned);

    const outcomes = await deliver(
      seeded.map((contact) => ({
        entity: 'contacts',
        action: 'edit',
        id: contact.id as number,
        data: { city: 'Renamed' },
      })),
    );

    expect(outcomes.filter((o) => o.kind === 'delivered')).toHaveLength(199);
    expect(outcomes[137]).toMatchObject({ kind: 'retry', reason: 'mautic_server' });
    expect(store.state?.circuit ?? 'closed').toBe('closed');
    expect(observed.events('mautic_circuit')).toEqual([]);
  });
});
