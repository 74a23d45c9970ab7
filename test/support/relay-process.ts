import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseWebhookSecret, signWebhook } from '../../functions/core/ingest/webhook-auth.ts';
import { runCli } from '../../infra/cli/cli.ts';
import {
  DEFAULT_SIMULATOR_CLIENT,
  type MauticSimulator,
  type MauticSimulatorOptions,
  startMauticSimulator,
} from '../../mautic-simulator/server.ts';
import { freePort } from './net.ts';
import { until } from './until.ts';

/** Helpers for end-to-end tests that run `npm start` as a user would. */

const SECRET = `whsec_${randomBytes(32).toString('base64')}`;
const KEY = parseWebhookSecret(SECRET);
let running: { child: ChildProcess; sim: MauticSimulator | undefined; dir: string } | undefined;
let cleanupDir = '';
let messageCount = 0;

/** Stops the relay and the simulator a test started; call it in `afterEach`. */
export async function stopRunning(): Promise<void> {
  if (running) {
    const { child, sim, dir } = running;
    running = undefined;
    cleanupDir = dir;
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      try {
        process.kill(-(child.pid ?? 0), 'SIGKILL');
        await exited;
      } catch {
        // The process group is already gone.
      }
    }
    await sim?.close();
    rmSync(cleanupDir, { recursive: true, force: true });
  }
}

/** Starts `npm start` as a user would, against its own Mautic simulator, and waits until it is ready. */
export async function startRelay(
  simOptions: MauticSimulatorOptions,
  env: Record<string, string> = {},
) {
  const sim = await startMauticSimulator(simOptions);
  // Its own directory for the endpoints file, so relays of tests running side by side and the
  // operator commands each find theirs.
  const dir = mkdtempSync(join(tmpdir(), 'relay-e2e-'));
  const mautic = {
    MAUTIC_BASE_URL: sim.url,
    MAUTIC_CLIENT_ID: DEFAULT_SIMULATOR_CLIENT.clientId,
    MAUTIC_CLIENT_SECRET: DEFAULT_SIMULATOR_CLIENT.clientSecret,
  };
  const started = await startUntilReady(sim, dir, { ...mautic, ...env });
  return { sim, ...started, dir };
}

/**
 * Starts `npm start` as a newcomer does, with its embedded Mautic (no MAUTIC_BASE_URL), and waits
 * until it is ready; the operator commands (`mautic --local`) read that Mautic.
 */
export async function startFreshRelay(env: Record<string, string> = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'relay-e2e-'));
  const started = await startUntilReady(undefined, dir, env);
  return { ...started, dir };
}

async function startUntilReady(
  sim: MauticSimulator | undefined,
  dir: string,
  env: Record<string, string>,
) {
  // A free port can be taken by a test running beside this one before npm start binds it: then
  // it exits naming the port, and another is tried (three at most).
  for (let attempt = 1; ; attempt++) {
    const started = await spawnRelay(sim, dir, env);
    const retry = started.portTaken && env.PORT === undefined && attempt < 3;
    if (!retry) {
      if (!started.ready) throw new Error(`not ready: ${started.output.join('\n')}`);
      return { child: started.child, output: started.output, url: started.url };
    }
  }
}

/** One `npm start`, until it says it is ready or exits (bounded). */
async function spawnRelay(
  sim: MauticSimulator | undefined,
  dir: string,
  env: Record<string, string>,
) {
  const port = env.PORT === undefined ? await freePort() : Number(env.PORT);
  const inherited = { ...process.env };
  // The embedded Mautic is used only when none is named.
  for (const name of ['MAUTIC_BASE_URL', 'MAUTIC_CLIENT_ID', 'MAUTIC_CLIENT_SECRET'])
    delete inherited[name];
  const child = spawn('npm', ['start'], {
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      ...inherited,
      PORT: String(port),
      WEBHOOK_SECRET: SECRET,
      BATCH_WINDOW_SECONDS: '1',
      MAUTIC_RELAY_DIR: dir,
      ...env,
    },
  });
  running = { child, sim, dir };
  const output: string[] = [];
  child.stdout?.on('data', (chunk: Buffer) => output.push(...chunk.toString().split('\n')));
  child.stderr?.on('data', (chunk: Buffer) => output.push(...chunk.toString().split('\n')));
  const url = `http://127.0.0.1:${port}/events`;
  const ready = () => output.some((line) => line.startsWith('Ready:') && line.includes(url));
  const exited = () => child.exitCode !== null || child.signalCode !== null;
  await until(
    // The last line, printed once the endpoints file for the operator commands is written.
    () => ready() || exited(),
    30_000,
    () => `not ready: ${output.join('\n')}`,
  );
  const portTaken = !ready() && output.some((line) => line.includes('EADDRINUSE'));
  return { child, output, url, ready: ready(), portTaken };
}

/** `body` posted signed under `id` now, with `headers` over the signed ones. */
function signedPost(url: string, id: string, body: string, headers: Record<string, string> = {}) {
  const timestamp = Math.floor(Date.now() / 1000);
  return fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'webhook-id': id,
      'webhook-timestamp': String(timestamp),
      'webhook-signature': signWebhook(KEY, id, timestamp, new TextEncoder().encode(body)),
      ...headers,
    },
    body,
  });
}

/**
 * GET `path` of the relay's ingest (`url` is its `/events`), as a sender asks what became of its
 * events (contract §1.6): signed with the relay's webhook secret over the empty body, or with
 * `apiKey`. The answer's status and text as sent.
 */
