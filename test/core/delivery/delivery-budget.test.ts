/**
 * Deadlines foreseen, not hit (contract §2): the delivery sizes and times each Mautic call by
 * Mautic's observed time per item and the time the invocation has left, through the real client
 * against the simulator.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type Chunk, planBatches } from '../../../functions/core/delivery/batch-plan.ts';
import { deliverChunks } from '../../../functions/core/delivery/delivery.ts';
import {
  DEFAULT_DELIVERY_OPTIONS,
  type DeliveryDeps,
} from '../../../functions/core/delivery/delivery-calls.ts';
import { MauticItemTime } from '../../../functions/core/delivery/mautic-item-time.ts';
import type { QueuedEvent } from '../../../functions/core/events.ts';
import { MauticApiClient } from '../../../functions/core/mautic/mautic-api.ts';
import type { CallOptions } from '../../../functions/core/ports.ts';
import { type MauticSimulator, startMauticSimulator } from '../../../mautic-simulator/server.ts';
import { InMemoryActionLedger } from '../../support/action-ledger.ts';
import { incoming } from '../../support/events.ts';
import { recorder } from '../../support/observe.ts';

const MARGIN_MS = DEFAULT_DELIVERY_OPTIONS.deadlineMarginMs;
let sim: MauticSimulator;
let now: number;
let timeouts: Array<number | undefined>;

function plan(events: Array<Pick<QueuedEvent, 'entity' | 'action'> & Partial<QueuedEvent>>) {
  return planBatches(events.map(incoming), 200);
}

const creates = (count: number) =>
  Array.from({ length: count }, (_, i) => ({
    entity: 'contacts',
    action: 'create' as const,
    data: { email: `budget${i}@example.com` },
  }));

/** The delivery's edges, the client's calls recorded with the timeout each was given. */
function deps(itemTime: MauticItemTime, clock = { now: () => now }): DeliveryDeps {
  const api = new MauticApiClient({ baseUrl: sim.url, fetch });
  const create = api.create.bind(api);
  api.create = (
    entity: string,
    items: ReadonlyArray<Record<string, unknown>>,
    call: CallOptions,
  ) => {
    timeouts.push(call.timeoutMs);
    return create(entity, items, call);
  };
  const accessToken = sim.issueToken().accessToken;
  return {
    api,
    tokens: { accessToken: async () => accessToken },
    logger: recorder().logger,
    metrics: recorder().metrics,
    clock,
    sleep: async (ms) => {
      now += ms;
    },
    random: () => 0.5,
    learnedLimit: { value: undefined },
    ledger: new InMemoryActionLedger(),
    mauticVersion: { value: '5.1.1' },
    itemTime,
  };
}

/** Mautic's pace as if it had answered a 200-item call in `ms`. */
function observed(ms: number): MauticItemTime {
  const time = new MauticItemTime();
  time.observe(200, ms);
  return time;
}

const itemsSent = () =>
  sim.requests.filter((r) => r.path.endsWith('/batch/new')).map((r) => r.items);

beforeEach(async () => {
  now = Date.parse('2026-11-21T00:00:00Z');
  timeouts = [];
  sim = await startMauticSimulator();
});

afterEach(async () => {
  await sim.close();
});

describe('a call sized and timed by Mautic pace', () => {
  it('sends only what ends in time at the observed pace; the rest goes back unsent, at once', async () => {
    // 25 ms an item, calls may end 3.75 s from now: 100 items at 1.5 times their expected time.
    const chunks: Chunk[] = plan(creates(200));

    const outcomes = await deliverChunks(chunks, now + MARGIN_MS + 3_750, deps(observed(5_000)));

    expect(itemsSent()).toEqual([100]);
    const values = [...outcomes.values()];
    expect(values.filter((o) => o.kind === 'delivered')).toHaveLength(100);
    expect(values.filter((o) => o.kind === 'retry')).toEqual(
      Array.from({ length: 100 }, () => ({
        kind: 'retry',
        reason: 'no_time_left',
        notBefore: now,
      })),
    );
    expect(sim.records('contacts')).toHaveLength(100);
  });

  it('starts no call at all when not one item would end in time', async () => {
    const outcomes = await deliverChunks(
      plan(creates(10)),
      now + MARGIN_MS + 30,
      deps(observed(5_000)),
    );

    expect(itemsSent()).toEqual([]);
    expect(new Set([...outcomes.values()].map((o) => o.kind === 'retry' && o.reason))).toEqual(
      new Set(['no_time_left']),
    );
  });

  it('sends the whole batch while nothing was observed, with a 30 s timeout', async () => {
    await deliverChunks(plan(creates(200)), now + MARGIN_MS + 1_000, deps(new MauticItemTime()));

    expect(itemsSent()).toEqual([200]);
    expect(timeouts).toEqual([30_000]);
  });

  it('times each call at four times its expected time, at least 10 s, at most MAUTIC_TIMEOUT_MS', async () => {
    // Each from a pace of 25 ms an item (the fixed clock would teach 0 ms otherwise).
    await deliverChunks(plan(creates(200)), now + 60_000, deps(observed(5_000)));
    await deliverChunks(plan(creates(20)), now + 60_000, deps(observed(5_000)));
    await deliverChunks(plan(creates(200)), now + 60_000, deps(observed(5_000)), {
      ...DEFAULT_DELIVERY_OPTIONS,
      callTimeoutCapMs: 15_000,
    });

    expect(timeouts).toEqual([20_000, 10_000, 15_000]);
  });

  it("learns Mautic's time per item from the calls it answers", async () => {
    await sim.close();
    sim = await startMauticSimulator({
      faults: { seed: 1, latencyMs: { min: 0, max: 0, perItem: 5 } },
    });
    const itemTime = new MauticItemTime();

    await deliverChunks(plan(creates(100)), Date.now() + 60_000, deps(itemTime, Date));

    expect(itemTime.msPerItem).toBeGreaterThanOrEqual(5);
  });

  it('sends again only the items it may repeat, not those it set aside as possibly applied', async () => {
    // A company without a name cannot be told apart from its copy if Mautic applied it.
    sim.inject({ path: '/api/companies/batch/new' }, { status: 500, body: 'Internal error' });
    const chunks = plan([
      { entity: 'companies', action: 'create', data: { city: 'Nowhere' } },
      { entity: 'companies', action: 'create', data: { companyname: 'Acme' } },
    ]);

    const outcomes = await deliverChunks(chunks, now + 60_000, deps(new MauticItemTime()));

    expect(itemsSent()).toEqual([2, 1]);
    expect([...outcomes.values()]).toEqual([
      expect.objectContaining({ kind: 'rejected', reason: 'ambiguous_result' }),
      expect.objectContaining({ kind: 'delivered', status: 201 }),
    ]);
    expect(sim.records('companies').map((c) => c.companyname)).toEqual(['Acme']);
  });
});
