/**
 * The cold-start bench's children (bench/cold-start.ts): each bundle started in a fresh Node
 * process with a plausible environment of its own, nothing inherited: fake queue URLs and secret
 * ARNs, dummy AWS keys, the ingest's webhook secret in WEBHOOK_SECRET so it never calls Secrets
 * Manager. A first, untimed start of each runs with net, dns, dgram and fetch trapped and fails
 * the bench if anything reaches them. Timed starts run under the real Lambda runtime interface
 * client when it is installed (`aws-lambda-ric`, which needs a native build: see
 * docs/performance.md; point AWS_LAMBDA_RIC_DIR at the folder whose node_modules holds it), else
 * under a loader: performance.now() around `await import(bundle)` in a fresh process. Like
 * Lambda, the children run without --enable-source-maps.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';

/** Whose environment a bundle runs with: a function's, or none of them (the empty handler). */
export type Role = 'empty' | 'ingest' | 'batch' | 'refresh';

/** One bundle to start: a function's, its floor or the empty handler. */
export interface Bundle {
  name: string;
  role: Role;
  file: string;
  bytes: number;
  gzipBytes: number;
  mapBytes: number;
}

export interface Run {
  initMs: number;
  processMs: number;
}

const CHILD_TIMEOUT_MS = 15_000;
const RESULT_PREFIX = 'COLD_START_RESULT ';

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
const FUNCTION_ENV: Readonly<Record<Role, Readonly<Record<string, string>>>> = {
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
    // The action ledger's and Mautic's health's table (the stack sets it); not called at INIT.
    DEDUP_TABLE_NAME: 'relay-dedup',
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

interface ChildResult {
  initMs: number;
  network: string[];
}

/** Every child still running, killed when the run stops. */
export const children = new Set<ReturnType<typeof spawn>>();

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

/** An untimed start with the network trapped: fails if importing the bundle reaches out. */
export async function guardedImport(bundle: Bundle, dir: string): Promise<void> {
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

/** One timed cold start: under the runtime interface client at `ric`, or a loader without it. */
export async function timedImport(
  bundle: Bundle,
  dir: string,
  ric: string | undefined,
): Promise<Run> {
  if (ric !== undefined) return { initMs: await ricInit(bundle, dir, ric), processMs: Number.NaN };
  const { result, processMs } = await runChild(bundle, dir, []);
  if (result.network.length > 0) {
    throw new Error(`importing ${bundle.name} left ${result.network.join(', ')} open`);
  }
  return { initMs: result.initMs, processMs };
}

/** The runtime interface client's entry point, when the package is installed where we look. */
export function findRic(root: string): string | undefined {
  const roots = [process.env.AWS_LAMBDA_RIC_DIR, root].filter(
    (root): root is string => root !== undefined && root !== '',
  );
  for (const folder of roots) {
    const entry = path.join(folder, 'node_modules', 'aws-lambda-ric', 'index.mjs');
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
      AWS_LAMBDA_FUNCTION_NAME: bundle.role,
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
        new Error(
          `${bundle.name} under aws-lambda-ric exited (${signal ?? code}): ${stderr.slice(-1500)}`,
        ),
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
    POWERTOOLS_SERVICE_NAME: bundle.role,
    // Whatever the machine holds, the SDK reads no profile of it.
    AWS_CONFIG_FILE: path.join(dir, 'no-aws-config'),
    AWS_SHARED_CREDENTIALS_FILE: path.join(dir, 'no-aws-credentials'),
    ...FUNCTION_ENV[bundle.role],
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
          new Error(
            `importing ${bundle.name} failed (${why}):\n${(stderr || stdout).trim().slice(-1500)}`,
          ),
        );
        return;
      }
      const result = JSON.parse(line.slice(RESULT_PREFIX.length)) as ChildResult;
      resolve({ result, processMs: (exitedAt || performance.now()) - started, stderr });
    });
  });
}
