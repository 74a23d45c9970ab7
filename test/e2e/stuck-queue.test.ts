import { afterEach, describe, expect, it } from 'vitest';
import { contacts, post, startRelay, stopRunning } from '../support/relay-process.ts';
import { until } from '../support/until.ts';

afterEach(stopRunning);

/**
 * The age of the oldest event the batch function sent back, from its first receive, as each
 * invocation reports it: the `OldestRetriedEventAge` metric in the cloud, the `oldestSeconds` of
 * its `events_retried` line under `npm start` (metrics are the cloud's business; the local stack
 * prints the log line). SQS's own age metric leaves out what was received 3 times.
 */
function retriedAges(output: readonly string[]): number[] {
  return output.flatMap((line) => {
    const match = /event=events_retried .*oldestSeconds=(\d+)/.exec(line);
    return match ? [Number(match[1])] : [];
  });
}

describe('a stuck queue is seen, through npm start', () => {
  it('reports the age of the oldest retried event rising through a Mautic outage, past the receives SQS would count, and no more once it ends', async () => {
    const { sim, url, output } = await startRelay(
      { faults: { seed: 3, errorRate: 1 } },
      {
        RETRY_BASE_SECONDS: '1',
        RETRY_MAX_DELAY_SECONDS: '2',
        VISIBILITY_TIMEOUT_SECONDS: '5',
        BATCH_TIMEOUT_SECONDS: '5',
        RETRY_HORIZON_SECONDS: '600',
      },
    );
    expect((await post(url, JSON.stringify(contacts(20, 'stuck')))).status).toBe(202);

    // Many receives: SQS's ApproximateAgeOfOldestMessage stops seeing a message after its third.
    await until(
      () => sim.requests.filter((r) => r.path === '/api/contacts/batch/new').length >= 6,
      30_000,
      () => 'the outage was not tried long enough',
    );
    await until(
      () => Math.max(0, ...retriedAges(output)) >= 12,
      40_000,
      () => `the retried age reached only ${Math.max(0, ...retriedAges(output))} s`,
    );
    const during = retriedAges(output);

    // It rises with the outage: each report at least as old as the first, the last the oldest.
    expect(during.length).toBeGreaterThanOrEqual(4);
    expect(during.at(-1)).toBeGreaterThanOrEqual(12);
    expect(Math.min(...during)).toBe(during[0]);
    expect(during.at(-1)).toBeGreaterThan(during[0] ?? 0);
    expect(sim.records('contacts')).toHaveLength(0);

    sim.setFaults(undefined);
    await until(
      () => sim.records('contacts').length === 20,
      30_000,
      () => `${sim.records('contacts').length} of 20 delivered after the outage`,
    );
    const reported = retriedAges(output).length;
    await new Promise((resolve) => setTimeout(resolve, 3_000));

    // Nothing sent back any more: no new report, so the alarm's metric has no data (not breaching).
    expect(retriedAges(output)).toHaveLength(reported);
  }, 120_000);
});
