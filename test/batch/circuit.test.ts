/**
 * The batch handler with Mautic's shared health, called directly with a full hand from the event
 * source: while the circuit is open it holds the whole batch until the next probe, reports
 * `MauticCircuitOpen` and does not go on to another batch; when the probe is due and Mautic
 * answers it, one item probes, the rest go in one call and it goes on.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createBatchHandler } from '../../functions/batch/handler.ts';
import { closedHealth } from '../../functions/core/delivery/circuit.ts';
import { DEFAULT_DELIVERY_OPTIONS } from '../../functions/core/delivery/delivery-calls.ts';
import { MauticHealth } from '../../functions/core/delivery/mautic-health.ts';
import { MauticItemTime } from '../../functions/core/delivery/mautic-item-time.ts';
import { MauticApiClient } from '../../functions/core/mautic/mautic-api.ts';
import type { QueuedMessage } from '../../functions/core/queue-ports.ts';
import { lambdaContext } from '../../infra/local/lambda-context.ts';
import { type MauticSimulator, startMauticSimulator } from '../../mautic-simulator/server.ts';
import { InMemoryActionLedger } from '../support/action-ledger.ts';
import { InMemoryHealthStore } from '../support/health-store.ts';
import { recorder } from '../support/observe.ts';

let sim: MauticSimulator;
beforeEach(async () => {
  sim = await startMauticSimulator();
});
afterEach(async () => {
  await sim.close();
});

function records(count: number, from = 0): QueuedMessage[] {
  return Array.from({ length: count }, (_, i) => ({
    messageId: `m${from + i}`,
    receiptHandle: `rh${from + i}`,
    body: JSON.stringify({
      v: 1,
      eventId: `e${from + i}`,
      receivedAt: new Date().toISOString(),
      sender: 't',
      entity: 'contacts',
      action: 'create',
      data: { email: `held${from + i}@example.com` },
    }),
    attributes: {
      ApproximateReceiveCount: '1',
      ApproximateFirstReceiveTimestamp: String(Date.now()),
    },
    messageAttributes: {},
  }));
}

/** The handler with fake queues (each receive hands a next full batch), on a shared store. */
async function handlerWith(nextProbeInMs: number) {
  const store = new InMemoryHealthStore();
  const now = Date.now();
  await store.write(
    {
      ...closedHealth(now - 60_000),
      circuit: 'open',
      probeIntervalMs: 20_000,
      nextProbeAt: now + nextProbeInMs,
      lastFailure: { status: 503, message: 'POST /api/contacts/batch/new failed with status 503' },
    },
    0,
  );
  const observed = recorder();
  // Mautic's pace is known (10 ms an item): a next batch would fit in the invocation's time.
  const itemTime = new MauticItemTime();
  itemTime.observe(200, 2_000);
  const delays: Array<[string, number]> = [];
  let receives = 0;
  const clock = { now: () => Date.now() };
  const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
  const handler = createBatchHandler({
    api: new MauticApiClient({ baseUrl: sim.url, fetch }),
    tokens: { accessToken: async () => sim.issueToken().accessToken },
    retry: { baseSeconds: 30, maxDelaySeconds: 900, horizonSeconds: 86_400, maxReceiveCount: 418 },
    queues: {
      deadLetter: async () => [],
      delay: async (entries) => {
        for (const { message, seconds } of entries) delays.push([message.messageId, seconds]);
        return [];
      },
      // A backlog: every receive hands a next full batch, twice, then nothing.
      receive: async () => (++receives <= 2 ? records(10, receives * 100) : []),
      remove: async () => [],
    },
    logger: observed.logger,
    metrics: observed.metrics,
    clock,
    sleep,
    random: () => 0,
    learnedLimit: { value: undefined },
    ledger: new InMemoryActionLedger(),
    itemTime,
    health: new MauticHealth({
      store,
      clock,
      sleep,
      logger: observed.logger,
      settings: { probeBaseMs: 5_000, probeMaxMs: 30_000, ceiling: 4 },
    }),
    options: {
      ...DEFAULT_DELIVERY_OPTIONS,
      batchSize: 10,
      maxDelaySeconds: 3600,
      batchWindowMs: 0,
    },
  });
  const invoke = () => handler({ Records: records(10) as never }, lambdaContext('batch', 60_000));
  return { invoke, store, observed, delays, receives: () => receives };
}

const creates = () => sim.requests.filter((r) => r.path === '/api/contacts/batch/new');

describe('the batch handler and Mautic’s circuit', () => {
  it('holds the whole batch until the next probe while the circuit is open, and goes on to no other batch', async () => {
    const relay = await handlerWith(45_000);

    const answer = await relay.invoke();

    expect(creates()).toHaveLength(0);
    expect(answer.batchItemFailures).toHaveLength(10);
    // All ten hidden until the probe, 45 s on (whole seconds), together.
    expect(new Set(relay.delays.map(([, seconds]) => seconds))).toEqual(new Set([45]));
    expect(relay.receives()).toBe(0);
    expect(relay.observed.metric('MauticCircuitOpen')).toBe(1);
    expect(relay.observed.events('events_retried')[0]?.fields.reasons).toEqual({
      mautic_unavailable: 10,
    });
  });

  it('probes with one item when the probe is due, then sends the rest whole, and goes on with the backlog', async () => {
    const relay = await handlerWith(-1);

    const answer = await relay.invoke();

    expect(answer.batchItemFailures).toEqual([]);
    expect(creates().map((call) => call.items)).toEqual([1, 9, 10, 10]);
    expect(relay.receives()).toBe(3);
    expect(relay.store.state?.circuit).toBe('closed');
    expect(relay.observed.metric('MauticCircuitOpen')).toBe(0);
  });
});
