import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  CreateSecretCommand,
  PutSecretValueCommand,
  SecretsManagerClient,
} from '@aws-sdk/client-secrets-manager';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXIT } from '../../infra/cli/errors.ts';
import { endpointsPathIn, writeLocalEndpoints } from '../../infra/cli/local-endpoints.ts';
import { seedLocalMautic } from '../../infra/local/mautic-seed.ts';
import {
  type SecretsManagerFake,
  startSecretsManagerFake,
} from '../../infra/local/secrets-manager-fake.ts';
import { type MauticSimulator, startMauticSimulator } from '../../mautic-simulator/server.ts';
import { operatorCommand } from '../support/relay-process.ts';

const TOKEN_SECRET = 'MauticRelay/local/token';
let sim: MauticSimulator;
let secretsFake: SecretsManagerFake;
let secrets: SecretsManagerClient;
let dir: string;
let accessToken: string;

/** The token secret as the local refresher writes it, good for `lifetimeMs` more. */
async function storeToken(token: string, lifetimeMs: number) {
  await secrets.send(
    new PutSecretValueCommand({
      SecretId: TOKEN_SECRET,
      SecretString: JSON.stringify({
        accessToken: token,
        accessTokenExpiresAt: new Date(Date.now() + lifetimeMs).toISOString(),
        obtainedWith: 'client_credentials',
        updatedAt: new Date().toISOString(),
      }),
    }),
  );
}

const mautic = (args: string[]) =>
  operatorCommand(['mautic', '--local', ...args], { MAUTIC_RELAY_DIR: dir });

