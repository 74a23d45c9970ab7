import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { GetSecretValueCommand } from '@aws-sdk/client-secrets-manager';
import { CredentialError } from '../../functions/core/errors.ts';
import { readSenderCredentials } from '../../functions/core/ingest/sender-credentials.ts';
import {
  parseApiKey,
  parseWebhookSecret,
  signWebhook,
} from '../../functions/core/ingest/webhook-auth.ts';
import type { FetchLike } from '../../functions/core/ports.ts';
import type { Command } from './command.ts';
import { awsCall, EXIT, SetupError, UsageError } from './errors.ts';
import { closeTarget, localTarget, type Target } from './target.ts';

export const sendCommand: Command = {
  name: 'send',
  usage: 'send (--url URL | --local) [--secret whsec_... | --api-key KEY] [--id WEBHOOK_ID] [FILE]',
  summary: 'post events to an ingest URL, signed',
  details: `Posts FILE, or stdin, as it is to the ingest, signed with a Standard Webhooks secret or
with an API key; prints the answer. Exits 0 on a 2xx answer, else 1. Needs no AWS environment.
Any event shape of the contract: records, contacts named by "match", the integrator actions
(docs/recipes.md has worked examples). With --url, the credential is WEBHOOK_SECRET or
INGEST_API_KEY (or an option); with --local, the running stack's own, unless an option names one.
  --url URL        the ingest URL, e.g. http://127.0.0.1:3000/events
  --local          the running "npm start"'s ingest URL, signed with its own webhook secret
  --secret S       a whsec_ secret; better given as WEBHOOK_SECRET in the environment
  --api-key K      an API key; better given as INGEST_API_KEY in the environment
  --id ID          the webhook-id (default: random)`,
  options: {
    url: { type: 'string' },
    local: { type: 'boolean', default: false },
    secret: { type: 'string' },
    'api-key': { type: 'string' },
    id: { type: 'string' },
  },
  positionals: 1,
  run: async (values, positionals, io) => {
    if (values.local && values.url) throw new UsageError('Give --url or --local, not both');
    let url = values.url as string | undefined;
    let credential: Pick<SendOptions, 'secret' | 'apiKey'> = {
      secret: values.secret as string | undefined,
      apiKey: values['api-key'] as string | undefined,
    };
    if (values.local) {
      const target = localTarget(io.env);
      try {
        url = target.ingestUrl;
        if (credential.secret === undefined && credential.apiKey === undefined)
          credential = await awsCall('local', io, () => localCredential(target));
      } finally {
        closeTarget(target);
      }
    }
    const result = await sendEvents(
      {
        url,
        ...credential,
        id: values.id as string | undefined,
        file: positionals[0],
        env: values.local ? {} : io.env,
      },
      { fetch, print: io.stdout, now: io.now, readStdin: io.readStdin },
    );
    return result.ok ? EXIT.ok : EXIT.failed;
  },
};

/**
 * The running local stack's own credential: its first webhook secret (the one `npm start`
 * printed, or WEBHOOK_SECRET's), else its first API key. A sender that exported the secret of an
 * earlier `npm start` would be refused (each start generates another), so --local never reads
 * the environment.
 */
async function localCredential(target: Target): Promise<Pick<SendOptions, 'secret' | 'apiKey'>> {
  const { SecretString } = await target.secrets.send(
    new GetSecretValueCommand({ SecretId: target.webhookSecretId }),
  );
  const senders = readSenderCredentials(SecretString);
  const secret = senders.find((sender) => sender.kind === 'webhook_secret');
  if (secret !== undefined) return { secret: secret.value };
  const key = senders.find((sender) => sender.kind === 'api_key');
  if (key !== undefined) return { apiKey: key.value };
  throw new SetupError(
    'The local stack accepts no sender credential: add one with "npx mautic-relay senders add-secret --local".',
  );
}

/** What `send` talks to; the bin passes the real ones, the tests their own. */
export interface SendDeps {
  fetch: FetchLike;
  /** Where the answer is reported; never given the secret or the key. */
  print: (line: string) => void;
  /** Milliseconds since the epoch; `webhook-timestamp` is this in seconds. */
  now: () => number;
  /** All of stdin, byte for byte (the body when no FILE is given). */
  readStdin: () => Promise<Uint8Array>;
}

export interface SendOptions {
  /** The ingest URL, `{ingest_base}/events`. */
  url: string | undefined;
  /** A `whsec_…` Standard Webhooks secret: the request is signed with it. */
  secret?: string | undefined;
  /** An ingest API key: sent as `Authorization: Bearer <key>`. */
  apiKey?: string | undefined;
  /** The `webhook-id`; default `msg_` + random. Only used when signing. */
  id?: string | undefined;
  /** The JSON body's file; stdin when absent or `-`. */
  file?: string | undefined;
  /**
   * Where a credential not given as an option is looked up: `WEBHOOK_SECRET` (its first entry
   * when comma-separated), else `INGEST_API_KEY` (or the first entry of `INGEST_API_KEYS`).
   */
  env?: Readonly<Record<string, string | undefined>>;
  /** @default 30_000 */
  timeoutMs?: number;
}

export interface SendResult {
  status: number;
  /** True on a 2xx answer; the bin exits 1 otherwise. */
  ok: boolean;
}

const DEFAULT_SEND_TIMEOUT_MS = 30_000;
// As the ingest checks it: printable ASCII without '.', ',' or space, at most 124 characters.
const WEBHOOK_ID = /^[\x21-\x2b\x2d\x2f-\x7e]{1,124}$/;

type Credential = { kind: 'secret'; key: Buffer } | { kind: 'api-key'; key: string };

