import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import { CreateSecretCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { MauticOAuthClient } from '../../functions/core/mautic/mautic-oauth.ts';
import type { ClientSecret, TokenSecret } from '../../functions/core/token-secret.ts';
import type { RefreshOutcome } from '../../functions/core/tokens/token-refresh.ts';
import { buildRefreshHandler } from '../../functions/refresh/compose.ts';
import { DEFAULTS } from '../../functions/shared/config.ts';
import { lambdaContext } from '../../infra/local/lambda-context.ts';
import type { SecretsManagerFake } from '../../infra/local/secrets-manager-fake.ts';
import type { MauticSimulator } from '../../mautic-simulator/server.ts';

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

let sink: string[] = [];

/**
 * Where the refreshers built by `refresher()` write from now on: one JSON line per log line
 * (`level`, `message` and the fields) and per metric (an EMF-shaped `{"_aws", name: value}`).
 * The handler logs through the Logger and Metrics ports, so nothing is read off stdout.
 */
export function captureOutput(): string[] {
  sink = [];
  return sink;
}

type Extra = Record<string, unknown>;
const merged = (extra: unknown[]): Extra =>
  Object.assign({}, ...extra.filter((e): e is Extra => typeof e === 'object' && e !== null));

/** Powertools' Logger for the middlewares, writing its lines to the sink instead of stdout. */
class RecordingLogger extends Logger {
  constructor() {
    super({ serviceName: 'refresh-test', logLevel: 'SILENT' });
  }
  #write(level: string, input: unknown, extra: unknown[]) {
    sink.push(JSON.stringify({ level, message: String(input), ...merged(extra) }));
  }
  override debug(input: unknown, ...extra: unknown[]): void {
    this.#write('DEBUG', input, extra);
  }
  override info(input: unknown, ...extra: unknown[]): void {
    this.#write('INFO', input, extra);
  }
  override warn(input: unknown, ...extra: unknown[]): void {
    this.#write('WARN', input, extra);
  }
  override error(input: unknown, ...extra: unknown[]): void {
    this.#write('ERROR', input, extra);
  }
}

/** Powertools' Metrics for the middleware, recording each metric in the sink. */
class RecordingMetrics extends Metrics {
  constructor() {
    super({ namespace: 'MauticBatchRelayTest', serviceName: 'refresh-test' });
  }
  override addMetric(name: string, _unit: Parameters<Metrics['addMetric']>[1], value: number) {
    sink.push(JSON.stringify({ _aws: {}, [name]: value }));
    return this;
  }
  override publishStoredMetrics() {
    return this;
  }
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
      logger: new RecordingLogger(),
      metrics: new RecordingMetrics(),
      clock: { now },
    },
  );
  return (event: unknown): Promise<RefreshOutcome> =>
    handler(event, lambdaContext('refresh', 30_000));
}
