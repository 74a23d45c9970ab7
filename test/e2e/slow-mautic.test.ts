/**
 * "When Mautic slows down, the relay sends fewer calls at once" (contract §2) through `npm start`:
 * Mautic answering in 40 ms, then in 2 s (fifty times its usual time per item), then in 0.5 s.
 * Two invocations keep two calls in flight at Mautic's usual pace; once its time per item has
 * stayed well above its usual level, one call at a time across them; once it is back near it,
 * two again. The simulator answers each call its fixed latency after it arrived, so the calls in
 * flight at any moment are read from its request log.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { MauticSimulator } from '../../mautic-simulator/server.ts';
import {
  contacts,
  deadLettered,
  itemsCreated,
  post,
  startRelay,
  stopRunning,
} from '../support/relay-process.ts';
import { until } from '../support/until.ts';

afterEach(stopRunning);

const latency = (ms: number) => ({ seed: 4, latencyMs: { min: ms, max: ms } });

async function send(url: string, count: number, prefix: string) {
  for (let start = 0; start < count; start += 500) {
    const answer = await post(url, JSON.stringify(contacts(500, `${prefix}${start}-`)));
    expect(answer.status).toBe(202);
  }
}

/** The most create calls in flight at once among those that arrived in [from, to). */
function mostInFlight(sim: MauticSimulator, latencyMs: number, from: number, to: number) {
  const calls = sim.requests.filter(
    (r) => r.path === '/api/contacts/batch/new' && r.at >= from && r.at < to,
  );
  return Math.max(
    0,
    ...calls.map(
      (call) => calls.filter((o) => o.at <= call.at && call.at < o.at + latencyMs).length,
    ),
  );
}

describe('a slow Mautic through npm start', () => {
  it('keeps fewer calls in flight while Mautic is much slower than usual, and more again once it recovers', async () => {
    const { sim, url, output } = await startRelay({ faults: latency(40) }, { BATCH_SIZE: '200' });
    const delivered = (count: number) => () => sim.records('contacts').length >= count;

    await send(url, 2_000, 'usual');
    await until(delivered(2_000), 60_000, () => 'the usual pace');

    const slowAt = Date.now();
    sim.setFaults(latency(2_000));
    // Slow events are sent while the pace comes down, never fewer than BACKLOG waiting, so that
    // calls keep going until one call at a time; what waits then goes out paced: six calls or
    // more, 12 s or more, where a fixed 8,000 left about 40 s of paced calls.
    const BACKLOG = 1_200;
    let slowSent = 0;
    const pacedToOne = () =>
      output.some((line) => line.startsWith('Mautic paced: 1 calls in flight'));
    await until(
      async () => {
        if (pacedToOne()) return true;
        if (slowSent - (sim.records('contacts').length - 2_000) < BACKLOG) {
          await send(url, 500, `slow${slowSent}-`);
          slowSent += 500;
        }
        return false;
      },
      60_000,
      () =>
        `never paced to one call: ${output.filter((l) => l.startsWith('Mautic paced')).join('; ')}`,
    );
    const pacedAt = Date.now();
    const slowTotal = 2_000 + slowSent;
    await until(delivered(slowTotal), 120_000, () => `${sim.records('contacts').length} delivered`);

    const recoveredAt = Date.now();
    sim.setFaults(latency(500));
    await send(url, 4_000, 'recovered');
    await until(
      delivered(slowTotal + 4_000),
      120_000,
      () => `${sim.records('contacts').length} delivered`,
    );
    // Mautic applies a call when it arrives and answers it its latency later: every call answered.
    await until(
      () => sim.requests.every((r) => r.status !== 0),
      10_000,
      () => 'a call is left unanswered',
    );

    // Before the pacing, two calls at once (one per invocation); paced, one.
    expect(mostInFlight(sim, 2_000, slowAt, slowAt + 8_000)).toBe(2);
    expect(mostInFlight(sim, 2_000, pacedAt + 2_000, recoveredAt)).toBe(1);
    // Recovered: the allowance grows back one call per 10 s, and two go at once again.
    const after = output.slice(output.findIndex((line) => line.startsWith('Mautic paced: 1 ')));
    expect(after.some((line) => line.startsWith('Mautic paced: 2 calls in flight'))).toBe(true);
    expect(mostInFlight(sim, 500, recoveredAt, Date.now())).toBe(2);

    expect(deadLettered(output).size).toBe(0);
    expect(itemsCreated(sim, 'contacts')).toBe(slowTotal + 4_000);
  }, 400_000);
});
