import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { loadLocalConfig } from '../../infra/local/local-config.ts';
import { startLocalStack } from '../../infra/local/local-stack.ts';
import { freePort } from '../support/net.ts';
import { until } from '../support/until.ts';

const run = promisify(execFile);

describe('the authorization_code flow against the local stack', () => {
  it('npm start prints the exact authorize command; it works against the embedded simulator, and the relay then refreshes with the rotated refresh token', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'relay-authorize-'));
    const env = { ...process.env, MAUTIC_RELAY_DIR: dir };
    const port = await freePort();
    const printed: string[] = [];
    const stack = await startLocalStack(
      loadLocalConfig({
        PORT: '0',
        MAUTIC_GRANT_TYPE: 'authorization_code',
        AUTHORIZE_PORT: String(port),
        REFRESH_INTERVAL_SECONDS: '3600',
      }),
      (line) => printed.push(line),
      { endpointsDir: dir },
    );
    let child: ChildProcess | undefined;
    try {
      const command = printed
        .find((line) => line.startsWith('  npx mautic-relay authorize'))
        ?.trim();
      expect(command).toBe(`npx mautic-relay authorize --local --port ${port}`);
      // The refresher's hint names the same command: --local, and this stack's port.
      expect(printed.join('\n')).toContain(
        `Run "npx mautic-relay authorize --local --port ${port}"`,
      );

      const before = await run(
        'node',
        ['infra/cli/mautic-relay.ts', 'refresh', '--local', '--json'],
        { env, timeout: 20_000 },
      ).catch((e: { stdout: string; code: number }) => e);
      expect(JSON.parse(before.stdout)).toEqual({ refreshed: false, accessTokenSecondsLeft: null });

      // The printed command, as the operator runs it.
      const args = (command ?? '').replace('npx mautic-relay ', '').split(' ');
      const authorizing = spawn('node', ['infra/cli/mautic-relay.ts', ...args], {
        env,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      child = authorizing;
      const output: string[] = [];
      authorizing.stdout?.on('data', (chunk: Buffer) =>
        output.push(...chunk.toString().split('\n')),
      );
      authorizing.stderr?.on('data', (chunk: Buffer) =>
        output.push(...chunk.toString().split('\n')),
      );
      const exited = new Promise<number | null>((resolve) => authorizing.once('exit', resolve));
      const url = await until(
        () => output.find((line) => line.includes('/oauth/v2/authorize?')),
        15_000,
      );

      // The browser: the simulator approves at once and redirects to the callback.
      const approval = await fetch(url, { redirect: 'manual' });
      const callback = approval.headers.get('location') ?? '';
      expect(callback.startsWith(`http://127.0.0.1:${port}/callback?`)).toBe(true);
      expect((await fetch(callback)).status).toBe(200);
      expect(await exited).toBe(0);
      expect(output.join('\n')).toContain('Authorized. Tokens stored in MauticRelay/local/token');

      const after = await run(
        'node',
        ['infra/cli/mautic-relay.ts', 'refresh', '--local', '--json'],
        { env, timeout: 20_000 },
      );
      expect(JSON.parse(after.stdout)).toEqual({ refreshed: true, accessTokenSecondsLeft: 3600 });
    } finally {
      child?.kill();
      await stack.stop();
      await rm(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
