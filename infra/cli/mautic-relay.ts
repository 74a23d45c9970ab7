#!/usr/bin/env node
/**
 * Operator commands. Secrets Manager is reached through the usual AWS environment (region,
 * profile, credentials); against the local stack use the command
 * `npm start` prints (it sets AWS_ENDPOINT_URL_SECRETS_MANAGER and dummy credentials).
 * `send` needs no AWS environment, only the ingest URL and a credential.
 *
 *   npx mautic-relay credentials --env dev --base-url https://mautic.example.com \
 *       --client-id 1_abc --grant-type client_credentials   (secret from MAUTIC_CLIENT_SECRET or stdin)
 *   npx mautic-relay authorize --env dev [--port 8765] [--timeout 300]
 *   WEBHOOK_SECRET=whsec_… npx mautic-relay send --url http://127.0.0.1:3000/events events.json
 *   npx mautic-relay refresh --env dev | --local [--json]
 */
import { type ParseArgsOptionsConfig, parseArgs } from 'node:util';
import { CloudFormationClient } from '@aws-sdk/client-cloudformation';
import { LambdaClient } from '@aws-sdk/client-lambda';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { endpointsDir, readEndpoints } from '../local/endpoints-file.ts';
import { authorize, type CommandDeps, storeCredentials, UsageError } from './operator-commands.ts';
import { printRefresh, refreshEnvironment, refreshLocal } from './refresh.ts';
import { sendEvents } from './send.ts';

const USAGE = `Usage:
  mautic-relay credentials --env NAME --base-url URL --client-id ID --grant-type client_credentials|authorization_code
      (the client secret is read from MAUTIC_CLIENT_SECRET, else from stdin)
  mautic-relay authorize (--env NAME | --local) [--port 8765] [--timeout SECONDS]
  mautic-relay send --url URL [--secret whsec_... | --api-key KEY] [--id WEBHOOK_ID] [FILE]
      (posts FILE, or stdin, as it is; the credential is best given as WEBHOOK_SECRET or
      INGEST_API_KEY in the environment; exits 0 on a 2xx answer, else 1)
  mautic-relay refresh (--env NAME | --local) [--json]
      (runs the token refresher now and waits for it; --local: the running "npm start")`;

const OPTIONS = {
  credentials: {
    env: { type: 'string' },
    'base-url': { type: 'string' },
    'client-id': { type: 'string' },
    'grant-type': { type: 'string', default: 'client_credentials' },
  },
  authorize: {
    env: { type: 'string' },
    local: { type: 'boolean', default: false },
    port: { type: 'string', default: '8765' },
    timeout: { type: 'string', default: '300' },
  },
  refresh: {
    env: { type: 'string' },
    local: { type: 'boolean', default: false },
    json: { type: 'boolean', default: false },
  },
  send: {
    url: { type: 'string' },
    secret: { type: 'string' },
    'api-key': { type: 'string' },
    id: { type: 'string' },
  },
} satisfies Record<string, ParseArgsOptionsConfig>;

