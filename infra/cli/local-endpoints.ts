import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import * as z from 'zod';

/**
 * Where a running `npm start` records its endpoints for the operator commands' `--local`:
 * `.mautic-relay/local.json` in the directory it runs in (the project directory; git-ignored),
 * or in `MAUTIC_RELAY_DIR` (tests, or two local stacks side by side); removed when it stops.
 */
export function localEndpointsPath(env: Readonly<Record<string, string | undefined>>): string {
  return endpointsPathIn(endpointsDir(env));
}

/** The directory that holds the endpoints file: `MAUTIC_RELAY_DIR`, else the current one. */
export function endpointsDir(env: Readonly<Record<string, string | undefined>>): string {
  return env.MAUTIC_RELAY_DIR || process.cwd();
}

/** The endpoints file in `dir`. */
export function endpointsPathIn(dir: string): string {
  return join(dir, '.mautic-relay', 'local.json');
}

const endpointsSchema = z.looseObject({
  ingestUrl: z.string(),
  sqsEndpoint: z.string(),
  queueUrl: z.string(),
  deadLetterQueueUrl: z.string(),
  secretsEndpoint: z.string(),
  tokenSecretId: z.string(),
  clientSecretId: z.string().optional(),
  /** dynalite and its de-duplication table, which holds Mautic's shared health (`status`). */
  dynamodbEndpoint: z.string().optional(),
  dedupTableName: z.string().optional(),
  /** The outcome table (contract §1.6) in the same dynalite; absent in older files. */
  outcomeTableName: z.string().optional(),
  /** The Mautic the local stack delivers to (its embedded simulator's, or MAUTIC_BASE_URL). */
  mauticUrl: z.string().optional(),
  /** The local stack's control endpoint (`POST /refresh` runs the refresher now). */
  controlUrl: z.string().optional(),
  /** Absent in files written before the senders commands: the local stack's fixed name. */
  webhookSecretId: z.string().default('MauticRelay/local/webhook'),
  /** The local stack's SOURCES_FILE, absolute; absent: it runs without sources. */
  sourcesFile: z.string().optional(),
  /** The ingest's ENTITIES and CONTACT_MATCH_FIELDS, which `sources test` checks events with. */
  entities: z.array(z.string()).optional(),
  contactMatchFields: z.array(z.string()).optional(),
  /** 0: the stack keeps no outcomes. */
  outcomeRetentionSeconds: z.number().int().optional(),
  /** The `npm start` process: a file whose process is gone is stale. */
  pid: z.number().int(),
  startedAt: z.string(),
});
export type LocalEndpoints = z.input<typeof endpointsSchema>;
type ReadEndpoints = z.output<typeof endpointsSchema>;

/** Written once the local stack is ready; the file holds addresses only, never a secret. */
export function writeLocalEndpoints(path: string, endpoints: LocalEndpoints): () => void {
  mkdirSync(dirname(path), { recursive: true });
  // Written aside and renamed, so a reader never sees half a file.
  const partial = `${path}.${process.pid}.tmp`;
  writeFileSync(partial, `${JSON.stringify(endpoints, null, 2)}\n`, { mode: 0o600 });
  renameSync(partial, path);
  return () => {
    // Another `npm start` may have taken the file over since: remove only our own.
    const current = readEndpointsFile(path);
    if (current?.pid === endpoints.pid) rmSync(path, { force: true });
  };
}

/**
 * The endpoints of the running local stack, or undefined when none runs (no file, a file that
 * cannot be read, or one left by a process that is gone).
 */
export function readLocalEndpoints(path: string): ReadEndpoints | undefined {
  const endpoints = readEndpointsFile(path);
  if (endpoints === undefined || !alive(endpoints.pid)) return undefined;
  return endpoints;
}

function readEndpointsFile(path: string): ReadEndpoints | undefined {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
  try {
    const parsed = endpointsSchema.safeParse(JSON.parse(text));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it exists but belongs to someone else.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
