import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import { App, Duration, Stack } from 'aws-cdk-lib';
import type { CfnFunction } from 'aws-cdk-lib/aws-lambda';
import { RetentionDays } from 'aws-cdk-lib/aws-logs';
import { build } from 'esbuild';
import { describe, expect, it, onTestFinished } from 'vitest';
import { RELAY_BUNDLING, RelayFunction, relayAliases } from '../../infra/aws/relay-function.ts';

const ROOT = path.resolve(import.meta.dirname, '..', '..');

describe('RELAY_BUNDLING', () => {
  it('bundles node:http without an ES module import of it, as the same module object', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'relay-bundling-'));
    onTestFinished(() => rm(dir, { recursive: true, force: true }));
    const entry = path.join(dir, 'entry.mjs');
    await writeFile(
      entry,
      "import { Agent } from 'node:http';\nimport http from 'http';\nexport { Agent, http };\n",
    );
    const outfile = path.join(dir, 'out.mjs');

    await build({
      absWorkingDir: ROOT,
      entryPoints: [entry],
      outfile,
      bundle: true,
      platform: 'node',
      format: 'esm',
      target: RELAY_BUNDLING.target,
      banner: { js: RELAY_BUNDLING.banner },
      alias: relayAliases(),
      logLevel: 'silent',
    });
    const code = await readFile(outfile, 'utf8');
    const bundled = (await import(pathToFileURL(outfile).href)) as {
      Agent: unknown;
      http: unknown;
    };
    const real = createRequire(import.meta.url)('node:http') as { Agent: unknown };

    expect(code).not.toMatch(/from\s*["'](node:)?http["']/);
    expect(bundled.Agent).toBe(real.Agent);
    expect(bundled.http).toBe(real);
  });
});

describe("the functions' assets", () => {
  /** The refresher bundled by a synth into `outdir`: its asset hash and its source map. */
  async function synthInto(outdir: string) {
    const app = new App({ outdir });
    const stack = new Stack(app, 'Bundled');
    const refresh = new RelayFunction(stack, 'Refresh', {
      name: 'refresh',
      serviceName: 'refresh',
      metricsNamespace: 'Test',
      timeout: Duration.seconds(30),
      logRetention: RetentionDays.ONE_DAY,
      logLevel: 'INFO',
    });
    app.synth();
    const code = (refresh.function.node.defaultChild as CfnFunction).code as { s3Key?: string };
    const asset = (await readdir(outdir)).find((name) => name.startsWith('asset.')) ?? '';
    const map = JSON.parse(await readFile(path.join(outdir, asset, 'index.mjs.map'), 'utf8'));
    return { hash: code.s3Key, sources: map.sources as string[] };
  }

  it("hash the same whatever the synth's output folder: the source maps name paths from the project root", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'relay-assets-'));
    onTestFinished(() => rm(dir, { recursive: true, force: true }));

    const shallow = await synthInto(path.join(dir, 'out'));
    const deep = await synthInto(path.join(dir, 'a', 'b', 'c', 'out'));

    expect(deep.hash).toBe(shallow.hash);
    expect(shallow.sources).toContain('functions/refresh/index.ts');
    // Nor the event schemas, which the refresher never uses: building them lengthened its INIT.
    expect(shallow.sources).not.toContain('functions/core/events.ts');
    for (const source of shallow.sources)
      expect(source).toMatch(/^(functions|node_modules|infra)\//);
  }, 180_000);
});
