import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  CreateSecretCommand,
  GetSecretValueCommand,
  PutSecretValueCommand,
  ResourceNotFoundException,
  SecretsManagerClient,
} from '@aws-sdk/client-secrets-manager';
import { MauticOAuthClient } from '../../functions/core/mautic/mautic-oauth.ts';
import type { FetchLike, MauticTokens } from '../../functions/core/ports.ts';
import {
  type ClientSecret,
  clientSecretSchema,
  type TokenSecret,
} from '../../functions/core/token-secret.ts';
import { DEFAULTS } from '../../functions/shared/config.ts';
import { secretNames } from '../../functions/shared/secret-names.ts';
import type { Command } from './command.ts';
import { clientConfig } from './environment-region.ts';
import { awsCall, EXIT, UsageError } from './errors.ts';
import { checkEnvironment, wholeNumber } from './options.ts';
import { closeTarget, localTarget } from './target.ts';

/* The Mautic credential's commands: `credentials` stores it, `authorize` makes the first tokens. */

export const credentialsCommand: Command = {
  name: 'credentials',
  usage:
    'credentials --env NAME --base-url URL --client-id ID [--grant-type client_credentials|authorization_code]',
  summary: "store an environment's Mautic OAuth2 credential",
  details: `Stores the Mautic OAuth2 credential in the environment's client secret. The client secret
is read from MAUTIC_CLIENT_SECRET, else from stdin (typed without echo), never from the command
line. Needs the usual AWS environment (AWS_REGION or AWS_PROFILE, and credentials).`,
  options: {
    env: { type: 'string' },
    'base-url': { type: 'string' },
    'client-id': { type: 'string' },
    'grant-type': { type: 'string', default: 'client_credentials' },
  },
  positionals: 0,
  run: async (values, _, io) => {
    const env = checkEnvironment(values.env);
    if (!values['base-url'] || !values['client-id'])
      throw new UsageError('--base-url and --client-id are required');
    const clientSecret =
      io.env.MAUTIC_CLIENT_SECRET ?? (await io.readSecret('Mautic client secret: '));
    await awsCall(env, io, () =>
      storeCredentials(
        {
          env,
          baseUrl: String(values['base-url']),
          clientId: String(values['client-id']),
          clientSecret,
          grantType: String(values['grant-type']),
        },
        {
          secrets: new SecretsManagerClient(clientConfig(env)),
          fetch,
          print: io.stdout,
          now: io.now,
        },
      ),
    );
    return EXIT.ok;
  },
};

export const authorizeCommand: Command = {
  name: 'authorize',
  usage: 'authorize (--env NAME | --local) [--port 8765] [--timeout SECONDS]',
  summary: 'authorize the relay with a Mautic user (authorization_code credentials)',
  details: `Prints Mautic's authorize URL, waits on http://127.0.0.1:PORT/callback for the code and
stores the tokens. Register that redirect URI on the Mautic credential. Needs the usual AWS
environment (AWS_REGION or AWS_PROFILE, and credentials); with --local, the running "npm start"
(whose embedded simulator registers the redirect URI of AUTHORIZE_PORT).
  --port N       the local port of the redirect URI (default 8765)
  --timeout S    how long to wait for the browser, in seconds (default 300)`,
  options: {
    env: { type: 'string' },
    local: { type: 'boolean', default: false },
    port: { type: 'string', default: '8765' },
    timeout: { type: 'string', default: '300' },
  },
  positionals: 0,
  run: async (values, _, io) => {
    if (values.env !== undefined && values.local)
      throw new UsageError('Give --env NAME or --local, not both');
    const port = wholeNumber(values.port, '--port', 1, 65_535);
    const timeout = wholeNumber(values.timeout, '--timeout', 1, 3600);
    if (values.local) {
      const target = localTarget(io.env);
      try {
        await authorize(
          { env: 'local', port, timeoutMs: timeout * 1000 },
          { secrets: target.secrets, fetch, print: io.stdout, now: io.now },
        );
      } finally {
        closeTarget(target);
      }
      return EXIT.ok;
    }
    const env = checkEnvironment(values.env);
    await awsCall(env, io, () =>
      authorize(
        { env, port, timeoutMs: timeout * 1000 },
        {
          secrets: new SecretsManagerClient(clientConfig(env)),
          fetch,
          print: io.stdout,
          now: io.now,
        },
      ),
    );
    return EXIT.ok;
  },
};

