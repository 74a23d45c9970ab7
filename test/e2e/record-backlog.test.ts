/**
 * Contract §2 and §3, one busy record never stalls the others, through `npm start` with
 * `MAX_RECORD_EVENTS_PER_MINUTE`: the local stack hands the setting to its ingest and counts in
 * its dynalite table, and the console says what was refused.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { post, startRelay, stopRunning } from '../support/relay-process.ts';
import { until } from '../support/until.ts';

afterEach(stopRunning);

const create = (email: string) =>
  JSON.stringify({ entity: 'contacts', action: 'create', data: { email } });

describe('npm start with MAX_RECORD_EVENTS_PER_MINUTE', () => {
  it('refuses a record past its bound with 429 record_backlog and delivers every other record', async () => {
    const { sim, url, output } = await startRelay({}, { MAX_RECORD_EVENTS_PER_MINUTE: '3' });

    const answers = [];
    for (let n = 0; n < 4; n++) answers.push(await post(url, create('busy@example.com')));
    const other = await post(url, create('calm@example.com'));

    expect(answers.map((answer) => answer.status)).toEqual([202, 202, 202, 429]);
    expect(answers[3]?.body.error?.code).toBe('record_backlog');
    expect(other.status).toBe(202);
    await until(
      () => sim.records('contacts').some((record) => record.email === 'calm@example.com'),
      20_000,
      () => output.join('\n'),
    );
    expect(output.some((line) => /^refused request \S+: 429 record_backlog$/.test(line))).toBe(
      true,
    );
    expect(output).toContain('  per record: at most 3 events a minute');
    expect(output.join('\n')).not.toContain('busy@example.com');
  }, 60_000);
});