/**
 * `send`: posts a JSON body to the ingest API exactly as it was read (no re-serialising, so the
 * signature covers the bytes sent), signed with Standard Webhooks headers or with a Bearer API
 * key, and prints the status and the answer. Operator mistakes and unreachable URLs throw a
 * UsageError whose message never holds the secret or the key.
 */
export async function sendEvents(options: SendOptions, deps: SendDeps): Promise<SendResult> {
  const url = parseUrl(options.url);
  const credential = resolveCredential(options);
  const id = options.id ?? `msg_${randomBytes(12).toString('base64url')}`;
  if (credential.kind === 'secret' && !WEBHOOK_ID.test(id)) {
    throw new UsageError(
      '--id must be 1 to 124 printable ASCII characters without ".", "," or space',
    );
  }
  const body = await readBody(options.file, deps);

  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (credential.kind === 'secret') {
    const timestamp = Math.floor(deps.now() / 1000);
    headers['webhook-id'] = id;
    headers['webhook-timestamp'] = String(timestamp);
    headers['webhook-signature'] = signWebhook(credential.key, id, timestamp, body);
  } else {
    headers.authorization = `Bearer ${credential.key}`;
  }

  const timeoutMs = options.timeoutMs ?? DEFAULT_SEND_TIMEOUT_MS;
  let response: Response;
  let text: string;
  try {
    response = await deps.fetch(url.href, {
      method: 'POST',
      headers,
      body,
      redirect: 'manual',
      signal: AbortSignal.timeout(timeoutMs),
    });
    text = await response.text();
  } catch (error) {
    throw new UsageError(`Could not send to ${shown(url)}: ${reason(error, timeoutMs)}`);
  }

  deps.print(`${response.status} ${response.statusText}`.trimEnd());
  const answer = prettyJson(text);
  if (answer !== '') deps.print(answer);
  return { status: response.status, ok: response.status >= 200 && response.status < 300 };
}

function parseUrl(value: string | undefined): URL {
  if (value === undefined || value === '') {
    throw new UsageError('--url is required, e.g. --url http://127.0.0.1:3000/events');
  }
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new UsageError('--url is not a URL, e.g. --url http://127.0.0.1:3000/events');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new UsageError('--url must be an http:// or https:// URL');
  return url;
}

/** The options' credential, else the environment's; the error messages never quote one. */
function resolveCredential(options: SendOptions): Credential {
  if (options.secret !== undefined && options.apiKey !== undefined)
    throw new UsageError('Give --secret or --api-key, not both');
  const env = options.env ?? {};
  try {
    if (options.secret !== undefined) return fromSecret(options.secret, '--secret');
    if (options.apiKey !== undefined) return fromApiKey(options.apiKey, '--api-key');
    const secret = firstEntry(env.WEBHOOK_SECRET);
    if (secret !== undefined) return fromSecret(secret, 'WEBHOOK_SECRET');
    const apiKey = firstEntry(env.INGEST_API_KEY) ?? firstEntry(env.INGEST_API_KEYS);
    if (apiKey !== undefined)
      return fromApiKey(apiKey, env.INGEST_API_KEY ? 'INGEST_API_KEY' : 'INGEST_API_KEYS');
  } catch (error) {
    if (error instanceof CredentialError) throw new UsageError(error.message);
    throw error;
  }
  throw new UsageError(
    'No credential: set WEBHOOK_SECRET or INGEST_API_KEY, or give --secret or --api-key',
  );
}

function fromSecret(secret: string, name: string): Credential {
  return { kind: 'secret', key: parseWebhookSecret(secret.trim(), `webhook secret (${name})`) };
}

function fromApiKey(apiKey: string, name: string): Credential {
  const key = apiKey.trim();
  parseApiKey(key, `API key (${name})`);
  return { kind: 'api-key', key };
}

function firstEntry(list: string | undefined): string | undefined {
  const first = list?.split(',')[0]?.trim();
  return first === undefined || first === '' ? undefined : first;
}

async function readBody(file: string | undefined, deps: SendDeps): Promise<Uint8Array> {
  let body: Uint8Array;
  if (file === undefined || file === '-') {
    body = await deps.readStdin();
    if (body.length === 0) throw new UsageError('Nothing to send: stdin is empty');
  } else {
    try {
      body = await readFile(file);
    } catch (error) {
      const code = (error as { code?: unknown }).code;
      const why =
        code === 'ENOENT'
          ? 'no such file'
          : code === 'EACCES' || code === 'EPERM'
            ? 'permission denied'
            : code === 'EISDIR'
              ? 'it is a directory'
              : error instanceof Error
                ? error.message
                : String(error);
      throw new UsageError(`Cannot read ${file}: ${why}`);
    }
    if (body.length === 0) throw new UsageError(`Nothing to send: ${file} is empty`);
  }
  return body;
}

/** Why a request failed, from fetch's error and its cause (e.g. `connect ECONNREFUSED …`). */
function reason(error: unknown, timeoutMs: number): string {
  if (error instanceof Error && (error.name === 'TimeoutError' || error.name === 'AbortError'))
    return `no answer within ${timeoutMs / 1000} s`;
  const cause = error instanceof Error ? error.cause : undefined;
  if (cause instanceof AggregateError && cause.errors[0] instanceof Error)
    return cause.errors[0].message;
  if (cause instanceof Error && cause.message !== '') return cause.message;
  return error instanceof Error ? error.message : String(error);
}

/** The URL without user info or query, which could carry something secret. */
function shown(url: URL): string {
  return `${url.origin}${url.pathname}`;
}

function prettyJson(text: string): string {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text.trimEnd();
  }
}
