import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import type { MauticSimulator } from '../../mautic-simulator/server.ts';
import {
  drained,
  operatorCommand,
  post,
  simulatorGet,
  startRelay,
  stopRunning,
} from '../support/relay-process.ts';
import { until } from '../support/until.ts';

afterEach(stopRunning);

/** The bodies of docs/recipes.md, by the name in the `<!-- recipe: NAME -->` line above each. */
function recipes(): Map<string, string> {
  const text = readFileSync(new URL('../../docs/recipes.md', import.meta.url), 'utf8');
  const found = new Map<string, string>();
  for (const match of text.matchAll(/<!-- recipe: ([a-z-]+) -->\n```json\n([\s\S]*?)\n```/g)) {
    found.set(match[1] as string, match[2] as string);
  }
  return found;
}

/** Whether the relay has no event left on its queue (`status --local --json`). */

const byEmail = (sim: MauticSimulator, email: string) =>
  sim.records('contacts').find((record) => record.email === email);

// docs/recipes.md, each body posted as written, through npm start, in the order the page gives.
describe('the recipes of docs/recipes.md, as written', () => {
  it('does what each recipe says: CRM sync, a shop, an unsubscribe', async () => {
    const { sim, url, dir } = await startRelay({}, { CONTACT_MATCH_FIELDS: 'crm_id' });
    // The segment the shop recipe names (id 3) and the field the CRM recipe matches on.
    for (const name of ['Leads', 'Prospects', 'Customers']) {
      sim.seed('segments', { name, alias: name.toLowerCase(), isPublished: true });
    }
    const bodies = recipes();
    expect([...bodies.keys()]).toEqual([
      'crm-upsert',
      'crm-update',
      'crm-delete',
      'shop-customer',
      'shop-order',
      'unsubscribe',
      'resubscribe',
    ]);
    const send = async (name: string, then: () => boolean | Promise<boolean>) => {
      const response = await post(url, bodies.get(name) as string);
      expect(response.status, name).toBe(202);
      await until(
        async () => (await drained(dir)) && (await then()),
        30_000,
        () => name,
      );
    };

    await send('crm-upsert', () => byEmail(sim, 'ann@example.com')?.crm_id === '1001');
    await send('crm-update', () => byEmail(sim, 'ann@example.com')?.city === 'Lyon');
    await send('crm-delete', () => byEmail(sim, 'ann@example.com') === undefined);

    await send('shop-customer', () => byEmail(sim, 'bob@example.com') !== undefined);
    const bob = byEmail(sim, 'bob@example.com')?.id ?? 0;
    expect(
      Object.keys((await simulatorGet(sim, `/api/contacts/${bob}/segments`)).lists as object),
    ).toEqual(['3']);
    await send('shop-order', () => byEmail(sim, 'bob@example.com')?.points === 50);
    // The shop's webhook retried in a new request: the same eventId adds nothing.
    await send('shop-order', () => true);
    expect(byEmail(sim, 'bob@example.com')?.points).toBe(50);

    const dnc = async () =>
      ((await simulatorGet(sim, `/api/contacts/${bob}`)).contact as { doNotContact: unknown[] })
        .doNotContact;
    await send('unsubscribe', async () => (await dnc()).length === 1);
    expect(await dnc()).toEqual([
      expect.objectContaining({
        channel: 'email',
        reason: 1,
        comments: 'Unsubscribed in the shop',
      }),
    ]);
    await send('resubscribe', async () => (await dnc()).length === 0);

    const letters = await operatorCommand(['dead-letters', '--local', '--json'], {
      MAUTIC_RELAY_DIR: dir,
    });
    expect(JSON.parse(letters.out).count).toBe(0);
  }, 120_000);
});
