import { execFile } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { clientSecretSchema, tokenSecretSchema } from '../../functions/core/token-secret.ts';
import { secretNames } from '../../functions/shared/secret-names.ts';
import { UsageError } from '../../infra/cli/errors.ts';
import {
  authorize,
  type CommandDeps,
  storeCredentials,
} from '../../infra/cli/operator-commands.ts';
import {
  type SecretsManagerFake,
  startSecretsManagerFake,
} from '../../infra/local/secrets-manager-fake.ts';
import {
  DEFAULT_SIMULATOR_CLIENT,
  type MauticSimulator,
  startMauticSimulator,
} from '../../mautic-simulator/server.ts';
import { freePort } from '../support/net.ts';
import { secretsClient } from '../support/refresh.ts';
import { until } from '../support/until.ts';

const run = promisify(execFile);
let fake: SecretsManagerFake;
let client: SecretsManagerClient;
let sim: MauticSimulator;
let printed: string[];
let deps: CommandDeps;
let environment = 0;

beforeAll(async () => {
  fake = await startSecretsManagerFake();
  client = secretsClient(fake);
});

afterAll(async () => {
  client.destroy();
  await fake.close();
});

beforeEach(() => {
  printed = [];
  environment++;
  deps = { secrets: client, fetch, print: (line) => printed.push(line), now: Date.now };
});

afterEach(async () => {
  await sim?.close();
});

