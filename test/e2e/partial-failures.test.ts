/**
 * Partial failures through `npm start`: a burst into a Mautic whose rate limiter allows 2 calls per token
 * per 4 s is delivered within seconds of the resets it needs, with fewer 429 answers than
 * successful calls; and one item that fails every batch edit carrying it is narrowed down, so
 * the rest are delivered within a few tries and only that item is retried, alone.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { contacts, drained, post, startRelay, stopRunning } from '../support/relay-process.ts';
import { until } from '../support/until.ts';

afterEach(stopRunning);

const WINDOW_SECONDS = 4;
const LIMIT = 2;

describe('npm start against a rate-limited Mautic', () => {
  it('delivers an 800-event burst within 30 s of the last reset it needs, with fewer 429s than successful calls', async () => {
    const { sim, url } = await startRelay(
      { rateLimit: { limit: LIMIT, windowSeconds: WINDOW_SECONDS } },
      { BATCH_SIZE: '200' },
    );
    const burst = contacts(800, 'burst');
    for (let start = 0; start < burst.length; start += 200) {
      const answer = await post(url, JSON.stringify(burst.slice(start, start + 200)));
      expect(answer.status).toBe(202);
    }

    await until(
      () => sim.records('contacts').length === 800,
      120_000,
      () => `${sim.records('contacts').length} of 800 delivered`,
    );

    const calls = sim.requests.filter((r) => r.path === '/api/contacts/batch/new');
    const ok = calls.filter((call) => call.status >= 200 && call.status < 300);
    const limited = calls.filter((call) => call.status === 429);
    expect(limited.length).toBeLessThan(ok.length);
    // 800 creates need 4 calls of 200: two windows, so the last reset they need is one window
    // after the first call. The last delivery comes within 30 s of it.
    const first = Math.min(...calls.map((call) => call.at));
    const lastNeededReset = first + (Math.ceil(800 / 200 / LIMIT) - 1) * WINDOW_SECONDS * 1000;
    const lastDelivered = Math.max(...ok.map((call) => call.at));
    expect(lastDelivered).toBeLessThanOrEqual(lastNeededReset + 30_000);
  }, 150_000);
});

describe('npm start with a poison item', () => {
  it('delivers the other edits within a few tries and retries only the item that fails every call it is in, alone', async () => {
    const { sim, url, dir } = await startRelay(
      {},
      {
        BATCH_SIZE: '200',
        RETRY_BASE_SECONDS: '1',
        RETRY_MAX_DELAY_SECONDS: '1',
        RETRY_HORIZON_SECONDS: '600',
      },
    );
    const seeded = Array.from({ length: 400 }, (_, i) =>
      sim.seed('contacts', { email: `p${i}@example.com` }),
    );
    const poisoned = seeded[137]?.id as number;
    sim.poison({ path: '/api/contacts/batch/edit' }, 'id', poisoned);
    const edits = seeded.map((contact) => ({
      entity: 'contacts',
      action: 'edit',
      id: contact.id,
      data: { city: 'Renamed' },
    }));
    for (let start = 0; start < edits.length; start += 100) {
      const answer = await post(url, JSON.stringify(edits.slice(start, start + 100)));
      expect(answer.status).toBe(202);
    }
    const renamed = () => sim.records('contacts').filter((c) => c.city === 'Renamed').length;

    await until(
      () => renamed() === 399,
      60_000,
      () => `${renamed()} of 399 renamed`,
    );
    // The poison keeps coming back (every second here), alone.
    const failing = () =>
      sim.requests.filter((r) => r.path === '/api/contacts/batch/edit' && r.status === 500);
    const atDelivery = failing().length;
    await until(
      () => failing().length >= atDelivery + 3,
      30_000,
      () => `${failing().length}`,
    );

    const edited = sim.records('contacts').find((c) => c.id === poisoned);
    expect(edited?.city).not.toBe('Renamed');
    // Narrowing a call of 200 down to one item costs two tries and two calls per halving.
    expect(atDelivery).toBeLessThanOrEqual(2 * (2 + 2 * Math.ceil(Math.log2(200))));
    // Once found, the item goes alone: the calls that carry it after that carry nothing else.
    expect(
      failing()
        .slice(atDelivery)
        .map((call) => call.items),
    ).toEqual(
      failing()
        .slice(atDelivery)
        .map(() => 1),
    );
    expect(await drained(dir)).toBe(false);
  }, 120_000);
});
