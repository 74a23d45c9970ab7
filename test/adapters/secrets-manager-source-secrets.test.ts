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
      ['shop', { text: '{"secrets":["a"]}' }],
      ['forms', { text: '{}' }],
    ]);
    expect(secretsManager.commandCalls(GetSecretValueCommand)).toHaveLength(2);
  });

  it('says which cannot be read, and still reads the others', async () => {
    const denied = Object.assign(new Error('not allowed'), { name: 'AccessDeniedException' });
    secretsManager
      .on(GetSecretValueCommand, { SecretId: 'MauticRelay/dev/sources/shop' })
      .rejects(denied)
      .on(GetSecretValueCommand, { SecretId: 'MauticRelay/dev/sources/forms' })
      .resolves({ SecretString: '{"secrets":["b"]}' });
    const store = new SecretsManagerSourceSecrets(
      new SecretsManagerClient({ region: 'eu-west-1' }),
      'MauticRelay/dev/sources/',
    );

    const read = await store.read(['shop', 'forms']);

    expect([...read]).toEqual([
      ['shop', { unreadable: denied }],
      ['forms', { text: '{"secrets":["b"]}' }],
    ]);
  });
});