describe('credentials', () => {
  it('stores the credential as the client secret of the environment, and replaces it on a second run', async () => {
    sim = await startMauticSimulator();
    const env = `cli${environment}`;
    const options = {
      env,
      baseUrl: sim.url,
      clientId: '1_simulator',
      clientSecret: 'first-secret',
      grantType: 'client_credentials',
    };

    await storeCredentials(options, deps);
    await storeCredentials({ ...options, clientSecret: 'second-secret' }, deps);

    const name = secretNames(env).client;
    expect(clientSecretSchema.parse(JSON.parse(fake.current(name) ?? ''))).toEqual({
      ...options,
      clientSecret: 'second-secret',
      env: undefined,
    });
    expect(fake.versions(name)).toHaveLength(2);
    for (const secret of ['first-secret', 'second-secret'])
      expect(printed.join('\n')).not.toContain(secret);
  });

  it('refuses a credential that cannot work, naming the field', async () => {
    const bad = {
      env: 'dev',
      baseUrl: 'ftp://mautic',
      clientId: 'nounderscore',
      clientSecret: 's',
      grantType: 'password',
    };

    const error = await storeCredentials(bad, deps).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(UsageError);
    // Named as the operator gives them: the options.
    expect((error as Error).message).toMatch(/--base-url .*--client-id .*--grant-type /);
  });

  it("names MAUTIC_CLIENT_SECRET when the secret is empty, not the schema's field", async () => {
    const empty = {
      env: 'dev',
      baseUrl: 'https://m.example.com',
      clientId: '3_abc',
      grantType: 'client_credentials',
    };

    for (const clientSecret of ['', '  ']) {
      const error = await storeCredentials({ ...empty, clientSecret }, deps).catch(
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(UsageError);
      expect((error as Error).message).toContain('MAUTIC_CLIENT_SECRET is empty');
      expect((error as Error).message).not.toContain('clientSecret');
    }
  });
});

describe('authorize', () => {
  it('prints the authorize URL, receives the code on 127.0.0.1, and stores the tokens', async () => {
    const port = await freePort();
    sim = await startMauticSimulator({
      clients: [
        {
          clientId: '5_user',
          clientSecret: 'user-secret',
          grantTypes: ['authorization_code', 'refresh_token'],
          redirectUris: [`http://127.0.0.1:${port}/callback`],
        },
      ],
    });
    const env = `cli${environment}`;
    await storeCredentials(
      {
        env,
        baseUrl: sim.url,
        clientId: '5_user',
        clientSecret: 'user-secret',
        grantType: 'authorization_code',
      },
      deps,
    );

    const done = authorize({ env, port, timeoutMs: 10_000 }, deps);
    // Acts as the operator's browser: open the printed URL, follow Mautic's redirect.
    const url = await until(() => printed.find((line) => line.startsWith(sim.url)));
    const approved = await fetch(url, { redirect: 'manual' });
    const callback = await fetch(approved.headers.get('location') ?? '');
    await done;

    expect(callback.status).toBe(200);
    const tokens = tokenSecretSchema.parse(JSON.parse(fake.current(secretNames(env).token) ?? ''));
    expect(tokens.obtainedWith).toBe('authorization_code');
    expect(tokens.refreshToken).toMatch(/^[A-Za-z0-9_-]{86}$/);
    const shown = printed.join('\n');
    expect(shown).toContain(`http://127.0.0.1:${port}/callback`);
    for (const secret of [tokens.accessToken, tokens.refreshToken ?? '', 'user-secret'])
      expect(shown).not.toContain(secret);
  });

  it('ignores a callback with the wrong state and gives up after the timeout', async () => {
    const port = await freePort();
    sim = await startMauticSimulator();
    const env = `cli${environment}`;
    await storeCredentials(
      {
        env,
        baseUrl: sim.url,
        clientId: DEFAULT_SIMULATOR_CLIENT.clientId,
        clientSecret: DEFAULT_SIMULATOR_CLIENT.clientSecret,
        grantType: 'authorization_code',
      },
      deps,
    );

    const done = authorize({ env, port, timeoutMs: 1_500 }, deps).catch((e: unknown) => e);
    await until(() => printed.find((line) => line.startsWith(sim.url)));
    const forged = await fetch(`http://127.0.0.1:${port}/callback?code=abc&state=forged`);

    expect(forged.status).toBe(400);
    const error = await done;
    expect(error).toBeInstanceOf(UsageError);
    expect((error as Error).message).toContain('no answer within 1.5 s');
    expect(fake.current(secretNames(env).token)).toBeUndefined();
  });

  it('asks for credentials first when the environment has none', async () => {
    await expect(
      authorize({ env: 'nothing-here', port: 0, timeoutMs: 1_000 }, deps),
    ).rejects.toThrow(
      'No Mautic credential in MauticRelay/nothing-here/client: run "npx mautic-relay credentials" first',
    );
  });
});

describe('the mautic-relay command', () => {
  const environmentFor = () => ({
    ...process.env,
    AWS_ENDPOINT_URL_SECRETS_MANAGER: fake.endpoint,
    AWS_REGION: 'us-east-1',
    AWS_ACCESS_KEY_ID: 'test',
    AWS_SECRET_ACCESS_KEY: 'test',
    MAUTIC_CLIENT_SECRET: 'secret-from-the-environment',
  });

  it('stores credentials with the client secret from the environment', async () => {
    const env = `bin${environment}`;
    const { stdout } = await run(
      'node',
      [
        join(process.cwd(), 'infra/cli/mautic-relay.ts'),
        'credentials',
        '--env',
        env,
        '--base-url',
        'https://mautic.example.com',
        '--client-id',
        '3_abc',
      ],
      // Outside the project, whose cdk.json does not name this environment: AWS_REGION's region.
      { env: environmentFor(), cwd: tmpdir(), timeout: 20_000 },
    );

    expect(stdout).toContain(`Stored the Mautic credential for "${env}"`);
    expect(JSON.parse(fake.current(secretNames(env).client) ?? '')).toMatchObject({
      clientSecret: 'secret-from-the-environment',
      grantType: 'client_credentials',
    });
  });

  it('exits 2, naming the unknown command, with the usage', async () => {
    const failure = await run('node', ['infra/cli/mautic-relay.ts', 'frobnicate', '--env', 'dev'], {
      env: environmentFor(),
      timeout: 20_000,
    }).catch((e: { code: number; stderr: string }) => e);

    expect(failure).toMatchObject({ code: 2 });
    expect((failure as { stderr: string }).stderr).toContain('Unknown command "frobnicate"');
    expect((failure as { stderr: string }).stderr).toContain('Usage:');
  });
});
