/**
 * A newcomer's first hour, as the README's quick start, docs/recipes.md and examples/sources/
 * tell it: a fresh `npm start` with its embedded Mautic (nothing seeded by the test, no
 * MAUTIC_BASE_URL, the webhook secret it generates). The quick start's commands run as written;
 * every recipe is posted as written with `send --local` and looked at with `mautic --local`, then
 * every source example as its provider posts it, with no dead letter.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import {
  documentWithSecrets,
  newSecrets,
  payloadText,
  providerSigned,
  SOURCE_EXAMPLES,
} from '../examples/source-examples.ts';
import {
  drained,
  operatorCommand,
  startFreshRelay,
  stopRunning,
} from '../support/relay-process.ts';
import { until } from '../support/until.ts';

afterEach(stopRunning);

const secrets = newSecrets();
const folder = mkdtempSync(join(tmpdir(), 'relay-fresh-start-'));
const sourcesFile = join(folder, 'sources.json');
writeFileSync(sourcesFile, documentWithSecrets(secrets));
afterAll(() => rmSync(folder, { recursive: true, force: true }));

/** The bodies of docs/recipes.md, by the name in the `<!-- recipe: NAME -->` line above each. */
function recipes(): Map<string, string> {
  const text = readFileSync(new URL('../../docs/recipes.md', import.meta.url), 'utf8');
  const found = new Map<string, string>();
  for (const match of text.matchAll(/<!-- recipe: ([a-z-]+) -->\n```json\n([\s\S]*?)\n```/g)) {
    found.set(match[1] as string, match[2] as string);
  }
  return found;
}

interface Named {
  id: number;
  name: string;
}

/** A contact as `mautic --local contact EMAIL --json` shows it; null when Mautic has none. */
interface Contact {
  points: number;
  doNotContact: Array<{ channel: string; reason: string }>;
  fields: Record<string, unknown>;
  segments: Named[];
  campaigns: Named[];
  companies: Named[];
}

describe('a fresh npm start, the recipes and the source examples as written', () => {
  it('delivers every one of them, as each says, with no dead letter', async () => {
    const { url, dir } = await startFreshRelay({
      CONTACT_MATCH_FIELDS: 'crm_id',
      SOURCES_FILE: sourcesFile,
      // Unset: the secret npm start generates, which send --local signs with.
      WEBHOOK_SECRET: '',
    });
    const env = { MAUTIC_RELAY_DIR: dir };
    const contact = async (email: string): Promise<Contact | null> => {
      const { out } = await operatorCommand(['mautic', '--local', 'contact', email, '--json'], env);
      return JSON.parse(out).contact;
    };
    // Paced: each look is a few calls to the stack and to Mautic.
    const settled = async (check: () => Promise<boolean>) =>
      (await sleep(200, true)) && (await drained(dir)) && (await check());

    const bodies = recipes();
    expect([...bodies.keys()]).toEqual([
      'crm-upsert',
      'crm-update',
      'crm-account',
      'crm-delete',
      'shop-customer',
      'shop-order',
      'unsubscribe',
      'resubscribe',
    ]);
    const send = async (name: string, check: () => Promise<boolean>) => {
      const file = join(dir, `${name}.json`);
      writeFileSync(file, bodies.get(name) as string);
      const sent = await operatorCommand(['send', '--local', file], env);
      expect(sent.out, name).toMatch(/^202 Accepted/);
      await until(
        () => settled(check),
        30_000,
        () => name,
      );
    };
    const ann = () => contact('ann@example.com');
    const bob = () => contact('bob@example.com');

    await send('crm-upsert', async () => (await ann())?.fields.crm_id === '1001');
    await send('crm-update', async () => (await ann())?.fields.city === 'Lyon');
    await send('crm-account', async () => (await ann())?.campaigns.length === 1);
    expect(await ann()).toMatchObject({
      companies: [{ id: 1, name: 'Example Ltd' }],
      campaigns: [{ id: 1, name: 'Onboarding' }],
    });
    await send('crm-delete', async () => (await ann()) === null);

    await send('shop-customer', async () => (await bob())?.segments.length === 1);
    expect((await bob())?.segments).toEqual([{ id: 3, name: 'Customers' }]);
    await send('shop-order', async () => (await bob())?.points === 50);
    // The shop's webhook retried in a new request: the same eventId adds nothing.
    await send('shop-order', async () => true);
    expect((await bob())?.points).toBe(50);
    await send('unsubscribe', async () => (await bob())?.doNotContact.length === 1);
    expect((await bob())?.doNotContact).toEqual([{ channel: 'email', reason: 'unsubscribed' }]);
    await send('resubscribe', async () => (await bob())?.doNotContact.length === 0);

    // Every example payload, signed as its provider signs it, one after the other (Stripe's
    // deletion after its update, as Stripe sends them).
    for (const example of SOURCE_EXAMPLES) {
      const body = payloadText(example.payload);
      const response = await fetch(url.replace(/\/events$/, `/sources/${example.source}`), {
        method: 'POST',
        headers: await providerSigned(
          example.source,
          body,
          secrets[example.source] as string,
          example.headers,
        ),
        body,
      });
      expect(response.status, example.payload).toBe(202);
      await until(
        () => settled(async () => true),
        30_000,
        () => example.payload,
      );
    }
    expect((await contact('bob@biller.com'))?.segments).toEqual([
      { id: 1, name: 'Shopify customers' },
    ]);
    expect((await contact('laura@example.com'))?.segments).toEqual([{ id: 2, name: 'Newsletter' }]);
    expect((await contact('john@example.com'))?.points).toBe(404);
    expect(await contact('jennyrosen@example.com')).toBeNull();

    const letters = await operatorCommand(['dead-letters', '--local', '--json'], env);
    expect(JSON.parse(letters.out).count).toBe(0);
  }, 180_000);
});

