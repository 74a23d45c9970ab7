/**
 * The shipped examples of examples/sources/ end to end (contract §6): one `npm start` whose
 * SOURCES_FILE is the examples' document with the operator's secrets put in, each provider's
 * sample payload posted as the provider sends it (signed its own way), and Mautic's state after:
 * contacts, segment memberships, tags and points. `sources test` checks the same examples in
 * test/examples/sources-command.test.ts.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { seedLocalMautic } from '../../infra/local/mautic-seed.ts';
import type { MauticSimulator } from '../../mautic-simulator/server.ts';
import {
  documentWithSecrets,
  githubDeliveryHeaders,
  newSecrets,
  payloadText,
  providerSigned,
  SOURCE_EXAMPLES,
  STARGAZER_EMAIL,
  shopifyHeaders,
  stargazerWithEmail,
} from '../examples/source-examples.ts';
import {
  drained,
  operatorCommand,
  simulatorGet,
  startRelay,
  stopRunning,
} from '../support/relay-process.ts';
import { until } from '../support/until.ts';

afterEach(stopRunning);

const secrets = newSecrets();
const folder = mkdtempSync(join(tmpdir(), 'relay-source-examples-'));
const sourcesFile = join(folder, 'sources.json');
writeFileSync(sourcesFile, documentWithSecrets(secrets));

afterAll(() => rmSync(folder, { recursive: true, force: true }));

interface Answer {
  status: number;
  body: { accepted?: number; ignored?: boolean; deadLettered?: string };
}

/** Posts `body` to `/sources/{source}` of the relay at `url`, signed as the provider signs. */
async function postSigned(
  url: string,
  source: string,
  body: string,
  headers: Record<string, string>,
): Promise<Answer> {
  const secret = secrets[source] as string;
  const response = await fetch(url.replace(/\/events$/, `/sources/${source}`), {
    method: 'POST',
    headers: await providerSigned(source, body, secret, headers),
    body,
  });
  return { status: response.status, body: (await response.json()) as Answer['body'] };
}

/** Posts the example of `payload` as shipped. */
function postExample(url: string, payload: string): Promise<Answer> {
  const example = SOURCE_EXAMPLES.find((candidate) => candidate.payload === payload);
  if (example === undefined) throw new Error(`no example posts ${payload}`);
  return postSigned(url, example.source, payloadText(payload), example.headers);
}

const contact = (sim: MauticSimulator, email: string) =>
  sim.records('contacts').find((record) => record.email === email);

async function segmentsOf(sim: MauticSimulator, email: string): Promise<string[]> {
  const id = contact(sim, email)?.id;
  if (id === undefined) return [];
  return Object.keys((await simulatorGet(sim, `/api/contacts/${id}/segments`)).lists as object);
}

describe('npm start with the shipped source examples', () => {
  it('turns each provider’s signed sample into the Mautic state its example describes', async () => {
    const { sim, url, dir, output } = await startRelay({}, { SOURCES_FILE: sourcesFile });
    // The segment ids the examples name (1 for Shopify's customers, 2 for the form's sign-ups),
    // as npm start's embedded Mautic holds them.
    seedLocalMautic(sim);

    const first = await Promise.all([
      postExample(url, 'stripe/customer.created.json'),
      postExample(url, 'shopify/customers-create.json'),
      postExample(url, 'shopify/orders-create.json'),
      postExample(url, 'typeform/form_response.json'),
      postExample(url, 'github/watch-started.json'),
      postSigned(
        url,
        'github-stars',
        stargazerWithEmail(),
        githubDeliveryHeaders('a-star-with-email'),
      ),
    ]);
    expect(first.map(({ status, body }) => [status, body.accepted, body.ignored])).toEqual([
      [202, 1, undefined],
      [202, 2, undefined],
      [202, 2, undefined],
      [202, 2, undefined],
      [202, 0, true],
      [202, 1, undefined],
    ]);
    await until(
      async () =>
        (await drained(dir)) &&
        contact(sim, 'john@example.com')?.points === 404 &&
        (await segmentsOf(sim, 'bob@biller.com')).includes('1') &&
        (await segmentsOf(sim, 'laura@example.com')).includes('2') &&
        contact(sim, 'jennyrosen@example.com') !== undefined &&
        contact(sim, STARGAZER_EMAIL) !== undefined,
      30_000,
      () => JSON.stringify(sim.records('contacts')),
    );

    expect(contact(sim, 'jennyrosen@example.com')).toMatchObject({
      firstname: 'Jenny',
      lastname: 'Rosen',
    });
    expect(contact(sim, 'bob@biller.com')).toMatchObject({
      firstname: 'Bob',
      lastname: 'Biller',
      tags: ['shopify-customer'],
    });
    expect(contact(sim, 'john@example.com')).toMatchObject({
      firstname: 'John',
      tags: ['shopify-buyer', 'tag1', 'tag2'],
    });
    expect(contact(sim, 'laura@example.com')).toMatchObject({ firstname: 'Laura' });
    expect(contact(sim, STARGAZER_EMAIL)).toMatchObject({ tags: ['github-stargazer'] });
    expect(sim.records('contacts')).toHaveLength(5);

    // Stripe's later events of the customer, in the order Stripe sends them (the deletion after
    // the update's 202: sent at once, the two could arrive either way round, and a deletion
    // that arrived first would be undone by the update's create), and Shopify's order delivered
    // again under a new X-Shopify-Webhook-Id (a second delivery, which request de-duplication
    // cannot tell) beside them.
    const stripeInOrder = async () => [
      await postExample(url, 'stripe/customer.updated.json'),
      await postExample(url, 'stripe/customer.deleted.json'),
    ];
    const [stripeLater, shopifyAgain] = await Promise.all([
      stripeInOrder(),
      postSigned(
        url,
        'shopify',
        payloadText('shopify/orders-create.json'),
        shopifyHeaders('orders/create', 'another-delivery-of-the-order'),
      ),
    ]);
    const later = [...stripeLater, shopifyAgain];
    expect(later.map(({ status, body }) => [status, body.accepted])).toEqual([
      [202, 1],
      [202, 1],
      [202, 2],
    ]);
    await until(
      async () => (await drained(dir)) && contact(sim, 'jennyrosen@example.com') === undefined,
      30_000,
      () => JSON.stringify(sim.records('contacts')),
    );

    // The order's points were added once: its eventId is the order's.
    expect(contact(sim, 'john@example.com')?.points).toBe(404);
    const letters = await operatorCommand(['dead-letters', '--local', '--json'], {
      MAUTIC_RELAY_DIR: dir,
    });
    expect(JSON.parse(letters.out).count).toBe(0);
    const log = output.join('\n');
    for (const secret of Object.values(secrets)) expect(log).not.toContain(secret);
  }, 120_000);
});