/** A call to the simulator's API as the relay makes it. */
async function api(method: string, path: string, body?: unknown) {
  const response = await fetch(`${sim.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${accessToken}`, 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  expect(response.status, path).toBeLessThan(300);
}

beforeAll(async () => {
  sim = await startMauticSimulator();
  // What the embedded Mautic of npm start holds from the start.
  seedLocalMautic(sim);
  accessToken = sim.issueToken().accessToken;
  await api('POST', '/api/contacts/batch/new', [
    { email: 'ann@example.com', firstname: 'Ann', lastname: 'Lee', crm_id: '1001' },
    { email: 'bob@example.com', firstname: 'Bob', tags: ['shopify-customer'] },
  ]);
  await api('POST', '/api/segments/3/contact/2/add');
  await api('POST', '/api/campaigns/1/contact/2/add');
  await api('POST', '/api/companies/1/contact/2/add');
  await api('POST', '/api/contacts/2/dnc/email/add', { reason: 1 });
  secretsFake = await startSecretsManagerFake();
  secrets = new SecretsManagerClient({
    endpoint: secretsFake.endpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
  });
  await secrets.send(new CreateSecretCommand({ Name: TOKEN_SECRET, SecretString: '{}' }));
  dir = mkdtempSync(join(tmpdir(), 'relay-mautic-command-'));
  writeLocalEndpoints(endpointsPathIn(dir), {
    ingestUrl: 'http://127.0.0.1:1/events',
    sqsEndpoint: 'http://127.0.0.1:1',
    queueUrl: 'http://127.0.0.1:1/queue/events.fifo',
    deadLetterQueueUrl: 'http://127.0.0.1:1/queue/dead.fifo',
    secretsEndpoint: secretsFake.endpoint,
    tokenSecretId: TOKEN_SECRET,
    mauticUrl: sim.url,
    pid: process.pid,
    startedAt: new Date().toISOString(),
  });
});

afterAll(async () => {
  secrets?.destroy();
  await secretsFake?.close();
  await sim?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('mautic --local: what the local stack’s Mautic holds', () => {
  it('says to refresh when the local stack holds no access token yet, or an expired one', async () => {
    const none = await mautic(['contacts']);
    expect(none.code).toBe(EXIT.setup);
    expect(none.err).toContain('npx mautic-relay refresh --local');
    await storeToken(accessToken, -1000);
    const expired = await mautic(['contacts']);
    expect(expired.code).toBe(EXIT.setup);
    expect(expired.err).toMatch(/expired.*refresh --local/);
    await storeToken('a-token-mautic-never-issued', 3_600_000);
    const refused = await mautic(['segments']);
    expect(refused.code).toBe(EXIT.setup);
    expect(refused.err).toMatch(/refused the stored access token.*refresh --local/);
    expect(refused.err).not.toContain('a-token-mautic-never-issued');
  });

  it('lists the seeded segments, campaign and company with their ids', async () => {
    await storeToken(accessToken, 3_600_000);
    const segments = await mautic(['segments']);
    expect(segments.code).toBe(EXIT.ok);
    expect(segments.out.split('\n')).toEqual([
      '3 segments',
      '     1  Shopify customers',
      '     2  Newsletter',
      '     3  Customers',
    ]);
    expect((await mautic(['campaigns'])).out).toBe('1 campaign\n     1  Onboarding');
    expect((await mautic(['companies'])).out).toBe('1 company\n     1  Example Ltd');
    expect(JSON.parse((await mautic(['segments', '--json'])).out)).toEqual({
      segments: [
        { id: 1, name: 'Shopify customers' },
        { id: 2, name: 'Newsletter' },
        { id: 3, name: 'Customers' },
      ],
    });
  });

  it('lists contacts, searched as Mautic searches, and shows one with its memberships', async () => {
    await storeToken(accessToken, 3_600_000);
    const all = await mautic(['contacts']);
    expect(all.code).toBe(EXIT.ok);
    expect(all.out.split('\n')).toEqual([
      '2 contacts',
      '     1  ann@example.com  Ann Lee  points 0',
      '     2  bob@example.com  Bob  points 0  tags shopify-customer  do not contact: email (unsubscribed)',
    ]);
    const searched = await mautic(['contacts', '--search', 'ann', '--json']);
    expect(JSON.parse(searched.out)).toMatchObject({
      total: 1,
      contacts: [{ id: 1, email: 'ann@example.com', fields: { crm_id: '1001' } }],
    });

    const bob = await mautic(['contact', 'bob@example.com']);
    expect(bob.code).toBe(EXIT.ok);
    expect(bob.out.split('\n')).toEqual([
      'contact 2: bob@example.com, Bob',
      '  points          0',
      '  tags            shopify-customer',
      '  do not contact  email (unsubscribed)',
      '  segments        3 Customers',
      '  campaigns       1 Onboarding',
      '  companies       1 Example Ltd',
      '  other fields    company Example Ltd',
    ]);
    const ann = await mautic(['contact', '1', '--json']);
    expect(JSON.parse(ann.out).contact).toMatchObject({
      id: 1,
      email: 'ann@example.com',
      fields: { crm_id: '1001' },
      segments: [],
    });
    for (const shown of [all, searched, bob, ann]) expect(shown.out).not.toContain(accessToken);
  });

  it('exits 1 for a contact Mautic does not have', async () => {
    await storeToken(accessToken, 3_600_000);
    const missing = await mautic(['contact', 'nobody@example.com']);
    expect(missing).toMatchObject({
      code: EXIT.failed,
      out: 'Mautic has no contact nobody@example.com.',
    });
    expect((await mautic(['contact', '999'])).code).toBe(EXIT.failed);
  });

  it('reads only the local stack: --env and mistakes are usage errors, before any call', async () => {
    const env = await operatorCommand(['mautic', '--env', 'dev', 'contacts'], {});
    expect(env.code).toBe(EXIT.usage);
    expect(env.err).toContain("reads only the local stack's Mautic (--local)");
    for (const args of [
      ['contacts', 'extra'],
      ['contact'],
      ['tags'],
      ['segments', '--search', 'x'],
    ])
      expect((await mautic(args)).code, args.join(' ')).toBe(EXIT.usage);
    expect((await operatorCommand(['mautic', 'contacts'], {})).code).toBe(EXIT.usage);
  });
});
