import { afterEach, describe, expect, it } from 'vitest';
import {
  contacts,
  deadLettered,
  post,
  startRelay,
  stopRunning,
  until,
} from '../support/relay-process.ts';

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
 * none in both, none in neither, no contact twice.
 */
function expectEachOnce(
  accepted: Map<string, string>,
  records: Array<Record<string, unknown>>,
  letters: Map<string, string>,
) {
  const emails = records.map((record) => String(record.email));
  expect(new Set(emails).size).toBe(emails.length);
  const inMautic = new Set(emails);
  for (const [eventId, email] of accepted) {
    const delivered = inMautic.has(email);
    const dead = letters.has(eventId);
    expect(delivered !== dead, `${eventId}: delivered ${delivered}, dead-lettered ${dead}`).toBe(
      true,
    );
  }
  expect(emails.length + [...letters.keys()].filter((id) => accepted.has(id)).length).toBe(
    accepted.size,
  );
}

describe('retries bounded by time, not receives (contract §2), through npm start', () => {
  it('rides out a Mautic outage of many receives and delivers every event once afterwards', async () => {
    const { sim, url, output } = await startRelay(
      { faults: OUTAGE },
      { ...COMPRESSED, RETRY_HORIZON_SECONDS: '600' },
    );
    const accepted = await sendContacts(url, 300, 'outage');
    // Long enough for every event to come back many times: more receives than the 5 that used
    // to dead-letter them (backoff 1, 2, 4, 4, … s).
    await until(
      () => sim.requests.filter((r) => r.path === '/api/contacts/batch/new').length >= 6 * 6,
      60_000,
      () => 'the outage was not tried long enough',
    );
    await new Promise((resolve) => setTimeout(resolve, 20_000));
    expect(sim.records('contacts')).toHaveLength(0);

    sim.setFaults(undefined);
    await until(
      () => sim.records('contacts').length === 300,
      60_000,
      () => `${sim.records('contacts').length} of 300 delivered after the outage`,
    );

    expect(deadLettered(output).size).toBe(0);
    expectEachOnce(accepted, sim.records('contacts'), deadLettered(output));
  }, 150_000);

  it('dead-letters events with retry_horizon_exceeded once an outage outlasts the horizon', async () => {
    const { sim, url, output } = await startRelay(
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
    expectEachOnce(accepted, sim.records('contacts'), deadLettered(output));
  }, 90_000);
});
