import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';

/**
 * Where a running `npm start` records its endpoints, for the operator commands' `--local`: in the
 * project directory (or `MAUTIC_RELAY_DIR`), git-ignored, removed when the stack stops. Addresses
 * and names only, never a secret. Other fields may be added; readers ignore what they do not use.
 */
export const ENDPOINTS_FILE = join('.mautic-relay', 'local.json');

const localEndpointsSchema = z.looseObject({
  ingestUrl: z.string(),
  sqsEndpoint: z.string(),
  queueUrl: z.string(),
  deadLetterQueueUrl: z.string(),
  secretsEndpoint: z.string(),
  tokenSecretId: z.string(),
  clientSecretId: z.string(),
  controlUrl: z.string(),
  pid: z.number().int(),
  startedAt: z.string(),
});
export type LocalEndpoints = z.infer<typeof localEndpointsSchema>;

/** The directory that holds the endpoints file: `MAUTIC_RELAY_DIR`, else the current one. */
export function endpointsDir(env: Readonly<Record<string, string | undefined>>): string {
  return env.MAUTIC_RELAY_DIR ?? process.cwd();
}

/** Records the endpoints; the returned function removes the file if it is still this process's. */
export async function writeEndpoints(
  dir: string,
  endpoints: LocalEndpoints,
): Promise<() => Promise<void>> {
  const path = join(dir, ENDPOINTS_FILE);
  await mkdir(join(dir, '.mautic-relay'), { recursive: true });
  await writeFile(path, `${JSON.stringify(endpoints, null, 2)}\n`, { mode: 0o600 });
  return async () => {
    const current = await readRaw(path);
    if (current?.pid === endpoints.pid) await rm(path, { force: true });
  };
}

/** The running local stack's endpoints, or why there is none. */
export async function readEndpoints(
  dir: string,
): Promise<{ endpoints: LocalEndpoints } | { missing: string }> {
  const path = join(dir, ENDPOINTS_FILE);
  const raw = await readRaw(path);
  if (raw === undefined)
    return { missing: `No local stack is running here (no ${path}): start one with "npm start".` };
  const parsed = localEndpointsSchema.safeParse(raw);
  if (!parsed.success)
    return {
      missing: `${path} is not what "npm start" writes: stop the stack and start it again.`,
    };
  if (!alive(parsed.data.pid)) {
    return {
      missing: `No local stack is running (its process ${parsed.data.pid} is gone; ${path} is left over): start one with "npm start".`,
    };
  }
  return { endpoints: parsed.data };
}

async function readRaw(path: string): Promise<{ pid?: unknown } | undefined> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch {
    return undefined;
  }
  try {
    return JSON.parse(text) as { pid?: unknown };
  } catch {
    return {};
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
