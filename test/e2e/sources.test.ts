/**
 * Contract §6 end to end through `npm start` with a real SOURCES_FILE: a Stripe source (signed
 * with Stripe's own library) turns a customer.created webhook into a contact in Mautic; Stripe's
 * retry of it takes effect once; an event its filter refuses queues nothing; a broken mapping
 * keeps the payload as a dead letter, the file is fixed while the stack runs (hot reload), and
 * `redrive --local` delivers it; a new version that does not compile, or is not JSON, is refused
 * with a line naming the problem while the previous one goes on delivering.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Stripe from 'stripe';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { MauticSimulator } from '../../mautic-simulator/server.ts';
import {
  drained,
  itemsCreated,
  operatorCommand,
  startRelay,
  stopRunning,
} from '../support/relay-process.ts';
import { until } from '../support/until.ts';

afterEach(stopRunning);

const SECRET = `whsec_${randomBytes(24).toString('hex')}`;
const STRIPE = 'stripe-customers';
const stripe = new Stripe('sk_test_not_a_real_key');
const folder = mkdtempSync(join(tmpdir(), 'relay-e2e-sources-'));
const sourcesFile = join(folder, 'sources.json');

afterAll(() => rmSync(folder, { recursive: true, force: true }));

/** The Stripe source with `map`, written to SOURCES_FILE as an operator edits it. */
function writeSource(map: string): void {
  const source = {
    verify: { scheme: 'stripe', secret: SECRET },
    filter: "type in ['customer.created', 'customer.updated']",
    map,
  };
  writeFileSync(sourcesFile, JSON.stringify({ sources: { [STRIPE]: source } }, null, 2));
}

const CREATE_BY_EMAIL =
  "{ 'entity': 'contacts', 'action': 'create', 'data': { 'email': data.object.email, 'firstname': data.object.name } }";
/** A mistake: the name where the email belongs, which the ingest refuses. */
const NAME_AS_EMAIL =
  "{ 'entity': 'contacts', 'action': 'create', 'data': { 'email': data.object.name } }";

const customerEvent = (id: string, type: string, email: string, name: string) =>
  JSON.stringify({
    id,
    object: 'event',
    type,
    data: { object: { id: `cus_${id}`, object: 'customer', email, name } },
  });

interface Answer {
  status: number;
  text: string;
  body: { accepted?: number; eventIds?: string[]; ignored?: boolean; deadLettered?: string };
}

/** Posts `payload` to the source as Stripe does: signed now, with Stripe's library. */
async function postStripe(url: string, payload: string): Promise<Answer> {
  const response = await fetch(url.replace(/\/events$/, `/sources/${STRIPE}`), {
    method: 'POST',
    headers: {
      'content-type': 'application/json; charset=utf-8',
      'stripe-signature': stripe.webhooks.generateTestHeaderString({
        payload,
        secret: SECRET,
        timestamp: Math.floor(Date.now() / 1000),
      }),
    },
    body: payload,
  });
  const text = await response.text();
  return { status: response.status, text, body: JSON.parse(text) };
}

const contact = (sim: MauticSimulator, email: string) =>
  sim.records('contacts').find((record) => record.email === email);

/** Resolves once the stack logged its `n`th reload of SOURCES_FILE. */
const reloaded = (output: readonly string[], n: number) =>
  until(
    () => output.filter((line) => line.includes(`sources: reloaded ${sourcesFile}`)).length >= n,
    10_000,
    () => `no reload #${n} of ${sourcesFile}: ${output.join('\n')}`,
  );

