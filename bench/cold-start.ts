/**
 * What a cold start costs before the first request: each Lambda function's bundle as `cdk synth`
 * writes it (run here for the `dev` environment into a temporary folder), started in fresh Node
 * processes, against its floor (bench/support/floors: an empty handler that imports and
 * constructs the same AWS SDK clients, which the function cannot avoid) and an empty handler,
 * both bundled with the same options (RELAY_BUNDLING, exported by infra/aws/relay-function.ts
 * and translated here to esbuild's). Prints each bundle's size (index.mjs, its gzip size as an
 * approximation of the zip, and the map), its INIT time median and p90, each function's median
 * against its floor's and the empty handler's in the same run, and a last line `SUMMARY {json}`
 * for scripts (`ingestFloorRatio`, `batchFloorRatio`, `refreshFloorRatio`).
 *
 *   npm run bench:cold-start -- [runs=15]
 *
 * INIT is measured under the real Lambda runtime interface client when it is installed
 * (bench/support/cold-start-children.ts says how), from spawning `node` on the client to its first
 * `GET /runtime/invocation/next`, so Node's start, the client and the handler's module
 * initialisation all count, as in Lambda's Init duration; without it, under a loader. The
 * children get a plausible configuration of their own and contact nothing: a first, untimed
 * import of each bundle runs with the network trapped. These are local figures, not Lambda's:
 * no code download, a warm file cache, and this machine's CPU.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import * as path from 'node:path';
import { gzipSync } from 'node:zlib';
import { type BuildOptions, build, version as esbuildVersion } from 'esbuild';
import { RELAY_BUNDLING, relayAliases } from '../infra/aws/relay-function.ts';
import {
  type Bundle,
  children,
  findRic,
  guardedImport,
  type Role,
  type Run,
  timedImport,
} from './support/cold-start-children.ts';
import { loadAverage, percentile, positiveInteger, round } from './support/figures.ts';

type FunctionName = 'ingest' | 'batch' | 'refresh';

const ROOT = path.resolve(import.meta.dirname, '..');
const HANDLERS = ['ingest', 'batch', 'refresh'] as const;
/** The whole run, children included, stops here whatever happens. */
const RUN_TIMEOUT_MS = 240_000;
/** The environment whose stack is synthesized (cdk.json); every one bundles alike. */
const SYNTH_ENV = 'dev';

const runs = positiveInteger(process.argv[2], 15, 'runs');
let workDir: string | undefined;
const watchdog = setTimeout(() => {
  console.error(`bench:cold-start: the run took longer than ${RUN_TIMEOUT_MS / 1000} s; stopping`);
  for (const child of children) child.kill('SIGKILL');
  if (workDir !== undefined) void rm(workDir, { recursive: true, force: true });
  process.exitCode = 1;
  setTimeout(() => process.exit(1), 1000).unref();
}, RUN_TIMEOUT_MS);
watchdog.unref();

const ric = findRic(ROOT);
try {
  workDir = await mkdtemp(path.join(tmpdir(), 'mautic-cold-start-'));
  const bundles = await bundleAll(workDir);
  // Untimed first import of each bundle: proves that importing contacts nothing, and leaves the
  // bundle in the file cache for every timed run alike.
  for (const bundle of bundles) await guardedImport(bundle, workDir);
  const timings = new Map<string, Run[]>(bundles.map((bundle) => [bundle.name, []]));
  for (let round = 0; round < runs; round++) {
    // Rotated each round, so no bundle always runs right after another.
    for (let i = 0; i < bundles.length; i++) {
      const bundle = bundles[(round + i) % bundles.length] as Bundle;
      timings.get(bundle.name)?.push(await timedImport(bundle, workDir, ric));
    }
  }
  print(bundles, timings);
} catch (error) {
  console.error(`bench:cold-start failed: ${error instanceof Error ? error.message : error}`);
  process.exitCode = 1;
} finally {
  for (const child of children) child.kill('SIGKILL');
  if (workDir !== undefined) await rm(workDir, { recursive: true, force: true });
  clearTimeout(watchdog);
}

/**
 * RELAY_BUNDLING as the esbuild options NodejsFunction passes for it. A setting this does not
 * know fails the bench, so the two cannot silently part.
 */
function esbuildOptions(): BuildOptions {
  const {
    format,
    target,
    mainFields,
    sourceMap,
    sourcesContent,
    minify,
    externalModules,
    banner,
    esbuildArgs,
  } = RELAY_BUNDLING;
  const known = new Set([
    'format',
    'target',
    'mainFields',
    'sourceMap',
    'sourcesContent',
    'minify',
    'externalModules',
    'banner',
    'esbuildArgs',
  ]);
  const unknown = Object.keys(RELAY_BUNDLING).filter((key) => !known.has(key));
  if (unknown.length > 0) {
    throw new Error(
      `RELAY_BUNDLING sets ${unknown.join(', ')}, which bench/cold-start.ts does not translate yet`,
    );
  }
  const unknownArgs = Object.keys(esbuildArgs).filter((key) => key !== '--alias');
  if (unknownArgs.length > 0) {
    throw new Error(
      `RELAY_BUNDLING.esbuildArgs sets ${unknownArgs.join(', ')}, which bench/cold-start.ts does not translate yet`,
    );
  }
  return {
    format: format === 'esm' ? 'esm' : 'cjs',
    // `--alias:name=path`, as NodejsFunction passes each entry of the '--alias' list.
    alias: relayAliases(),
    target,
    mainFields: [...mainFields],
    sourcemap: sourceMap,
    sourcesContent,
    minify,
    external: [...externalModules],
    banner: { js: banner },
  };
}