async function main(argv: string[]): Promise<void> {
  const [command, ...rest] = argv;
  if (command === 'help' || command === '--help' || command === '-h') {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  const print = (line: string) => process.stdout.write(`${line}\n`);

  if (command === 'send') {
    const { values, positionals } = parse(rest, OPTIONS.send, true);
    if (positionals.length > 1) throw new UsageError(`send takes at most one FILE\n${USAGE}`);
    const result = await sendEvents(
      {
        url: values.url,
        secret: values.secret,
        apiKey: values['api-key'],
        id: values.id,
        file: positionals[0],
        env: process.env,
      },
      { fetch, print, now: Date.now, readStdin: readStdinBytes },
    );
    if (!result.ok) process.exitCode = 1;
    return;
  }

  if (command === 'refresh') {
    const { values } = parse(rest, OPTIONS.refresh);
    if (Boolean(values.env) === values.local)
      throw new UsageError(`refresh needs either --env NAME or --local\n${USAGE}`);
    const result = values.env
      ? await refreshEnvironment(values.env, {
          cloudFormation: new CloudFormationClient({}),
          lambda: new LambdaClient({}),
        })
      : await refreshLocal(endpointsDir(process.env), fetch);
    if (!printRefresh(result, { json: values.json, now: Date.now(), print })) process.exitCode = 1;
    return;
  }

  if (command === 'credentials') {
    const { values } = parse(rest, OPTIONS.credentials);
    if (!values.env) throw new UsageError(`--env is required\n${USAGE}`);
    if (!values['base-url'] || !values['client-id'])
      throw new UsageError(`--base-url and --client-id are required\n${USAGE}`);
    const clientSecret =
      process.env.MAUTIC_CLIENT_SECRET ?? (await readSecret('Mautic client secret: '));
    await storeCredentials(
      {
        env: values.env,
        baseUrl: values['base-url'],
        clientId: values['client-id'],
        clientSecret,
        grantType: values['grant-type'],
      },
      awsDeps(print),
    );
    return;
  }

  if (command === 'authorize') {
    const { values } = parse(rest, OPTIONS.authorize);
    if (Boolean(values.env) === values.local)
      throw new UsageError(`authorize needs either --env NAME or --local\n${USAGE}`);
    const target = values.env
      ? { env: values.env, deps: awsDeps(print) }
      : await localTarget(print);
    await authorize(
      { env: target.env, port: Number(values.port), timeoutMs: Number(values.timeout) * 1000 },
      target.deps,
    );
    return;
  }

  throw new UsageError(USAGE);
}

/** parseArgs for one command; an unknown option or a stray argument is a UsageError. */
function parse<T extends ParseArgsOptionsConfig>(args: string[], options: T, positionals = false) {
  try {
    return parseArgs({ args, options, allowPositionals: positionals, strict: true });
  } catch (error) {
    throw new UsageError(`${error instanceof Error ? error.message : String(error)}\n${USAGE}`);
  }
}

function awsDeps(print: (line: string) => void): CommandDeps {
  return { secrets: new SecretsManagerClient({}), fetch, print, now: Date.now };
}

/** The running `npm start`: its Secrets Manager stand-in and its environment name, `local`. */
async function localTarget(
  print: (line: string) => void,
): Promise<{ env: string; deps: CommandDeps }> {
  const found = await readEndpoints(endpointsDir(process.env));
  if ('missing' in found) throw new UsageError(found.missing);
  const secrets = new SecretsManagerClient({
    endpoint: found.endpoints.secretsEndpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
  });
  return { env: 'local', deps: { secrets, fetch, print, now: Date.now } };
}

/** All of stdin, byte for byte. */
async function readStdinBytes(): Promise<Uint8Array> {
  if (process.stdin.isTTY)
    process.stderr.write('Reading the JSON body from stdin (end with Ctrl-D)\n');
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/**
 * A secret from stdin: typed at a terminal, without echo (raw mode until Enter; Backspace
 * deletes, Ctrl-U clears, Ctrl-C cancels); piped, all of stdin, trimmed.
 */
async function readSecret(prompt: string): Promise<string> {
  const stdin = process.stdin;
  if (!stdin.isTTY) {
    const chunks: Buffer[] = [];
    for await (const chunk of stdin) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks).toString('utf8').trim();
  }

  process.stderr.write(prompt);
  const wasRaw = stdin.isRaw;
  let onData: (chunk: string) => void = () => {};
  let onEnd: () => void = () => {};
  try {
    stdin.setRawMode(true);
    stdin.setEncoding('utf8');
    return await new Promise<string>((resolve, reject) => {
      let typed: string[] = [];
      onEnd = () => resolve(typed.join('').trim());
      onData = (chunk) => {
        // Arrow keys and the like arrive as escape sequences: none of them is part of a secret.
        // biome-ignore lint/suspicious/noControlCharactersInRegex: matches terminal escape sequences.
        const keys = chunk.replace(/\x1b\[[0-9;?]*[ -/]*[@-~]|\x1bO.|\x1b/g, '');
        for (const key of keys) {
          if (key === '\r' || key === '\n' || key === '\x04') return onEnd();
          if (key === '\x03') return reject(new UsageError('Cancelled.'));
          if (key === '\x7f' || key === '\b') typed = typed.slice(0, -1);
          else if (key === '\x15') typed = [];
          else if (key >= ' ') typed.push(key);
        }
      };
      stdin.on('data', onData).once('end', onEnd);
      stdin.resume();
    });
  } finally {
    stdin.off('data', onData).off('end', onEnd);
    stdin.setRawMode(wasRaw);
    stdin.pause();
    process.stderr.write('\n');
  }
}

main(process.argv.slice(2)).catch((error: unknown) => {
  process.stderr.write(`${error instanceof UsageError ? error.message : String(error)}\n`);
  process.exitCode = 1;
});
