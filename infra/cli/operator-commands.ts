import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  CreateSecretCommand,
  GetSecretValueCommand,
  PutSecretValueCommand,
  ResourceNotFoundException,
  type SecretsManagerClient,
} from '@aws-sdk/client-secrets-manager';
import { MauticOAuthClient } from '../../functions/core/mautic/mautic-oauth.ts';
import type { FetchLike } from '../../functions/core/ports.ts';
import {
  type ClientSecret,
  clientSecretSchema,
  type TokenSecret,
} from '../../functions/core/token-secret.ts';
import { DEFAULTS, secretNames } from '../../functions/shared/config.ts';

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
  const parsed = clientSecretSchema.safeParse({
    baseUrl: options.baseUrl,
    clientId: options.clientId,
    clientSecret: options.clientSecret,
    grantType: options.grantType,
  });
  if (!parsed.success) {
    const problems = parsed.error.issues.map(
      (issue) => `${issue.path.join('.')}: ${issue.message}`,
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
  let settle: (result: { code: string } | { error: string }) => void = () => {};
  const arrived = new Promise<{ code: string } | { error: string }>((resolve) => {
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
    server.listen(options.port, '127.0.0.1', resolve);
  });
  try {
    const { port } = server.address() as AddressInfo;
    const redirectUri = `http://127.0.0.1:${port}/callback`;
    deps.print(
      `Register this redirect URI on the Mautic credential if it is not yet: ${redirectUri}`,
    );
    deps.print('Open this URL in a browser logged in to Mautic and approve the relay:');
    deps.print(oauth.authorizeUrl(redirectUri, state));

    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<{ error: string }>((resolve) => {
      timer = setTimeout(
        () => resolve({ error: `no answer within ${options.timeoutMs / 1000} s` }),
        options.timeoutMs,
      );
    });
    const result = await Promise.race([arrived, timedOut]);
    clearTimeout(timer);
    if ('error' in result) throw new UsageError(`Authorization failed: ${result.error}`);

    const tokens = await oauth.exchangeCode(result.code, redirectUri);
    const lifetime = options.refreshTokenLifetimeSeconds ?? DEFAULTS.refreshTokenLifetimeSeconds;
    const secret: TokenSecret = {
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
    await putSecret(deps.secrets, names.token, JSON.stringify(secret));
    deps.print(
      `Authorized. Tokens stored in ${names.token}; the refresher keeps them fresh from now on.`,
    );
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
}

/** A mistake the operator can fix; the bin prints its message without a stack. */
export class UsageError extends Error {
  override name = 'UsageError';
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