describe('npm start with a SOURCES_FILE', () => {
  it('delivers a Stripe webhook once, ignores what the filter refuses, and redrives a payload once its mapping is fixed', async () => {
    writeSource(CREATE_BY_EMAIL);
    const { sim, url, dir, output } = await startRelay({}, { SOURCES_FILE: sourcesFile });
    const env = { MAUTIC_RELAY_DIR: dir, MAUTIC_RELAY_HIDE_SECONDS: '3' };

    const created = customerEvent('evt_e2e_1', 'customer.created', 'ann@example.com', 'Ann');
    const first = await postStripe(url, created);
    expect(first).toMatchObject({
      status: 202,
      body: { accepted: 1, eventIds: [`${STRIPE}:evt_e2e_1:0`] },
    });
    await until(
      async () => (await drained(dir)) && contact(sim, 'ann@example.com') !== undefined,
      30_000,
      () => JSON.stringify(sim.records('contacts')),
    );
    expect(contact(sim, 'ann@example.com')).toMatchObject({ firstname: 'Ann' });

    // Stripe retries the same event (signed anew): the first answer again, nothing queued.
    const retried = await postStripe(url, created);
    // An event the filter refuses: 202 ignored, nothing queued.
    const invoice = await postStripe(
      url,
      customerEvent('evt_e2e_2', 'invoice.paid', 'ann@example.com', 'Ann'),
    );
    expect(retried.text).toBe(first.text);
    expect(invoice).toMatchObject({
      status: 202,
      body: { accepted: 0, eventIds: [], ignored: true },
    });
    expect(await drained(dir)).toBe(true);

    // A broken mapping: the payload is kept as a mapping_failed dead letter, Stripe gets a 202.
    writeSource(NAME_AS_EMAIL);
    await reloaded(output, 1);
    const bob = await postStripe(
      url,
      customerEvent('evt_e2e_3', 'customer.created', 'bob@example.com', 'Bob'),
    );
    expect(bob).toMatchObject({
      status: 202,
      body: { accepted: 0, eventIds: [], deadLettered: `${STRIPE}:evt_e2e_3` },
    });
    const letters = await operatorCommand(['dead-letters', '--local', '--json'], env);
    expect(JSON.parse(letters.out)).toMatchObject({
      count: 1,
      byReason: { mapping_failed: 1 },
      items: [{ eventId: `${STRIPE}:evt_e2e_3`, reason: 'mapping_failed' }],
    });

    // Fixed while the stack runs, then redriven: delivered.
    writeSource(CREATE_BY_EMAIL);
    await reloaded(output, 2);
    const redrive = await operatorCommand(['redrive', '--local', '--json'], env);
    expect(redrive).toMatchObject({ code: 0, err: '' });
    expect(JSON.parse(redrive.out)).toEqual({ matched: 1, moved: 1, left: 0 });
    await until(
      async () => (await drained(dir)) && contact(sim, 'bob@example.com') !== undefined,
      30_000,
      () => JSON.stringify(sim.records('contacts')),
    );

    expect(contact(sim, 'bob@example.com')).toMatchObject({ firstname: 'Bob' });

    // A new version that does not compile is refused with a line naming the source; the
    // previous version stays and goes on delivering. Then one that is not JSON at all.
    writeSource('{ ,');
    await until(
      () => output.some((line) => line.includes('map does not compile')),
      10_000,
      () => output.join('\n'),
    );
    writeFileSync(sourcesFile, `{ "sources": { "${STRIPE}": { "verify": { "secret": "${SECRET}" `);
    await until(
      () => output.some((line) => line.includes('is not JSON')),
      10_000,
      () => output.join('\n'),
    );
    const carol = await postStripe(
      url,
      customerEvent('evt_e2e_4', 'customer.created', 'carol@example.com', 'Carol'),
    );
    expect(carol).toMatchObject({ status: 202, body: { accepted: 1 } });
    await until(
      async () => (await drained(dir)) && contact(sim, 'carol@example.com') !== undefined,
      30_000,
      () => JSON.stringify(sim.records('contacts')),
    );
    const refusals = output.filter((line) => line.startsWith('error: '));
    expect(refusals).toEqual([
      `error: SOURCES_FILE ${sourcesFile}: Source "${STRIPE}": map does not compile: The symbol "," cannot be used as a unary operator (S0211 at position 3); the previous version of the sources stays`,
      expect.stringMatching(
        /^error: SOURCES_FILE .*: Sources document: is not JSON \(line 1, column \d+\); the previous version of the sources stays$/,
      ),
    ]);
    // One create of Ann (her retry and the invoice queued nothing), one of Bob, one of Carol.
    expect(itemsCreated(sim, 'contacts')).toBe(3);
    const after = await operatorCommand(['dead-letters', '--local', '--json'], env);
    expect(JSON.parse(after.out).count).toBe(0);
    expect(output.join('\n')).not.toContain(SECRET);
  }, 120_000);
});