/** What the operator commands talk to; the bin builds the real ones from the AWS environment. */
export interface CommandDeps {
  secrets: SecretsManagerClient;
  fetch: FetchLike;
  /** Where the commands report; never given a token or a secret. */
  print: (line: string) => void;
  now: () => number;
}

/**
 * `credentials`: stores the Mautic OAuth2 credential of an environment in its client secret,
 * which only the refresher reads. The client secret itself comes from the environment or stdin,
 * never from the command line (where shell history and `ps` would keep it).
 */
export async function storeCredentials(
  options: {
    env: string;
    baseUrl: string;
    clientId: string;
    clientSecret: string;
    grantType: string;
  },
  deps: CommandDeps,
): Promise<void> {
  if (options.clientSecret.trim() === '')
    throw new UsageError(
      "No client secret: MAUTIC_CLIENT_SECRET is empty (or nothing was typed). Set it to the secret of Mautic's API credential (Settings, API Credentials).",
    );
  const parsed = clientSecretSchema.safeParse({
    baseUrl: options.baseUrl,
    clientId: options.clientId,
    clientSecret: options.clientSecret,
    grantType: options.grantType,
  });
  if (!parsed.success) {
    // Named as the operator gave them: the options, and the secret's variable.
    const problems = parsed.error.issues.map(
      (issue) =>
        `${CREDENTIAL_INPUTS[String(issue.path[0])] ?? issue.path.join('.')} ${issue.message}`,
    );
    throw new UsageError(`Invalid credential: ${problems.join('; ')}`);
  }
  const name = secretNames(options.env).client;
  await putSecret(deps.secrets, name, JSON.stringify(parsed.data));
  deps.print(
    `Stored the Mautic credential for "${options.env}" in ${name} (grant type ${parsed.data.grantType}).`,
  );
  if (parsed.data.grantType === 'authorization_code') {
    deps.print(`Next: npx mautic-relay authorize --env ${options.env}`);
  }
}

/** Where each field of the client secret comes from, as `credentials` takes it. */
const CREDENTIAL_INPUTS: Readonly<Record<string, string>> = {
  baseUrl: '--base-url',
  clientId: '--client-id',
  clientSecret: 'MAUTIC_CLIENT_SECRET',
  grantType: '--grant-type',
};

/**
 * `authorize`: for credentials made by non-admin Mautic users. Prints Mautic's authorize URL,
 * waits on a 127.0.0.1 redirect URI for the code (it lives 30 seconds), exchanges it and stores
 * the tokens in the environment's token secret. The redirect URI must be registered on the
 * Mautic credential.
 */
export async function authorize(
  options: { env: string; port: number; timeoutMs: number; refreshTokenLifetimeSeconds?: number },
  deps: CommandDeps,
): Promise<void> {
  const names = secretNames(options.env);
  const client = await readClient(deps.secrets, names.client);
  const oauth = new MauticOAuthClient({ ...client, fetch: deps.fetch, clock: { now: deps.now } });
  const state = randomBytes(16).toString('hex');
  const callback = await listenForCode(options.port, state);
  try {
    const redirectUri = `http://127.0.0.1:${callback.port}/callback`;
    deps.print(
      `Register this redirect URI on the Mautic credential if it is not yet: ${redirectUri}`,
    );
    deps.print('Open this URL in a browser logged in to Mautic and approve the relay:');
    deps.print(oauth.authorizeUrl(redirectUri, state));
    const result = await withTimeout(callback.arrived, options.timeoutMs);
    if ('error' in result) throw new UsageError(`Authorization failed: ${result.error}`);

    const tokens = await oauth.exchangeCode(result.code, redirectUri);
    const lifetime = options.refreshTokenLifetimeSeconds ?? DEFAULTS.refreshTokenLifetimeSeconds;
    await putSecret(deps.secrets, names.token, JSON.stringify(tokenSecret(tokens, lifetime)));
    deps.print(
      `Authorized. Tokens stored in ${names.token}; the refresher keeps them fresh from now on.`,
    );
  } finally {
    await callback.close();
  }
}

