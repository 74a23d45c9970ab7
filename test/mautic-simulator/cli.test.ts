import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { until } from '../support/until.ts';

/** `npm run simulator` is `node mautic-simulator/cli.ts`, run here on the test's own Node. */
const CLI = join(import.meta.dirname, '../../mautic-simulator/cli.ts');
const children: ChildProcess[] = [];

afterEach(() => {
  for (const child of children.splice(0)) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
});

function run(args: string[]) {
  const child = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  const output = { stdout: '', stderr: '' };
  child.stdout?.on('data', (chunk: Buffer) => {
    output.stdout += chunk.toString();
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    output.stderr += chunk.toString();
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  // Bounded: a child that does not stop fails the test instead of hanging it.
  const exitCode = () => Promise.race([exited, sleep(10_000).then(() => 'still running')]);
  return { child, output, exitCode };
}

describe('npm run simulator', () => {
  it('prints one JSON line with its URL and credential, serves them, and stops on SIGTERM', async () => {
    const { child, output, exitCode } = run([
      '--client-id',
      '7_tools',
      '--client-secret',
      'try-me',
    ]);

    const line = await until(
      () => output.stdout.includes('\n') && output.stdout,
      10_000,
      () => `no line; stderr: ${output.stderr}`,
    );
    const printed = JSON.parse(line) as { url: string; clientId: string; clientSecret: string };
    const token = await fetch(`${printed.url}/oauth/v2/token`, {
      method: 'POST',
      body: new URLSearchParams({
        grant_type: 'client_credentials',
        client_id: printed.clientId,
        client_secret: printed.clientSecret,
      }),
    });
    child.kill('SIGTERM');

    expect(line.trimEnd().split('\n')).toHaveLength(1);
    expect(printed).toEqual({
      url: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+$/),
      clientId: '7_tools',
      clientSecret: 'try-me',
    });
    expect(token.status).toBe(200);
    expect(await exitCode()).toBe(0);
  });

  it('plays the Mautic line --mautic-version names', async () => {
    const { child, output, exitCode } = run(['--mautic-version', '7']);

    const line = await until(
      () => output.stdout.includes('\n') && output.stdout,
      10_000,
      () => `no line; stderr: ${output.stderr}`,
    );
    const { url, clientId, clientSecret } = JSON.parse(line) as Record<string, string>;
    const token = (await (
      await fetch(`${url}/oauth/v2/token`, {
        method: 'POST',
        body: new URLSearchParams({
          grant_type: 'client_credentials',
          client_id: clientId ?? '',
          client_secret: clientSecret ?? '',
        }),
      })
    ).json()) as { access_token: string };
    const answer = await fetch(`${url}/api/contacts`, {
      headers: { authorization: `Bearer ${token.access_token}` },
    });
    child.kill('SIGTERM');

    expect(answer.headers.get('mautic-version')).toBe('7.0.0');
    expect(await exitCode()).toBe(0);
  });

  it('refuses a bad option, port, client id or Mautic line with the usage and exit code 2', async () => {
    for (const args of [
      ['--port', 'x'],
      ['--client-id', 'no-number'],
      ['--nope'],
      ['--mautic-version', '8'],
    ]) {
      const { output, exitCode } = run(args);

      expect(await exitCode()).toBe(2);
      expect(output.stderr).toContain('usage: npm run simulator');
      expect(output.stdout).toBe('');
    }
  });
});
