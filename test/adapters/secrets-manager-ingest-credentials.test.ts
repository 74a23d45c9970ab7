import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { mockClient } from 'aws-sdk-client-mock';
import { afterEach, describe, expect, it } from 'vitest';
import { SecretsManagerIngestCredentials } from '../../functions/adapters/secrets-manager-ingest-credentials.ts';
import { CredentialError } from '../../functions/core/errors.ts';
import { parseCredentials } from '../../functions/core/ingest/webhook-auth.ts';
import { expectNoSecrets, thrownBy } from '../support/secrets.ts';

const secretsManager = mockClient(SecretsManagerClient);
const WEBHOOK_SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
const API_KEY = 'ingest-api-key-0123456789';
let now = 0;
const credentials = () =>
  new SecretsManagerIngestCredentials(
    new SecretsManagerClient({ region: 'eu-west-1' }),
    'relay/dev/webhook',
    {
      cacheMs: 300_000,
      clock: { now: () => now },
    },
  );

afterEach(() => {
  secretsManager.reset();
  now = 0;
});

describe('SecretsManagerIngestCredentials', () => {
  it('parses the secret and caches it until the cache time has passed', async () => {
    secretsManager.on(GetSecretValueCommand).resolves({
      SecretString: JSON.stringify({ webhookSecrets: [WEBHOOK_SECRET], apiKeys: [API_KEY] }),
    });
    const source = credentials();

    const first = await source.load();
    now = 299_999;
    await source.load();
    now = 300_000;
    await source.load();

    // Each credential named by its id in the secret (the first format's: by position there).
    expect(first).toEqual(
      parseCredentials({
        webhookSecrets: [{ id: 'webhook-secret-1', value: WEBHOOK_SECRET }],
        apiKeys: [{ id: 'api-key-1', value: API_KEY }],
      }),
    );
    expect(secretsManager.commandCalls(GetSecretValueCommand)).toHaveLength(2);
  });

  it('keeps the last good credentials when a reload fails, and reports it', async () => {
    secretsManager
      .on(GetSecretValueCommand)
      .resolvesOnce({ SecretString: JSON.stringify({ webhookSecrets: [WEBHOOK_SECRET] }) })
      .resolvesOnce({ SecretString: JSON.stringify({ webhookSecrets: ['whsec_AAAA'] }) })
      .rejects(new Error('ThrottlingException'));
    const errors: unknown[] = [];
    const source = new SecretsManagerIngestCredentials(
      new SecretsManagerClient({ region: 'eu-west-1' }),
      'relay/dev/webhook',
      {
        cacheMs: 1000,
        clock: { now: () => now },
        onReloadError: (error) => errors.push(error),
      },
    );

    const good = await source.load();
    now = 1000;
    const afterBadRotation = await source.load();
    now = 2000;
    const afterOutage = await source.load();

    expect(afterBadRotation).toBe(good);
    expect(afterOutage).toBe(good);
    expect(errors.map((e) => (e as Error).name)).toEqual(['CredentialError', 'Error']);
  });

  it('accepts the secret the stack generates, as whsec_ followed by it', async () => {
    const generatedSecret = 'Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z';
    secretsManager
      .on(GetSecretValueCommand)
      .resolves({ SecretString: JSON.stringify({ generatedSecret, apiKeys: [] }) });

    const loaded = await credentials().load();

    expect(loaded).toEqual(
      parseCredentials({
        webhookSecrets: [{ id: 'generated', value: `whsec_${generatedSecret}` }],
        apiKeys: [],
      }),
    );
  });

  it.each([
    ['not JSON', 'whsec_not-json-secret-value'],
    [
      'a list of something else',
      JSON.stringify({ webhookSecrets: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw' }),
    ],
    ['a weak webhook secret', JSON.stringify({ webhookSecrets: ['whsec_AAAA'] })],
    ['no credential at all', JSON.stringify({})],
  ])('refuses a secret that is %s, without quoting it', async (_what, SecretString) => {
    secretsManager.on(GetSecretValueCommand).resolves({ SecretString });

    const error = await thrownBy(() => credentials().load());

    expect(error).toBeInstanceOf(CredentialError);
    expectNoSecrets(error, ['not-json-secret-value', 'MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw']);
  });
});
