/**
 * "Mautic's health sets the pace" (contract §2) through `npm start`, with settings compressed to
 * seconds (probes every 1 s, then 2, then 4, where the shipped ones are 5, 10, 20 s; bench/outage.ts
 * runs the shipped settings): during an outage the relay probes Mautic with one small call at a
 * time instead of calling it with every batch; once Mautic answers, the backlog goes out in a few
 * full calls at once; nothing is lost, nothing doubled, and each record keeps its order. Events
 * also survive an outage longer than their receives would last at one return per probe.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { receivesForHorizon } from '../../functions/core/retry-policy.ts';
import type { MauticSimulator } from '../../mautic-simulator/server.ts';
import {
  contacts,
  deadLettered,
  itemsCreated,
  operatorCommand,
  post,
  startRelay,
  stopRunning,
} from '../support/relay-process.ts';
import { until } from '../support/until.ts';

afterEach(stopRunning);

const OUTAGE = { seed: 11, errorRate: 1, errorStatus: 503 as const };
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const apiCalls = (sim: MauticSimulator, from: number, to = Number.POSITIVE_INFINITY) =>
  sim.requests.filter((r) => r.path.startsWith('/api/') && r.at >= from && r.at < to);

/** Posts `events` (at most 500) and expects them all accepted. */
async function send(url: string, events: unknown[]) {
  const answer = await post(url, JSON.stringify(events));
  expect(answer.status).toBe(202);
}

async function mauticStatus(dir: string) {
  const { code, out } = await operatorCommand(['status', '--local', '--json'], {
    MAUTIC_RELAY_DIR: dir,
  });
  expect(code).toBe(0);
  return (JSON.parse(out) as { mautic: Record<string, unknown> }).mautic;
}

describe('a Mautic outage through npm start', () => {
  it('probes a failing Mautic a few times a minute, then delivers the backlog in a few full calls at once, each event once and in order', async () => {
    const { sim, url, output, dir } = await startRelay(
      {},
      { CIRCUIT_PROBE_BASE_SECONDS: '1', CIRCUIT_PROBE_MAX_SECONDS: '4' },
    );
    const companies = [0, 1, 2].map((i) => sim.seed('companies', { companyname: `Co${i}` }));
    await send(url, contacts(100, 'before'));
    await until(
      () => sim.records('contacts').length === 100,
      30_000,
      () => 'first 100',
    );

    // 30 s of traffic into a Mautic that answers every call 503, and 5 s more of outage: each
    // second 22 new contacts, and a rename of each of three companies (its order per record).
    const outageAt = Date.now();
    sim.setFaults(OUTAGE);
    for (let second = 0; second < 30; second++) {
      const renames = companies.map((company) => ({
        entity: 'companies',
        action: 'edit',
        id: company.id,
        data: { companyname: `Co${company.id} v${second}` },
      }));
      await send(url, [...contacts(22, `during${second}-`), ...renames]);
      await sleep(Math.max(0, outageAt + (second + 1) * 1_000 - Date.now()));
    }
    await sleep(Math.max(0, outageAt + 35_000 - Date.now()));
    const during = await mauticStatus(dir);
    const recoveredAt = Date.now();
    sim.setFaults(undefined);

    await until(
      () => sim.records('contacts').length === 760,
      60_000,
      () => `${sim.records('contacts').length} of 760 contacts delivered`,
    );
    const deliveredAt = Date.now();
    await until(
      () =>
        companies.every(
          (c) =>
            sim.records('companies').find((r) => r.id === c.id)?.companyname === `Co${c.id} v29`,
        ),
      30_000,
      () => 'the companies did not end in their last name',
    );

    // The outage: the calls that opened the circuit, then one probe every 4 s at most.
    const calls = apiCalls(sim, outageAt, recoveredAt);
    expect(calls.length).toBeLessThanOrEqual(24);
    for (let window = outageAt + 10_000; window + 10_000 <= recoveredAt; window += 5_000) {
      const inWindow = calls.filter((c) => c.at >= window && c.at < window + 10_000);
      expect(inWindow.length, `calls from ${window - outageAt} ms`).toBeLessThanOrEqual(4);
      // A probe is one item.
      expect(inWindow.every((c) => (c.items ?? 1) === 1)).toBe(true);
    }
    expect(during).toMatchObject({ circuit: expect.stringMatching(/^(open|half_open)$/) });
    expect(String(during.lastFailure)).toContain('503');
    expect(output.some((line) => line.startsWith('Mautic circuit open'))).toBe(true);

    // The recovery: the next probe (4 s at most), then the backlog of 660 contacts in full calls.
    expect(deliveredAt - recoveredAt).toBeLessThanOrEqual(20_000);
    const creates = apiCalls(sim, recoveredAt).filter((c) => c.path === '/api/contacts/batch/new');
    expect(creates.length).toBeLessThanOrEqual(8);
    expect(creates.reduce((sum, c) => sum + (c.items ?? 0), 0) / creates.length).toBeGreaterThan(
      80,
    );
    expect(output.some((line) => line === 'Mautic circuit closed: calls go')).toBe(true);
    expect(await mauticStatus(dir)).toMatchObject({ circuit: 'closed', lastFailure: null });

    // Nothing lost, nothing doubled: every contact created by exactly one applied item.
    expect(itemsCreated(sim, 'contacts')).toBe(760);
    expect(deadLettered(output).size).toBe(0);
  }, 240_000);

  it('keeps events through an outage longer than their receives would last at one return per probe, and delivers them after it', async () => {
    const retry = { baseSeconds: 1, maxDelaySeconds: 8, horizonSeconds: 50 };
    // As few receives as the retry settings allow: none to spare for the circuit's returns.
    const maxReceiveCount = receivesForHorizon(retry);
    const outageSeconds = 25;
    // Coming back at every probe (each second), the events would run out of receives.
    expect(outageSeconds).toBeGreaterThan(maxReceiveCount);
    const { sim, url, output } = await startRelay(
      { faults: OUTAGE },
      {
        RETRY_BASE_SECONDS: String(retry.baseSeconds),
        RETRY_MAX_DELAY_SECONDS: String(retry.maxDelaySeconds),
        RETRY_HORIZON_SECONDS: String(retry.horizonSeconds),
        MAX_RECEIVE_COUNT: String(maxReceiveCount),
        CIRCUIT_PROBE_BASE_SECONDS: '1',
        CIRCUIT_PROBE_MAX_SECONDS: '1',
      },
    );
    const startedAt = Date.now();
    await send(url, contacts(50, 'long'));

    await sleep(startedAt + outageSeconds * 1_000 - Date.now());
    expect(sim.records('contacts')).toHaveLength(0);
    expect(deadLettered(output).size).toBe(0);
    sim.setFaults(undefined);

    await until(
      () => sim.records('contacts').length === 50,
      30_000,
      () => `${sim.records('contacts').length} of 50 delivered after the outage`,
    );
    expect(Date.now() - startedAt).toBeLessThan(retry.horizonSeconds * 1_000);
    expect(deadLettered(output).size).toBe(0);
    expect(itemsCreated(sim, 'contacts')).toBe(50);
  }, 120_000);
});
