import { afterEach, describe, expect, it } from 'vitest';
import { drained, post, startRelay, stopRunning } from '../support/relay-process.ts';
import { until } from '../support/until.ts';

afterEach(stopRunning);

// Contract §1 and §5 through npm start: a look-alike of a contact's address never acts on that
// contact. U+212A KELVIN SIGN is dropped by Mautic's cleaning, while toLowerCase() makes it a k.
describe('npm start: a look-alike match.email', () => {
  it('is refused with 422 naming the field, and kate@example.com keeps her points and stays', async () => {
    const { sim, url, dir } = await startRelay({});
    const kate = sim.seed('contacts', { email: 'kate@example.com', points: 0 });
    const lookAlike = { email: '\u212Aate@example.com' };

    const refused = await post(
      url,
      JSON.stringify([
        { entity: 'contacts', action: 'addPoints', match: lookAlike, points: 10 },
        { entity: 'contacts', action: 'delete', match: lookAlike },
      ]),
    );
    // Kate's own address still works; the queue has been through both once it is drained.
    const own = await post(
      url,
      JSON.stringify({
        entity: 'contacts',
        action: 'addPoints',
        match: { email: 'Kate@example.com' },
        points: 5,
      }),
    );
    expect(own.status).toBe(202);
    await until(
      async () =>
        sim.requests.some((r) => r.method === 'GET' && r.path === '/api/contacts') &&
        (await drained(dir)),
      30_000,
      () => JSON.stringify(sim.records('contacts')),
    );

    expect(sim.records('contacts')).toEqual([
      expect.objectContaining({ id: kate.id, email: 'kate@example.com', points: 5 }),
    ]);
    expect(sim.requests.filter((r) => r.path.includes('/delete'))).toEqual([]);
    expect(refused.status).toBe(422);
    expect(refused.body.error?.code).toBe('invalid_event');
    const { details } = refused.body.error as unknown as { details: Array<{ path: string }> };
    expect(details.map((detail) => detail.path)).toEqual(['/match/email', '/match/email']);
  }, 90_000);
});