/**
 * The empty handler and each function's floor (bench/support/floors: the same SDK clients,
 * constructed as at INIT, and nothing else), bundled here with RELAY_BUNDLING, then the three
 * functions' bundles as `cdk synth` writes them (the stack's own NodejsFunction bundling, into
 * this run's folder).
 */
async function bundleAll(dir: string): Promise<Bundle[]> {
  const emptyEntry = path.join(dir, 'empty-handler.ts');
  await writeFile(emptyEntry, 'export const handler = async () => {};\n');
  const built: Array<[string, Role, string]> = [['empty', 'empty', emptyEntry]];
  for (const name of HANDLERS) {
    built.push([
      `${name}-floor`,
      name,
      path.join(ROOT, 'bench', 'support', 'floors', `${name}.ts`),
    ]);
  }
  const files: Array<[string, Role, string]> = [];
  for (const [name, role, entry] of built) {
    const outfile = path.join(dir, name, 'index.mjs');
    // What `esbuild --bundle` gets from NodejsFunction with the stack's bundling props.
    await build({
      ...esbuildOptions(),
      absWorkingDir: ROOT,
      entryPoints: [entry],
      outfile,
      bundle: true,
      platform: 'node',
      logLevel: 'warning',
    });
    files.push([name, role, outfile]);
  }
  for (const [name, file] of await synthBundles(dir)) files.push([name, name, file]);
  return Promise.all(
    files.map(async ([name, role, file]) => {
      const code = await readFile(file);
      return {
        name,
        role,
        file,
        bytes: code.length,
        gzipBytes: gzipSync(code).length,
        mapBytes: (await stat(`${file}.map`)).size,
      };
    }),
  );
}

/**
 * Runs `cdk synth` for the `dev` environment into `dir` and finds each function's bundle from the
 * template: the asset folder of the Lambda function whose logical id starts with its name.
 */
async function synthBundles(dir: string): Promise<Array<[FunctionName, string]>> {
  const out = path.join(dir, 'cdk.out');
  const cdk = path.join(ROOT, 'node_modules', 'aws-cdk', 'bin', 'cdk');
  await new Promise<void>((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [cdk, 'synth', '--no-notices', '-q', '-c', `env=${SYNTH_ENV}`, '-o', out],
      {
        cwd: ROOT,
        // The app runs as `node infra/aws/app.ts` (cdk.json): this Node, not the machine's.
        env: {
          ...process.env,
          CDK_DISABLE_CLI_TELEMETRY: 'true',
          PATH: `${path.dirname(process.execPath)}${path.delimiter}${process.env.PATH ?? ''}`,
        },
        stdio: ['ignore', 'ignore', 'pipe'],
      },
    );
    children.add(child);
    let stderr = '';
    child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
    });
    child.once('error', reject);
    child.once('close', (code) => {
      children.delete(child);
      if (code === 0) resolve();
      else reject(new Error(`cdk synth exited ${code}:\n${stderr.trim().slice(-2000)}`));
    });
  });
  const template = JSON.parse(
    await readFile(path.join(out, `MauticRelay-${SYNTH_ENV}.template.json`), 'utf8'),
  ) as {
    Resources: Record<string, { Type: string; Metadata?: Record<string, unknown> }>;
  };
  return HANDLERS.map((name): [FunctionName, string] => {
    const prefix = `${name[0]?.toUpperCase()}${name.slice(1)}Function`;
    const found = Object.entries(template.Resources).find(
      ([id, resource]) => resource.Type === 'AWS::Lambda::Function' && id.startsWith(prefix),
    );
    const asset = found?.[1].Metadata?.['aws:asset:path'];
    if (typeof asset !== 'string') {
      throw new Error(`the synthesized template has no ${prefix} with a bundled asset`);
    }
    return [name, path.join(out, asset, 'index.mjs')];
  });
}

interface Figures {
  initP50: number;
  initP90: number;
  processP50: number;
}

function figuresOf(timings: Map<string, Run[]>, name: string): Figures {
  const list = timings.get(name) ?? [];
  const init = list.map((run) => run.initMs).sort((a, b) => a - b);
  const whole = list.map((run) => run.processMs).sort((a, b) => a - b);
  return {
    initP50: percentile(init, 0.5),
    initP90: percentile(init, 0.9),
    processP50: percentile(whole, 0.5),
  };
}

