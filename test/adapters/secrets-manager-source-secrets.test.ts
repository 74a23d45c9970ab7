import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { mockClient } from 'aws-sdk-client-mock';
import { afterEach, describe, expect, it } from 'vitest';
import { SecretsManagerSourceSecrets } from '../../functions/adapters/secrets-manager-source-secrets.ts';

const secretsManager = mockClient(SecretsManagerClient);

afterEach(() => {
  secretsManager.reset();
});

describe('SecretsManagerSourceSecrets', () => {
  it('reads each source’s own secret, named by the prefix and the source', async () => {
    secretsManager
      .on(GetSecretValueCommand, { SecretId: 'MauticRelay/dev/sources/shop' })
      .resolves({ SecretString: '{"secrets":["a"]}' })
      .on(GetSecretValueCommand, { SecretId: 'MauticRelay/dev/sources/forms' })
      .resolves({ SecretString: '{}' });
    const store = new SecretsManagerSourceSecrets(
      new SecretsManagerClient({ region: 'eu-west-1' }),
      'MauticRelay/dev/sources/',
    );

    const read = await store.read(['shop', 'forms']);

    expect([...read]).toEqual([
      ['shop', '{"secrets":["a"]}'],
      ['forms', '{}'],
    ]);
    expect(secretsManager.commandCalls(GetSecretValueCommand)).toHaveLength(2);
  });

  it('fails when one cannot be read', async () => {
    secretsManager
      .on(GetSecretValueCommand)
      .rejects(Object.assign(new Error('not allowed'), { name: 'AccessDeniedException' }));
    const store = new SecretsManagerSourceSecrets(
      new SecretsManagerClient({ region: 'eu-west-1' }),
      'MauticRelay/dev/sources/',
    );

    await expect(store.read(['shop'])).rejects.toThrow('not allowed');
  });
});
