import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it, onTestFinished } from 'vitest';
import { environments } from './synth.ts';

const run = promisify(execFile);

describe('the CDK app, as cdk synth runs it', () => {
  it('names a cdk.json mistake in a sentence, without a Node stack trace, and exits 1', async () => {
    const outdir = await mkdtemp(join(tmpdir(), 'relay-app-'));
    onTestFinished(() => rm(outdir, { recursive: true, force: true }));
    // What the CDK CLI hands the app: cdk.json's context, and where to write.
    const context = {
      env: 'dev',
      environments: { dev: { ...environments.dev, batchSize: 500, mauticBaseUrl: 'http://m' } },
    };

    const failure = await run('node', ['infra/aws/app.ts'], {
      env: { ...process.env, CDK_CONTEXT_JSON: JSON.stringify(context), CDK_OUTDIR: outdir },
      timeout: 60_000,
    }).catch((error: { code: number; stderr: string }) => error);

    expect(failure).toMatchObject({ code: 1 });
    const { stderr } = failure as { stderr: string };
    expect(stderr).toMatch(
      /^Invalid settings for environment "dev" in cdk.json: mauticBaseUrl .*; batchSize /,
    );
    expect(stderr).not.toMatch(/\n\s+at /);
    expect(stderr.trim().split('\n')).toHaveLength(1);
  }, 90_000);
});