export async function getAs(url: string, path: string, apiKey?: string) {
  messageCount++;
  const id = `get_e2e${messageCount}`;
  const timestamp = Math.floor(Date.now() / 1000);
  const headers: Record<string, string> =
    apiKey === undefined
      ? {
          'webhook-id': id,
          'webhook-timestamp': String(timestamp),
          'webhook-signature': signWebhook(KEY, id, timestamp, new Uint8Array()),
        }
      : { authorization: `Bearer ${apiKey}` };
  const response = await fetch(`${url.replace(/\/events$/, '')}${path}`, { headers });
  return { status: response.status, text: await response.text() };
}

/** The webhook secret the relays of these helpers are started with, to check nothing echoes it. */
export const RELAY_SECRET = SECRET;

/** Posts `body` signed under the given `webhook-id` now; the answer's text as sent. */
export async function postAs(url: string, id: string, body: string) {
  const response = await signedPost(url, id, body);
  return { status: response.status, text: await response.text() };
}

/** Posts `body` signed under a new `webhook-id`; the answer's status and JSON. */
export async function post(url: string, body: string, headers: Record<string, string> = {}) {
  messageCount++;
  const response = await signedPost(url, `msg_e2e${messageCount}`, body, headers);
  return {
    status: response.status,
    body: (await response.json()) as {
      accepted?: number;
      eventIds?: string[];
      error?: { code: string };
    },
  };
}

export async function stop(
  child: ChildProcess,
): Promise<{ code: number | null; signal: string | null }> {
  const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  // Ctrl-C reaches the whole foreground process group: npm and the relay under it.
  process.kill(-(child.pid ?? 0), 'SIGINT');
  const timeout = new Promise<'timeout'>((resolve) => setTimeout(() => resolve('timeout'), 15_000));
  const result = await Promise.race([exited, timeout]);
  if (result === 'timeout') throw new Error('the relay did not stop within 15 s');
  return result;
}

export const contacts = (count: number, prefix: string) =>
  Array.from({ length: count }, (_, i) => ({
    entity: 'contacts',
    action: 'create',
    data: { email: `${prefix}${i}@example.com`, firstname: `N${i}` },
  }));

/** The dead letters the relay reported, by event id: its one line per dead-lettered event. */
export function deadLettered(output: readonly string[]): Map<string, string> {
  const letters = new Map<string, string>();
  for (const line of output) {
    const match = /^dead-lettered (\S+) \(\S+ \S+\): (\S+)/.exec(line);
    if (match?.[1] && match[2]) letters.set(match[1], match[2]);
  }
  return letters;
}

/**
 * The dead letters of the relay running from `dir`, read from its dead-letter queue with the
 * operator command (`dead-letters --local --json`): event id → reason, and how many letters each
 * event has.
 */
export async function deadLettersIn(dir: string) {
  const { code, out, err } = await operatorCommand(
    ['dead-letters', '--local', '--json', '--limit', '100000'],
    { MAUTIC_RELAY_DIR: dir, MAUTIC_RELAY_HIDE_SECONDS: '2' },
  );
  if (code !== 0) throw new Error(`dead-letters exited ${code}: ${err}`);
  const { items } = JSON.parse(out) as { items: Array<{ eventId: string; reason: string }> };
  const reasons = new Map<string, string>();
  const letters = new Map<string, number>();
  for (const item of items) {
    reasons.set(item.eventId, item.reason);
    letters.set(item.eventId, (letters.get(item.eventId) ?? 0) + 1);
  }
  return { reasons, letters };
}

/** Records a create call applied: the items of every 2xx `batch/new` of `entity`. */
export function itemsCreated(sim: MauticSimulator, entity: string): number {
  return sim.requests
    .filter((r) => r.path === `/api/${entity}/batch/new` && r.status >= 200 && r.status < 300)
    .reduce((sum, r) => sum + (r.items ?? 0), 0);
}

/** One operator command run in this process, as the bin runs it: exit code, stdout, stderr. */
export async function operatorCommand(argv: string[], env: Record<string, string>) {
  const out: string[] = [];
  let err = '';
  const code = await runCli(argv, {
    stdout: (line) => out.push(line),
    stderr: (text) => {
      err += text;
    },
    env,
    progressBar: false,
    now: Date.now,
    sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
    interrupted: () => false,
    readStdin: async () => new Uint8Array(),
    readSecret: async () => '',
  });
  return { code, out: out.join('\n'), err };
}

/** Whether the relay running from `dir` has no event left on its queue (`status --local --json`). */
export async function drained(dir: string): Promise<boolean> {
  const { code, out } = await operatorCommand(['status', '--local', '--json'], {
    MAUTIC_RELAY_DIR: dir,
  });
  if (code !== 0) return false;
  const { queue } = JSON.parse(out) as {
    queue: { visible: number; inFlight: number; delayed: number };
  };
  return queue.visible + queue.inFlight + queue.delayed === 0;
}

/** GET `path` from the simulator with a token of its own: the answer's JSON. */
export async function simulatorGet(
  sim: MauticSimulator,
  path: string,
): Promise<Record<string, unknown>> {
  const response = await fetch(`${sim.url}${path}`, {
    headers: { authorization: `Bearer ${sim.issueToken().accessToken}` },
  });
  return (await response.json()) as Record<string, unknown>;
}
