import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import { build } from 'esbuild';
import { describe, expect, it, onTestFinished } from 'vitest';
import { RELAY_BUNDLING, relayAliases } from '../../infra/aws/relay-function.ts';

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
