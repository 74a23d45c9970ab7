/**
 * What a cold start costs before the first request: each Lambda function's bundle as `cdk synth`
 * writes it (run here for the `dev` environment into a temporary folder), started in fresh Node
 * processes, against an empty handler bundled with the same options (RELAY_BUNDLING, exported by
 * infra/aws/relay-function.ts and translated here to esbuild's). Prints each bundle's size (index.mjs, its gzip size as an
 * approximation of the zip, and the map), its INIT time median and p90, the ratio of that median
 * to the empty handler's in the same run, and a last line `SUMMARY {json}` for scripts.
 *
 *   npm run bench:cold-start -- [runs=15]
 *
 * INIT is measured under the real Lambda runtime interface client when it is installed
 * (`aws-lambda-ric`, which needs a native build: see docs/performance.md; point AWS_LAMBDA_RIC_DIR at the
 * folder whose node_modules holds it): from spawning `node` on the client to its first
 * `GET /runtime/invocation/next` on a Runtime API served here, so Node's start, the client and the
 * handler's module initialisation all count, as in Lambda's Init duration. Without it, the bench
 * says so and falls back to a loader: performance.now() around `await import(bundle)` in a fresh
 * process. Like Lambda, the children run without --enable-source-maps.
 *
 * The children get a plausible configuration of their own: fake queue URLs and secret ARNs, dummy
 * AWS keys, the ingest's webhook secret in WEBHOOK_SECRET so it never calls Secrets Manager.
 * Nothing is contacted: a first, untimed import of each bundle runs with net, dns, dgram and fetch
 * trapped and fails the bench if anything reaches them. These are local figures, not Lambda's:
 * no code download, a warm file cache, and this machine's CPU.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import { gzipSync } from 'node:zlib';
import { type BuildOptions, build, version as esbuildVersion } from 'esbuild';
import { RELAY_BUNDLING, relayAliases } from '../infra/aws/relay-function.ts';
import { loadAverage, percentile, positiveInteger, round } from './support/figures.ts';

type Name = 'empty' | 'ingest' | 'batch' | 'refresh';

const ROOT = path.resolve(import.meta.dirname, '..');
const HANDLERS = ['ingest', 'batch', 'refresh'] as const;
const CHILD_TIMEOUT_MS = 15_000;
/** The whole run, children included, stops here whatever happens. */
const RUN_TIMEOUT_MS = 120_000;
const RESULT_PREFIX = 'COLD_START_RESULT ';
/** The environment whose stack is synthesized (cdk.json); every one bundles alike. */
const SYNTH_ENV = 'dev';

/** What every function's environment holds, fake but plausible. */
const COMMON_ENV: Readonly<Record<string, string>> = {
  AWS_REGION: 'us-east-1',
  AWS_ACCESS_KEY_ID: 'AKIAIOSFODNN7EXAMPLE',
  AWS_SECRET_ACCESS_KEY: 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY',
  AWS_EC2_METADATA_DISABLED: 'true',
  POWERTOOLS_METRICS_NAMESPACE: 'MauticBatchRelay/bench',
  POWERTOOLS_LOG_LEVEL: 'INFO',
};
const QUEUE_URL = 'https://sqs.us-east-1.amazonaws.com/123456789012/MauticRelay-bench-EventsQueue';
const DLQ_URL =
  'https://sqs.us-east-1.amazonaws.com/123456789012/MauticRelay-bench-DeadLetterQueue';
const SECRET_ARN = (name: string) =>
  `arn:aws:secretsmanager:us-east-1:123456789012:secret:MauticRelay/bench/${name}-AbCdEf`;
/** Each function's own variables (functions/shared/config.ts). */
const FUNCTION_ENV: Readonly<Record<Name, Readonly<Record<string, string>>>> = {
  empty: {},
  ingest: {
    EVENTS_QUEUE_URL: QUEUE_URL,
    // No WEBHOOK_SECRET_ID: the credentials come from here, not from Secrets Manager.
    WEBHOOK_SECRET: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
    // As the stack sets it; the table is not called at initialisation.
    DEDUP_TABLE_NAME: 'relay-dedup',
  },
  batch: {
    MAUTIC_BASE_URL: 'https://mautic.example.com',
    TOKEN_SECRET_ID: SECRET_ARN('token'),
    EVENTS_QUEUE_URL: QUEUE_URL,
    DEAD_LETTER_QUEUE_URL: DLQ_URL,
    REFRESH_FUNCTION_NAME: 'MauticRelay-bench-RefreshFunction',
  },
  refresh: {
    CLIENT_SECRET_ID: SECRET_ARN('client'),
    TOKEN_SECRET_ID: SECRET_ARN('token'),
  },
};

