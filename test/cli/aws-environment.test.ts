/**
 * What the operator commands say when the AWS environment is wrong, with the real SDK (no mock):
 * AWS not reachable from here exits 3 naming the host, and an AWS_PROFILE that names no profile
 * is named. The SDK reads process.env; the CLI is given the same environment.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { type CliIo, runCli } from '../../infra/cli/cli.ts';
import { EXIT } from '../../infra/cli/errors.ts';
import { freePort } from '../support/net.ts';

let dir: string;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'relay-aws-env-'));
  // Nothing of the machine's own AWS set-up: these files, these variables.
  for (const name of [
    'AWS_PROFILE',
    'AWS_REGION',
    'AWS_DEFAULT_REGION',
    'AWS_ACCESS_KEY_ID',
    'AWS_SECRET_ACCESS_KEY',
    'AWS_SESSION_TOKEN',
    'AWS_ENDPOINT_URL',
  ])
    vi.stubEnv(name, undefined);
  vi.stubEnv('AWS_CONFIG_FILE', join(dir, 'config'));
  vi.stubEnv('AWS_SHARED_CREDENTIALS_FILE', join(dir, 'credentials'));
  vi.stubEnv('AWS_EC2_METADATA_DISABLED', 'true');
  writeFileSync(
    join(dir, 'config'),
    '[default]\noutput = json\n\n[profile ops]\nregion = eu-west-1\n',
  );
  writeFileSync(
    join(dir, 'credentials'),
    '[ci]\naws_access_key_id = x\naws_secret_access_key = y\n',
  );
});

afterEach(() => {
  vi.unstubAllEnvs();
  vi.restoreAllMocks();
  rmSync(dir, { recursive: true, force: true });
});

async function run(argv: string[]) {
  let err = '';
  const io: CliIo = {
    stdout: () => {},
    stderr: (text) => {
      err += text;
    },
    env: process.env,
    progressBar: false,
    now: Date.now,
    sleep: async () => {},
    interrupted: () => false,
    readStdin: async () => new Uint8Array(),
    readSecret: async () => '',
  };
  return { code: await runCli(argv, io), err };
}

describe('the AWS environment, as the SDK finds it', () => {
  it('AWS not reachable from here: exit 3, naming where it tried', async () => {
    const port = await freePort();
    vi.stubEnv('AWS_REGION', 'eu-west-1');
    vi.stubEnv('AWS_ACCESS_KEY_ID', 'AKIAEXAMPLE');
    vi.stubEnv('AWS_SECRET_ACCESS_KEY', 'secret-key-never-shown');
    vi.stubEnv('AWS_ENDPOINT_URL', `http://127.0.0.1:${port}`);
    vi.stubEnv('AWS_MAX_ATTEMPTS', '1');

    const { code, err } = await run(['status', '--env', 'dev']);

    expect(code).toBe(EXIT.setup);
    expect(err).toContain(`AWS cannot be reached from here (127.0.0.1:${port}: ECONNREFUSED)`);
    expect(err).toContain('AWS_ENDPOINT_URL');
    expect(err).not.toContain('secret-key-never-shown');
  });

  it.each([
    ['without a region', {}],
    ['with a region', { AWS_REGION: 'eu-west-1' }],
  ])('an AWS_PROFILE that names no profile is named (%s)', async (_, extra) => {
    vi.stubEnv('AWS_PROFILE', 'opps');
    for (const [name, value] of Object.entries(extra)) vi.stubEnv(name, value);

    const { code, err } = await run(['dead-letters', '--env', 'dev']);

    expect(code).toBe(EXIT.setup);
    expect(err).toContain(
      'AWS_PROFILE is "opps", but no profile of that name is in the AWS config files',
    );
    expect(err).toContain(join(dir, 'config'));
  });

  it.each([
    ['ops', /No AWS credentials were found/],
    ['ci', /No AWS region is set/],
  ])('a profile that is there (%s) is not called unknown', async (profile, message) => {
    vi.stubEnv('AWS_PROFILE', profile);
    // Outside the project: no cdk.json names the region, so only the profile could.
    vi.spyOn(process, 'cwd').mockReturnValue(dir);

    const { code, err } = await run(['status', '--env', 'dev']);

    expect(code).toBe(EXIT.setup);
    expect(err).toMatch(message);
    expect(err).not.toContain('no profile of that name');
  });
});
