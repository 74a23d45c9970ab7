import { afterEach, describe, expect, it } from 'vitest';
import type { MauticSimulator } from '../../mautic-simulator/server.ts';
import {
  contacts,
  deadLettered,
  deadLettersIn,
  itemsCreated,
  post,
  startRelay,
  stopRunning,
} from '../support/relay-process.ts';
import { until } from '../support/until.ts';

afterEach(stopRunning);

/** Compressed retry settings: seconds where the defaults are minutes and a day. */
const COMPRESSED = {
  RETRY_BASE_SECONDS: '1',
  RETRY_MAX_DELAY_SECONDS: '4',
  VISIBILITY_TIMEOUT_SECONDS: '5',
  BATCH_TIMEOUT_SECONDS: '5',
  BATCH_SIZE: '50',
};
const OUTAGE = { seed: 7, errorRate: 1 };

/** Posts `count` contact creates in requests of 50; answers each accepted event's id and email. */
async function sendContacts(url: string, count: number, prefix: string) {
  const events = contacts(count, prefix);
  const accepted = new Map<string, string>();
  for (let i = 0; i < events.length; i += 50) {
    const chunk = events.slice(i, i + 50);
    const answer = await post(url, JSON.stringify(chunk));
    expect(answer.status).toBe(202);
    answer.body.eventIds?.forEach((id, n) => {
      accepted.set(id, String(chunk[n]?.data.email));
    });
  }
  expect(accepted.size).toBe(count);
  return accepted;
}

/**
 * Every accepted event ends exactly once in Mautic or in the dead-letter queue with a reason:
 * none in both, none in neither, none twice. Mautic's side counts the items of every create
 * call Mautic applied (a contact sent twice would be upserted into one record, so records alone
 * cannot tell); the dead-letter side is the queue itself, read with `dead-letters --local`.
 */
async function expectEachOnce(accepted: Map<string, string>, sim: MauticSimulator, dir: string) {
  const { reasons, letters } = await deadLettersIn(dir);
  const emails = new Set(sim.records('contacts').map((record) => String(record.email)));
  for (const [eventId, email] of accepted) {
    const delivered = emails.has(email);
    const dead = reasons.has(eventId);
    expect(delivered !== dead, `${eventId}: delivered ${delivered}, dead-lettered ${dead}`).toBe(
      true,
    );
    if (dead) expect(reasons.get(eventId)).toMatch(/^[a-z_]+$/);
  }
  expect([...letters.values()].every((count) => count === 1)).toBe(true);
  expect(itemsCreated(sim, 'contacts') + reasons.size).toBe(accepted.size);
  return reasons;
}

describe('retries bounded by time, not receives (contract §2), through npm start', () => {
  it('rides out a Mautic outage of many receives and delivers every event once afterwards', async () => {
    const { sim, url, output, dir } = await startRelay(
      { faults: OUTAGE },
      { ...COMPRESSED, RETRY_HORIZON_SECONDS: '600' },
    );
    const accepted = await sendContacts(url, 300, 'outage');
    // Long enough for every event to come back many times: more receives than the 5 that used
    // to dead-letter them (held by Mautic's circuit, each comes back at every probe, a second).
    await until(
      () => sim.requests.filter((r) => r.path === '/api/contacts/batch/new').length >= 6,
      60_000,
      () => 'the outage was not tried long enough',
    );
    await new Promise((resolve) => setTimeout(resolve, 12_000));
    expect(sim.records('contacts')).toHaveLength(0);

    sim.setFaults(undefined);
    await until(
      () => sim.records('contacts').length === 300,
      60_000,
      () => `${sim.records('contacts').length} of 300 delivered after the outage`,
    );

    expect(deadLettered(output).size).toBe(0);
    expect((await expectEachOnce(accepted, sim, dir)).size).toBe(0);
    expect(itemsCreated(sim, 'contacts')).toBe(300);
  }, 150_000);

  it('dead-letters events with retry_horizon_exceeded once an outage outlasts the horizon', async () => {
    const { sim, url, output, dir } = await startRelay(
      { faults: OUTAGE },
      { ...COMPRESSED, RETRY_HORIZON_SECONDS: '6' },
    );
    const accepted = await sendContacts(url, 40, 'horizon');

    await until(
      () => deadLettered(output).size === 40,
      60_000,
      () => `${deadLettered(output).size} of 40 dead-lettered`,
    );

    expect(new Set(deadLettered(output).values())).toEqual(new Set(['retry_horizon_exceeded']));
    expect(sim.records('contacts')).toHaveLength(0);
    const reasons = await expectEachOnce(accepted, sim, dir);
    expect(new Set(reasons.values())).toEqual(new Set(['retry_horizon_exceeded']));
  }, 90_000);
});