type Redirect = { code: string } | { error: string };

/**
 * Listens on 127.0.0.1:`port` for Mautic's redirect; `arrived` resolves with its code, or its
 * error when it carries our `state` but no code. A redirect with another state is not ours.
 */
async function listenForCode(
  port: number,
  state: string,
): Promise<{ port: number; arrived: Promise<Redirect>; close: () => Promise<void> }> {
  let settle: (result: Redirect) => void = () => {};
  const arrived = new Promise<Redirect>((resolve) => {
    settle = resolve;
  });
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    if (url.pathname !== '/callback') {
      res.writeHead(404).end();
      return;
    }
    const code = url.searchParams.get('code');
    const error = url.searchParams.get('error');
    const ok = url.searchParams.get('state') === state && code !== null;
    res.writeHead(ok ? 200 : 400, { 'content-type': 'text/plain; charset=utf-8' });
    res.end(
      ok
        ? 'The relay is authorized. You can close this tab.'
        : 'Authorization failed; see the terminal.',
    );
    if (ok) settle({ code });
    else if (url.searchParams.get('state') === state)
      settle({ error: error ?? 'no code in the redirect' });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', resolve);
  });
  return {
    port: (server.address() as AddressInfo).port,
    arrived,
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** The redirect, or an error once `timeoutMs` passed without one. */
async function withTimeout(arrived: Promise<Redirect>, timeoutMs: number): Promise<Redirect> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<{ error: string }>((resolve) => {
    timer = setTimeout(
      () => resolve({ error: `no answer within ${timeoutMs / 1000} s` }),
      timeoutMs,
    );
  });
  const result = await Promise.race([arrived, timedOut]);
  clearTimeout(timer);
  return result;
}

/** The token secret of an authorization: the refresh token lives `lifetime` seconds. */
function tokenSecret(tokens: MauticTokens, lifetime: number): TokenSecret {
  return {
    accessToken: tokens.accessToken,
    accessTokenExpiresAt: new Date(tokens.accessTokenExpiresAt).toISOString(),
    ...(tokens.refreshToken
      ? {
          refreshToken: tokens.refreshToken,
          refreshTokenExpiresAt: new Date(tokens.obtainedAt + lifetime * 1000).toISOString(),
        }
      : {}),
    obtainedWith: 'authorization_code',
    updatedAt: new Date(tokens.obtainedAt).toISOString(),
  };
}

async function readClient(secrets: SecretsManagerClient, name: string): Promise<ClientSecret> {
  let text: string | undefined;
  try {
    text = (await secrets.send(new GetSecretValueCommand({ SecretId: name }))).SecretString;
  } catch (error) {
    if (error instanceof ResourceNotFoundException) {
      throw new UsageError(
        `No Mautic credential in ${name}: run "npx mautic-relay credentials" first`,
      );
    }
    throw error;
  }
  let json: unknown;
  try {
    json = JSON.parse(text ?? '');
  } catch {
    json = undefined;
  }
  const parsed = clientSecretSchema.safeParse(json);
  if (!parsed.success)
    throw new UsageError(
      `${name} does not hold a valid credential: run "npx mautic-relay credentials"`,
    );
  return parsed.data;
}

/** Puts a new version of the secret, creating the secret when it does not exist yet. */
async function putSecret(
  secrets: SecretsManagerClient,
  name: string,
  value: string,
): Promise<void> {
  try {
    await secrets.send(new PutSecretValueCommand({ SecretId: name, SecretString: value }));
  } catch (error) {
    if (!(error instanceof ResourceNotFoundException)) throw error;
    await secrets.send(new CreateSecretCommand({ Name: name, SecretString: value }));
  }
}
