import { afterEach, describe, expect, it } from 'vitest';
import { drained, post, startRelay, stopRunning } from '../support/relay-process.ts';
import { until } from '../support/until.ts';

afterEach(stopRunning);

/** Runs `work` for each item, `lanes` at a time. */
async function inLanes<T>(
  items: ReadonlyArray<T>,
  lanes: number,
  work: (item: T) => Promise<void>,
) {
  let next = 0;
  await Promise.all(
    Array.from({ length: lanes }, async () => {
      while (next < items.length) await work(items[next++] as T);
    }),
  );
}

// Contract §2, order per record across batches, tried as a sender would: a request,
// and only after its 202 a second one for the same record. With two event-source pollers and
// nothing failing, one pair in five used to end in the older state.
describe('npm start: a later event never lands before an earlier one', () => {
  it('ends every record in its latest state: creates by email, edits by id, deletes by email then creates, over several rounds', async () => {
    const { sim, url, dir } = await startRelay({}, { MAX_CONCURRENCY: '2', BATCH_SIZE: '200' });
    // Every event delivered, none still on its way that could land later.
    const settled = async (what: () => boolean) => what() && (await drained(dir));
    const send = async (events: unknown[]) => {
      const response = await post(url, JSON.stringify(events));
      expect(response.status).toBe(202);
    };
    const cities = () => {
      const byCity = new Map<unknown, number>();
      for (const record of sim.records('contacts'))
        byCity.set(record.city, (byCity.get(record.city) ?? 0) + 1);
      return byCity;
    };

    for (const round of [1, 2]) {
      const emails = Array.from({ length: 400 }, (_, i) => `pair${round}-${i}@example.com`);
      await inLanes(emails, 16, async (email) => {
        await send([{ entity: 'contacts', action: 'create', data: { email, city: `A${round}` } }]);
        await send([{ entity: 'contacts', action: 'create', data: { email, city: `B${round}` } }]);
      });
      await until(
        () => settled(() => cities().get(`B${round}`) === 400),
        60_000,
        () => `round ${round}: ${JSON.stringify([...cities()])}`,
      );
      expect(cities().get(`A${round}`) ?? 0).toBe(0);
    }

    const ids = sim.records('contacts').map((record) => record.id);
    await inLanes(ids, 16, async (id) => {
      await send([{ entity: 'contacts', action: 'edit', id, data: { city: 'C' } }]);
      await send([{ entity: 'contacts', action: 'edit', id, data: { city: 'D' } }]);
    });
    await until(
      () => settled(() => cities().get('D') === ids.length),
      60_000,
      () => `edits: ${JSON.stringify([...cities()])}`,
    );
    expect(cities().get('C') ?? 0).toBe(0);

    // A delete by email, then after its 202 a create of the same email: every contact exists.
    const emails = sim.records('contacts').map((record) => String(record.email));
    await inLanes(emails, 16, async (email) => {
      await send([{ entity: 'contacts', action: 'delete', match: { email } }]);
      await send([{ entity: 'contacts', action: 'create', data: { email, city: 'E' } }]);
    });
    await until(
      () => settled(() => cities().get('E') === emails.length),
      60_000,
      () => `delete then create: ${JSON.stringify([...cities()])}`,
    );
    expect(sim.records('contacts')).toHaveLength(emails.length);
    expect(new Set(sim.records('contacts').map((record) => record.email))).toEqual(new Set(emails));
  }, 240_000);
});
