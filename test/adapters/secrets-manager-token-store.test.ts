import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { mockClient } from 'aws-sdk-client-mock';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SecretsManagerTokenStore } from '../../functions/adapters/secrets-manager-token-store.ts';
import { TokenUnavailableError } from '../../functions/core/errors.ts';
import { expectNoSecrets, thrownBy } from '../support/secrets.ts';

const START = Date.parse('2026-11-21T00:00:00Z');
const secretsManager = mockClient(SecretsManagerClient);
let now = START;
const tokenSecret = (accessToken: string, expiresInMs = 3_600_000) =>
  JSON.stringify({
    accessToken,
    accessTokenExpiresAt: new Date(now + expiresInMs).toISOString(),
    refreshToken: 'refresh-token-value-xyz',
    obtainedWith: 'refresh_token',
    updatedAt: new Date(now).toISOString(),
  });
const store = () =>
  new SecretsManagerTokenStore(
    new SecretsManagerClient({ region: 'eu-west-1' }),
    'relay/dev/token',
    { cacheMs: 30_000, clock: { now: () => now } },
  );

beforeEach(() => {
  now = START;
  secretsManager.reset();
});
afterEach(() => {
  secretsManager.reset();
});

describe('SecretsManagerTokenStore', () => {
  it('reads the token once within the cache time, and again after it or when asked for a fresh one', async () => {
    secretsManager
      .on(GetSecretValueCommand)
      .resolvesOnce({ SecretString: tokenSecret('token-one') })
      .resolves({ SecretString: tokenSecret('token-two') });
    const tokens = store();

    const first = await tokens.accessToken();
    now += 29_000;
    const cached = await tokens.accessToken();
    const fresh = await tokens.accessToken({ fresh: true });
    now += 31_000;
    const expiredCache = await tokens.accessToken();

    expect([first, cached, fresh, expiredCache]).toEqual([
      'token-one',
      'token-one',
      'token-two',
      'token-two',
    ]);
    expect(secretsManager.commandCalls(GetSecretValueCommand)).toHaveLength(3);
    expect(secretsManager.commandCalls(GetSecretValueCommand)[0]?.args[0].input).toEqual({
      SecretId: 'relay/dev/token',
    });
  });

  it('reads the secret again when the cached token has expired, before giving up', async () => {
    secretsManager
      .on(GetSecretValueCommand)
      .resolvesOnce({ SecretString: tokenSecret('short-lived', 5_000) })
      .resolves({ SecretString: tokenSecret('refreshed-token', 3_600_000) });
    const tokens = store();
    await tokens.accessToken();
    now += 6_000;

    await expect(tokens.accessToken()).resolves.toBe('refreshed-token');
    expect(secretsManager.commandCalls(GetSecretValueCommand)).toHaveLength(2);
  });

  it('refuses an access token whose expiry has passed', async () => {
    secretsManager
      .on(GetSecretValueCommand)
      .resolves({ SecretString: tokenSecret('old-token-value', -1) });

    const error = await thrownBy(() => store().accessToken());

    expect(error).toBeInstanceOf(TokenUnavailableError);
    expect((error as Error).message).toMatch(/expired/);
    expectNoSecrets(error, ['old-token-value']);
  });

  it.each([
    ['empty', undefined],
    ['not JSON', 'plain-secret-text'],
    ['without an access token', JSON.stringify({ refreshToken: 'refresh-only-secret' })],
  ])('reports a secret that is %s without quoting it', async (_what, SecretString) => {
    secretsManager
      .on(GetSecretValueCommand)
      .resolves(SecretString === undefined ? {} : { SecretString });

    const error = await thrownBy(() => store().accessToken());

    expect(error).toBeInstanceOf(TokenUnavailableError);
    expect((error as Error).message).toContain('has the refresher run?');
    expectNoSecrets(error, ['plain-secret-text', 'refresh-only-secret']);
  });

  it('wraps a Secrets Manager failure, keeping it as the cause', async () => {
    const failure = Object.assign(new Error('Secrets Manager can not find the specified secret.'), {
      name: 'ResourceNotFoundException',
    });
    secretsManager.on(GetSecretValueCommand).rejects(failure);

    const error = await thrownBy(() => store().accessToken());

    expect(error).toBeInstanceOf(TokenUnavailableError);
    expect((error as Error).cause).toBe(failure);
  });
});