/**
 * Loaded with --import before the untimed first run: any use of the network fails there and is
 * reported on stderr, so the bench fails even when the handler swallows the error.
 */
const NETWORK_TRAP = `
import dgram from 'node:dgram';
import dns from 'node:dns';
import net from 'node:net';
globalThis.__networkAttempts = [];
const attempt = (what) => {
  globalThis.__networkAttempts.push(what);
  process.stderr.write('network attempt: ' + what + '\\n');
  return new Error('cold-start bench: ' + what + ' while importing the handler');
};
const throwing = (what) => function () { throw attempt(what); };
const rejecting = (what) => function () { return Promise.reject(attempt(what)); };
net.Socket.prototype.connect = throwing('net.Socket.connect');
dgram.Socket.prototype.send = throwing('dgram.Socket.send');
for (const name of ['lookup', 'resolve', 'resolve4', 'resolve6', 'resolveAny']) {
  dns[name] = throwing('dns.' + name);
  dns.promises[name] = rejecting('dns.promises.' + name);
}
globalThis.fetch = rejecting('fetch');
`;

interface Bundle {
  name: Name;
  file: string;
  bytes: number;
  gzipBytes: number;
  mapBytes: number;
}

interface Run {
  initMs: number;
  processMs: number;
}

interface ChildResult {
  initMs: number;
  network: string[];
}

const runs = positiveInteger(process.argv[2], 15, 'runs');
const children = new Set<ReturnType<typeof spawn>>();
let workDir: string | undefined;
const watchdog = setTimeout(() => {
  console.error(`bench:cold-start: the run took longer than ${RUN_TIMEOUT_MS / 1000} s; stopping`);
  for (const child of children) child.kill('SIGKILL');
  if (workDir !== undefined) void rm(workDir, { recursive: true, force: true });
  process.exitCode = 1;
  setTimeout(() => process.exit(1), 1000).unref();
}, RUN_TIMEOUT_MS);
watchdog.unref();