/** Milliseconds as the tables print them (a declaration: print runs before this line is reached). */
function ms(value: number): string {
  return value.toFixed(1);
}

function print(bundles: ReadonlyArray<Bundle>, timings: Map<string, Run[]>): void {
  const figures = (name: string) => figuresOf(timings, name);
  const baseline = figures('empty');
  const bytes = (value: number) => value.toLocaleString('en-US');
  console.log(
    `cold start: ${runs} fresh processes per bundle (after one untimed, network-trapped import), ` +
      `node ${process.version}, esbuild ${esbuildVersion}, ${availableParallelism()} CPUs, ` +
      `load ${loadAverage()}`,
  );
  console.log(
    ric === undefined
      ? 'INIT under a loader (import() timed in the child): aws-lambda-ric is not installed here'
      : `INIT under the real runtime interface client (${path.relative(ROOT, ric) || ric}): spawn to its first /next`,
  );
  console.log(
    `bundles: ingest, batch and refresh from \`cdk synth -c env=${SYNTH_ENV}\` (NodejsFunction with RELAY_BUNDLING); ` +
      'empty and the floors (bench/support/floors) by esbuild with RELAY_BUNDLING',
  );
  console.log(
    `${'bundle'.padEnd(14)}${'index.mjs B'.padStart(13)}${'gzip B'.padStart(11)}` +
      `${'.map B'.padStart(12)}${'init p50 ms'.padStart(13)}${'init p90 ms'.padStart(13)}` +
      // Spawn to exit is timed under the loader only; the runtime client never exits by itself.
      (ric === undefined ? 'process p50 ms'.padStart(16) : ''),
  );
  for (const bundle of bundles) {
    const f = figures(bundle.name);
    console.log(
      `${bundle.name.padEnd(14)}${bytes(bundle.bytes).padStart(13)}` +
        `${bytes(bundle.gzipBytes).padStart(11)}${bytes(bundle.mapBytes).padStart(12)}` +
        `${ms(f.initP50).padStart(13)}${ms(f.initP90).padStart(13)}` +
        (ric === undefined ? ms(f.processP50).padStart(16) : ''),
    );
  }
  console.log(
    `gzip: index.mjs alone (the deployed zip also holds the map)${ric === undefined ? '; process: spawn to exit' : ''}`,
  );
  printRatios(figures, baseline, new Map(bundles.map((b) => [b.name, b.bytes])));
}

/** Each function's INIT p50 against its floor's and the empty handler's, then the SUMMARY line. */
function printRatios(
  figures: (name: string) => Figures,
  baseline: Figures,
  sizes: Map<string, number>,
): void {
  console.log(
    `${'function'.padEnd(10)}${'init p50 ms'.padStart(13)}${'floor ms'.padStart(10)}` +
      `${'× floor'.padStart(9)}${'+ms floor'.padStart(11)}${'empty ms'.padStart(10)}` +
      `${'× empty'.padStart(9)}`,
  );
  const ratios: Record<string, number> = {};
  for (const name of HANDLERS) {
    const own = figures(name).initP50;
    const floor = figures(`${name}-floor`).initP50;
    ratios[name] = own / floor;
    console.log(
      `${name.padEnd(10)}${ms(own).padStart(13)}${ms(floor).padStart(10)}` +
        `${`${(own / floor).toFixed(2)}x`.padStart(9)}${ms(own - floor).padStart(11)}` +
        `${ms(baseline.initP50).padStart(10)}${`${(own / baseline.initP50).toFixed(1)}x`.padStart(9)}`,
    );
  }
  console.log(
    '× floor: init p50 against an empty handler that imports and constructs the same AWS SDK ' +
      'clients (bench/support/floors), bundled alike, in this run; × empty: against an empty handler',
  );
  const worst = Math.max(...HANDLERS.map((name) => figures(name).initP50));
  console.log(
    `SUMMARY ${JSON.stringify({
      figure: 'cold_start_init_ratio',
      value: round(worst / baseline.initP50, 2),
      ingestFloorRatio: round(ratios.ingest ?? Number.NaN, 2),
      batchFloorRatio: round(ratios.batch ?? Number.NaN, 2),
      refreshFloorRatio: round(ratios.refresh ?? Number.NaN, 2),
      runtime: ric === undefined ? 'loader' : 'aws-lambda-ric',
      bundles: 'cdk-synth',
      baseline_empty_init_ms_p50: round(baseline.initP50, 1),
      ...Object.fromEntries(
        HANDLERS.flatMap((name) => [
          [`${name}_init_ms_p50`, round(figures(name).initP50, 1)],
          [`${name}_bytes`, sizes.get(name)],
          [`${name}_floor_init_ms_p50`, round(figures(`${name}-floor`).initP50, 1)],
        ]),
      ),
      runs,
      load_average: loadavg().map((value) => round(value, 2)),
    })}`,
  );
}
