import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import { CreateSecretCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { vi } from 'vitest';
import { MauticOAuthClient } from '../../functions/core/mautic-oauth.ts';
import type { RefreshOutcome } from '../../functions/core/token-refresh.ts';
import type { ClientSecret, TokenSecret } from '../../functions/core/token-secret.ts';
import { buildRefreshHandler } from '../../functions/refresh/compose.ts';
import { DEFAULTS } from '../../functions/shared/config.ts';
import { lambdaContext } from '../../infra/local/lambda-context.ts';
import type { MauticSimulator } from '../../infra/local/mautic-simulator/server.ts';
import type { SecretsManagerFake } from '../../infra/local/secrets-manager-fake.ts';

export const NON_ADMIN = {
  clientId: '7_nonadmin',
  clientSecret: 'non-admin-client-secret',
  grantTypes: ['authorization_code', 'refresh_token'] as Array<
    'authorization_code' | 'refresh_token'
  >,
  redirectUris: ['http://127.0.0.1'],
};

/** A Secrets Manager client for the fake, with bounded waits. */
export function secretsClient(fake: SecretsManagerFake): SecretsManagerClient {
  return new SecretsManagerClient({
    endpoint: fake.endpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
  });
}

let environments = 0;

/** Creates an environment's two secrets in the fake: the credential, and tokens if given. */
export async function createEnvironment(
  client: SecretsManagerClient,
  credential: ClientSecret,
  tokens?: TokenSecret,
): Promise<{ clientSecretId: string; tokenSecretId: string }> {
  environments++;
  const ids = {
    clientSecretId: `MauticRelay/t${environments}/client`,
    tokenSecretId: `MauticRelay/t${environments}/token`,
  };
  await client.send(
    new CreateSecretCommand({ Name: ids.clientSecretId, SecretString: JSON.stringify(credential) }),
  );
  await client.send(
    new CreateSecretCommand({
      Name: ids.tokenSecretId,
      ...(tokens ? { SecretString: JSON.stringify(tokens) } : {}),
    }),
  );
  return ids;
}

/** Tokens of a user who authorized the relay at `now`, as `authorize` stores them. */
export async function authorizedTokens(
  sim: MauticSimulator,
  now: () => number,
): Promise<TokenSecret> {
  const oauth = new MauticOAuthClient({
    baseUrl: sim.url,
    clientId: NON_ADMIN.clientId,
    clientSecret: NON_ADMIN.clientSecret,
    fetch,
    clock: { now },
  });
  const redirect = await fetch(oauth.authorizeUrl('http://127.0.0.1/cb', 's'), {
    redirect: 'manual',
  });
  const code = new URL(redirect.headers.get('location') ?? '').searchParams.get('code') ?? '';
  const tokens = await oauth.exchangeCode(code, 'http://127.0.0.1/cb');
  return {
    accessToken: tokens.accessToken,
    accessTokenExpiresAt: new Date(tokens.accessTokenExpiresAt).toISOString(),
    refreshToken: tokens.refreshToken ?? '',
    refreshTokenExpiresAt: new Date(tokens.obtainedAt + 14 * 86_400_000).toISOString(),
    obtainedWith: 'authorization_code',
    updatedAt: new Date(tokens.obtainedAt).toISOString(),
  };
}

/** Captures everything Powertools writes (stdout and stderr) for the rest of the test. */
export function captureOutput(): string[] {
  const lines: string[] = [];
  for (const stream of [process.stdout, process.stderr]) {
    vi.spyOn(stream, 'write').mockImplementation((chunk: string | Uint8Array) => {
      lines.push(String(chunk));
      return true;
    });
  }
  return lines;
}

/** The real refresher handler over the fake and the simulator. */
export function refresher(
  client: SecretsManagerClient,
  ids: { clientSecretId: string; tokenSecretId: string },
  now: () => number,
  options: { refreshTokenLifetimeSeconds?: number; refreshAheadSeconds?: number } = {},
) {
  // Through the function's own composition root, so its Powertools middlewares (metrics flush,
  // log context) are part of what the tests see.
  const handler = buildRefreshHandler(
    {
      ...ids,
      refreshAheadSeconds: options.refreshAheadSeconds ?? DEFAULTS.refreshAheadSeconds,
      refreshTokenLifetimeSeconds:
        options.refreshTokenLifetimeSeconds ?? DEFAULTS.refreshTokenLifetimeSeconds,
      mauticTimeoutMs: 2_000,
    },
    {
      secrets: client,
      logger: new Logger({ serviceName: 'refresh-test' }),
      metrics: new Metrics({ namespace: 'MauticBatchRelayTest', serviceName: 'refresh-test' }),
      clock: { now },
    },
  );
  return (event: unknown): Promise<RefreshOutcome> =>
    handler(event, lambdaContext('refresh', 30_000));
}