/** The commands of the README's quick start, from its block run "in a second terminal". */
function quickStart(): string[] {
  const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
  const start = readme.indexOf('In a second terminal');
  const block = /```sh\n([\s\S]*?)\n```/.exec(readme.slice(start))?.[1] ?? '';
  return block.split('\n').filter((line) => line.trim() !== '' && !line.startsWith('#'));
}

describe("the README's quick start, as written, on a fresh npm start", () => {
  it('sends, looks, breaks with a dead letter, and fixes it with a redrive', async () => {
    const { dir } = await startFreshRelay({ WEBHOOK_SECRET: '' });
    const env = { MAUTIC_RELAY_DIR: dir };
    const outputs: string[] = [];
    for (const [i, line] of quickStart().entries()) {
      const piped = /^echo '(.*)' \| npx mautic-relay (.*)$/.exec(line);
      const argv = (piped?.[2] ?? line.replace(/^npx mautic-relay /, '')).split(' ');
      if (piped) {
        // What the shell pipes to the command, as a file: the in-process command has no stdin.
        const file = join(dir, `quick-start-${i}.json`);
        writeFileSync(file, piped[1] as string);
        argv.push(file);
      }
      expect(line, 'a command of the quick start').toMatch(/^(echo '.*' \| )?npx mautic-relay /);
      const { code, out, err } = await operatorCommand(argv, env);
      expect(code, `${line}\n${err}`).toBe(0);
      outputs.push(out);
      // As a person typing: the next command comes once this one's events have been handled.
      await until(
        async () => (await sleep(200, true)) && drained(dir),
        30_000,
        () => line,
      );
    }

    const [sent, contacts, , letters, , redriven, bob] = outputs;
    expect(sent).toMatch(/^202 Accepted/);
    expect(contacts).toContain('ann@example.com  Ann  points 0');
    expect(letters).toMatch(/1 dead letter \(no_match 1\)/);
    expect(redriven).toMatch(/^Moved 1 of 1 /);
    expect(bob).toContain('  segments        3 Customers');
    const left = await operatorCommand(['dead-letters', '--local', '--json'], env);
    expect(JSON.parse(left.out).count).toBe(0);
  }, 120_000);
});