const ric = findRic();
try {
  workDir = await mkdtemp(path.join(tmpdir(), 'mautic-cold-start-'));
  const bundles = await bundleAll(workDir);
  const empty = bundles[0] as Bundle;
  // Untimed first import of each bundle: proves that importing contacts nothing, and leaves the
  // bundle in the file cache for every timed run alike.
  for (const bundle of bundles) await guardedImport(bundle, workDir);
  const timings = new Map<Name, Run[]>(bundles.map((bundle) => [bundle.name, []]));
  for (let round = 0; round < runs; round++) {
    // Rotated each round, so no bundle always runs right after another.
    for (let i = 0; i < bundles.length; i++) {
      const bundle = bundles[(round + i) % bundles.length] as Bundle;
      timings.get(bundle.name)?.push(await timedImport(bundle, workDir));
    }
  }
  print(bundles, timings, empty);
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
 * The empty handler, bundled here with RELAY_BUNDLING, then the three functions' bundles as
 * `cdk synth` writes them (the stack's own NodejsFunction bundling, into this run's folder).
 */
async function bundleAll(dir: string): Promise<Bundle[]> {
  const emptyEntry = path.join(dir, 'empty-handler.ts');
  await writeFile(emptyEntry, 'export const handler = async () => {};\n');
  const emptyFile = path.join(dir, 'empty', 'index.mjs');
  // What `esbuild --bundle` gets from NodejsFunction with the stack's bundling props.
  await build({
    ...esbuildOptions(),
    absWorkingDir: ROOT,
    entryPoints: [emptyEntry],
    outfile: emptyFile,
    bundle: true,
    platform: 'node',
    logLevel: 'warning',
  });
  const files: Array<[Name, string]> = [['empty', emptyFile], ...(await synthBundles(dir))];
  return Promise.all(
    files.map(async ([name, file]) => {
      const code = await readFile(file);
      return {
        name,
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
async function synthBundles(dir: string): Promise<Array<[Name, string]>> {
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
  return HANDLERS.map((name): [Name, string] => {
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

/** The child's program: the import alone is timed, and the result is one marked JSON line. */
function importScript(bundle: Bundle): string {
  return `
const before = performance.now();
const module = await import(${JSON.stringify(pathToFileURL(bundle.file).href)});
const after = performance.now();
if (typeof module.handler !== 'function') throw new Error('the bundle exports no handler');
const network = [
  ...(globalThis.__networkAttempts ?? []),
  ...process.getActiveResourcesInfo().filter((kind) => /TCP|TLS|UDP|GetAddrInfo|HTTP/.test(kind)),
];
console.log(${JSON.stringify(RESULT_PREFIX)} + JSON.stringify({ initMs: after - before, network }));
`;
}

async function guardedImport(bundle: Bundle, dir: string): Promise<void> {
  const trap = path.join(dir, 'network-trap.mjs');
  await writeFile(trap, NETWORK_TRAP);
  const { result, stderr } = await runChild(bundle, dir, ['--import', pathToFileURL(trap).href]);
  // Also what was attempted after the import settled, up to the child's exit.
  const late = [...stderr.matchAll(/^network attempt: (.*)$/gm)].map((match) => match[1]);
  if (result.network.length > 0 || late.length > 0) {
    const what = [...new Set([...result.network, ...late])].join(', ');
    throw new Error(`importing ${bundle.name} used the network: ${what}`);
  }
}

async function timedImport(bundle: Bundle, dir: string): Promise<Run> {
  if (ric !== undefined) return { initMs: await ricInit(bundle, dir, ric), processMs: Number.NaN };
  const { result, processMs } = await runChild(bundle, dir, []);
  if (result.network.length > 0) {
    throw new Error(`importing ${bundle.name} left ${result.network.join(', ')} open`);
  }
  return { initMs: result.initMs, processMs };
}

/** The runtime interface client's entry point, when the package is installed where we look. */
function findRic(): string | undefined {
  const roots = [process.env.AWS_LAMBDA_RIC_DIR, ROOT].filter(
    (root): root is string => root !== undefined && root !== '',
  );
  for (const root of roots) {
    const entry = path.join(root, 'node_modules', 'aws-lambda-ric', 'index.mjs');
    if (existsSync(entry)) return entry;
  }
  return undefined;
}

/**
 * One cold start under the real runtime interface client: the time from spawning it to its
 * first request for an invocation, which it makes once the handler module is initialised.
 */
async function ricInit(bundle: Bundle, dir: string, entry: string): Promise<number> {
  let started = 0;
  let resolveNext!: (at: number) => void;
  const firstNext = new Promise<number>((resolve) => {
    resolveNext = resolve;
  });
  const initErrors: string[] = [];
  const server = createServer((req, res) => {
    if (req.method === 'GET' && req.url?.endsWith('/runtime/invocation/next')) {
      resolveNext(performance.now());
      return; // held: the bench stops the client before any invocation
    }
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      if (req.url?.includes('/init/error')) initErrors.push(Buffer.concat(chunks).toString());
      res.writeHead(202).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const child = spawn(process.execPath, [entry], {
    cwd: path.dirname(bundle.file),
    env: {
      ...childEnv(bundle, dir),
      _HANDLER: 'index.handler',
      LAMBDA_TASK_ROOT: path.dirname(bundle.file),
      AWS_LAMBDA_RUNTIME_API: `127.0.0.1:${port}`,
      AWS_LAMBDA_FUNCTION_NAME: bundle.name,
      AWS_LAMBDA_FUNCTION_MEMORY_SIZE: '512',
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  children.add(child);
  started = performance.now();
  let stderr = '';
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
  });
  const exited = new Promise<never>((_, reject) =>
    child.once('exit', (code, signal) =>
      reject(
        new Error(`${bundle.name} under aws-lambda-ric exited (${signal ?? code}): ${stderr}`),
      ),
    ),
  );
  const timeout = new Promise<never>((_, reject) =>
    setTimeout(
      () =>
        reject(new Error(`${bundle.name}: no invocation request within ${CHILD_TIMEOUT_MS} ms`)),
      CHILD_TIMEOUT_MS,
    ).unref(),
  );
  try {
    const at = await Promise.race([firstNext, exited, timeout]);
    if (initErrors.length > 0) throw new Error(`${bundle.name} failed INIT: ${initErrors[0]}`);
    return at - started;
  } finally {
    exited.catch(() => undefined);
    child.kill('SIGKILL');
    children.delete(child);
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

/** Each function's environment of its own; nothing inherited from this process. */
function childEnv(bundle: Bundle, dir: string): Record<string, string> {
  return {
    ...COMMON_ENV,
    PATH: process.env.PATH ?? '',
    POWERTOOLS_SERVICE_NAME: bundle.name,
    // Whatever the machine holds, the SDK reads no profile of it.
    AWS_CONFIG_FILE: path.join(dir, 'no-aws-config'),
    AWS_SHARED_CREDENTIALS_FILE: path.join(dir, 'no-aws-credentials'),
    ...FUNCTION_ENV[bundle.name],
  };
}

/** One fresh Node process importing the bundle; its own environment, nothing inherited. */
function runChild(
  bundle: Bundle,
  dir: string,
  flags: string[],
): Promise<{ result: ChildResult; processMs: number; stderr: string }> {
  const env = childEnv(bundle, dir);
  const args = [...flags, '--input-type=module', '--eval', importScript(bundle)];
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(process.execPath, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    children.add(child);
    let stdout = '';
    let stderr = '';
    let exitedAt = 0;
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk;
    });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), CHILD_TIMEOUT_MS);
    child.on('exit', () => {
      exitedAt = performance.now();
    });
    child.on('error', (error) => {
      clearTimeout(timer);
      children.delete(child);
      reject(error);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      children.delete(child);
      const line = stdout.split('\n').find((text) => text.startsWith(RESULT_PREFIX));
      if (code !== 0 || line === undefined) {
        const why =
          signal === 'SIGKILL' ? `no exit within ${CHILD_TIMEOUT_MS} ms` : (signal ?? code);
        reject(
          new Error(`importing ${bundle.name} failed (${why}):\n${(stderr || stdout).trim()}`),
        );
        return;
      }
      const result = JSON.parse(line.slice(RESULT_PREFIX.length)) as ChildResult;
      resolve({ result, processMs: (exitedAt || performance.now()) - started, stderr });
    });
  });
}

function print(bundles: ReadonlyArray<Bundle>, timings: Map<Name, Run[]>, empty: Bundle): void {
  const figures = (bundle: Bundle) => {
    const list = timings.get(bundle.name) ?? [];
    const init = list.map((run) => run.initMs).sort((a, b) => a - b);
    const whole = list.map((run) => run.processMs).sort((a, b) => a - b);
    return {
      initP50: percentile(init, 0.5),
      initP90: percentile(init, 0.9),
      processP50: percentile(whole, 0.5),
    };
  };
  const baseline = figures(empty);
  const bytes = (value: number) => value.toLocaleString('en-US');
  const ms = (value: number) => value.toFixed(1);

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
    `bundles: ingest, batch and refresh from \`cdk synth -c env=${SYNTH_ENV}\` (NodejsFunction with RELAY_BUNDLING); empty: esbuild with RELAY_BUNDLING`,
  );
  console.log(
    `${'bundle'.padEnd(9)}${'index.mjs B'.padStart(13)}${'gzip B'.padStart(11)}` +
      `${'.map B'.padStart(12)}${'init p50 ms'.padStart(13)}${'init p90 ms'.padStart(13)}` +
      `${'× empty'.padStart(9)}${'+ms empty'.padStart(11)}` +
      // Spawn to exit is timed under the loader only; the runtime client never exits by itself.
      (ric === undefined ? 'process p50 ms'.padStart(16) : ''),
  );
  for (const bundle of bundles) {
    const f = figures(bundle);
    console.log(
      `${bundle.name.padEnd(9)}${bytes(bundle.bytes).padStart(13)}` +
        `${bytes(bundle.gzipBytes).padStart(11)}${bytes(bundle.mapBytes).padStart(12)}` +
        `${ms(f.initP50).padStart(13)}${ms(f.initP90).padStart(13)}` +
        `${`${(f.initP50 / baseline.initP50).toFixed(1)}x`.padStart(9)}` +
        `${ms(f.initP50 - baseline.initP50).padStart(11)}` +
        (ric === undefined ? ms(f.processP50).padStart(16) : ''),
    );
  }
  console.log(
    `× / +ms empty: init p50 against the empty handler in this run;${ric === undefined ? ' process: spawn to exit;' : ''} ` +
      'gzip: index.mjs alone (the deployed zip also holds the map)',
  );
  const worst = Math.max(...bundles.filter((b) => b !== empty).map((b) => figures(b).initP50));
  console.log(
    `SUMMARY ${JSON.stringify({
      figure: 'cold_start_init_ratio',
      value: round(worst / baseline.initP50, 2),
      runtime: ric === undefined ? 'loader' : 'aws-lambda-ric',
      bundles: 'cdk-synth',
      baseline_empty_init_ms_p50: round(baseline.initP50, 1),
      ...Object.fromEntries(
        bundles
          .filter((b) => b !== empty)
          .flatMap((b) => [
            [`${b.name}_init_ms_p50`, round(figures(b).initP50, 1)],
            [`${b.name}_bytes`, b.bytes],
          ]),
      ),
      runs,
      load_average: loadavg().map((value) => round(value, 2)),
    })}`,
  );
}
