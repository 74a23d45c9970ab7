import { connect } from 'node:net';
import {
  CreateSecretCommand,
  DeleteSecretCommand,
  GetSecretValueCommand,
  InternalServiceError,
  InvalidParameterException,
  InvalidRequestException,
  PutSecretValueCommand,
  ResourceExistsException,
  ResourceNotFoundException,
  SecretsManagerClient,
  SecretsManagerServiceException,
  UpdateSecretVersionStageCommand,
} from '@aws-sdk/client-secrets-manager';
import { describe, expect, it, onTestFinished, vi } from 'vitest';
import {
  type SecretsManagerFake,
  startSecretsManagerFake,
} from '../../infra/local/secrets-manager-fake.ts';
import { thrownBy } from '../support/secrets.ts';

const NAME = 'relay/test/token';
/** ClientRequestTokens are version ids: 32 to 64 characters. */
const TOKEN_A = 'token-a-0000000000000000000000000000';
const TOKEN_B = 'token-b-0000000000000000000000000000';
const TOKEN_C = 'token-c-0000000000000000000000000000';
const ARN_PATTERN =
  /^arn:aws:secretsmanager:us-east-1:000000000000:secret:relay\/test\/token-[A-Za-z0-9]{6}$/;

function client(endpoint?: string): SecretsManagerClient {
  const sdk = new SecretsManagerClient({
    ...(endpoint === undefined ? {} : { endpoint }),
    region: 'us-east-1',
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
    // Bounds every wait on the fake; the SDK has no request timeout of its own.
    requestHandler: { connectionTimeout: 1_000, requestTimeout: 2_000 },
  });
  onTestFinished(() => sdk.destroy());
  return sdk;
}

async function setup(): Promise<{ fake: SecretsManagerFake; sm: SecretsManagerClient }> {
  const fake = await startSecretsManagerFake();
  onTestFinished(() => fake.close());
  return { fake, sm: client(fake.endpoint) };
}

/** A secret holding one version per value, put in order with the given tokens. */
async function secretWith(sm: SecretsManagerClient, values: string[], tokens: string[] = []) {
  const created = await sm.send(new CreateSecretCommand({ Name: NAME }));
  const versionIds: string[] = [];
  for (const [i, value] of values.entries()) {
    const put = await sm.send(
      new PutSecretValueCommand({
        SecretId: NAME,
        SecretString: value,
        ...(tokens[i] === undefined ? {} : { ClientRequestToken: tokens[i] }),
      }),
    );
    versionIds.push(put.VersionId ?? '');
  }
  return { arn: created.ARN ?? '', versionIds };
}

describe('CreateSecret and GetSecretValue', () => {
  it('creates a secret with a value and reads it by name, full ARN and partial ARN', async () => {
    const { fake, sm } = await setup();

    const created = await sm.send(
      new CreateSecretCommand({ Name: NAME, SecretString: 'value-1', ClientRequestToken: TOKEN_A }),
    );
    const byName = await sm.send(new GetSecretValueCommand({ SecretId: NAME }));
    const byArn = await sm.send(new GetSecretValueCommand({ SecretId: created.ARN }));
    const byPartialArn = await sm.send(
      new GetSecretValueCommand({ SecretId: created.ARN?.slice(0, -7) }),
    );

    expect(created).toMatchObject({ Name: NAME, VersionId: TOKEN_A });
    expect(created.ARN).toMatch(ARN_PATTERN);
    expect(byName).toMatchObject({
      ARN: created.ARN,
      Name: NAME,
      VersionId: TOKEN_A,
      SecretString: 'value-1',
      VersionStages: ['AWSCURRENT'],
    });
    expect(byName.CreatedDate).toBeInstanceOf(Date);
    expect(Math.abs((byName.CreatedDate?.getTime() ?? 0) - Date.now())).toBeLessThan(5_000);
    expect(byArn.SecretString).toBe('value-1');
    expect(byPartialArn.SecretString).toBe('value-1');
    expect(fake.current(NAME)).toBe('value-1');
  });

  it('creates a secret without a value, which has no version until the first put', async () => {
    const { fake, sm } = await setup();

    const created = await sm.send(new CreateSecretCommand({ Name: NAME }));
    const error = await thrownBy(() => sm.send(new GetSecretValueCommand({ SecretId: NAME })));
    const put = await sm.send(new PutSecretValueCommand({ SecretId: NAME, SecretString: 'v1' }));

    expect(created.VersionId).toBeUndefined();
    expect(error).toBeInstanceOf(ResourceNotFoundException);
    expect((error as Error).message).toBe(
      "Secrets Manager can't find the specified secret value for staging label: AWSCURRENT",
    );
    // The SDK fills in ClientRequestToken with a UUID when the caller leaves it out.
    expect(put.VersionId).toMatch(/^[0-9a-f-]{36}$/);
    expect(put.VersionStages).toEqual(['AWSCURRENT']);
    expect(fake.current(NAME)).toBe('v1');
  });

  it('answers ResourceNotFoundException for an unknown secret and an unknown version', async () => {
    const { sm } = await setup();
    await secretWith(sm, ['v1']);

    const errors = await Promise.all([
      thrownBy(() => sm.send(new GetSecretValueCommand({ SecretId: 'relay/nope' }))),
      thrownBy(() =>
        sm.send(new PutSecretValueCommand({ SecretId: 'relay/nope', SecretString: 'x' })),
      ),
      thrownBy(() =>
        sm.send(
          new GetSecretValueCommand({
            SecretId: `arn:aws:secretsmanager:us-east-1:000000000000:secret:${NAME}-AAAAAA`,
          }),
        ),
      ),
      thrownBy(() => sm.send(new GetSecretValueCommand({ SecretId: NAME, VersionId: TOKEN_C }))),
      thrownBy(() =>
        sm.send(new GetSecretValueCommand({ SecretId: NAME, VersionStage: 'AWSPREVIOUS' })),
      ),
    ]);

    for (const error of errors) {
      expect(error).toBeInstanceOf(ResourceNotFoundException);
      expect(error).toMatchObject({ $fault: 'client', $metadata: { httpStatusCode: 400 } });
    }
    expect((errors[0] as Error).message).toBe("Secrets Manager can't find the specified secret.");
  });

  it('refuses to create a secret whose name is taken', async () => {
    const { fake, sm } = await setup();
    await sm.send(new CreateSecretCommand({ Name: NAME, SecretString: 'first' }));

    const error = await thrownBy(() =>
      sm.send(new CreateSecretCommand({ Name: NAME, SecretString: 'second' })),
    );

    expect(error).toBeInstanceOf(ResourceExistsException);
    expect(fake.current(NAME)).toBe('first');
  });
});

describe('PutSecretValue', () => {
  it('rotates AWSCURRENT and AWSPREVIOUS over three puts', async () => {
    const { fake, sm } = await setup();

    const { versionIds } = await secretWith(sm, ['v1', 'v2', 'v3'], [TOKEN_A, TOKEN_B, TOKEN_C]);
    const current = await sm.send(new GetSecretValueCommand({ SecretId: NAME }));
    const previous = await sm.send(
      new GetSecretValueCommand({ SecretId: NAME, VersionStage: 'AWSPREVIOUS' }),
    );
    const oldest = await sm.send(new GetSecretValueCommand({ SecretId: NAME, VersionId: TOKEN_A }));

    expect(versionIds).toEqual([TOKEN_A, TOKEN_B, TOKEN_C]);
    expect(fake.versions(NAME)).toEqual([
      { versionId: TOKEN_A, stages: [], secretString: 'v1' },
      { versionId: TOKEN_B, stages: ['AWSPREVIOUS'], secretString: 'v2' },
      { versionId: TOKEN_C, stages: ['AWSCURRENT'], secretString: 'v3' },
    ]);
    expect(current).toMatchObject({ VersionId: TOKEN_C, SecretString: 'v3' });
    expect(previous).toMatchObject({
      VersionId: TOKEN_B,
      SecretString: 'v2',
      VersionStages: ['AWSPREVIOUS'],
    });
    expect(oldest).toMatchObject({ VersionId: TOKEN_A, SecretString: 'v1', VersionStages: [] });
  });

  it('answers a repeated ClientRequestToken with the same value with the existing version', async () => {
    const { fake, sm } = await setup();
    await secretWith(sm, ['v1', 'v2'], [TOKEN_A, TOKEN_B]);

    const repeatLatest = await sm.send(
      new PutSecretValueCommand({
        SecretId: NAME,
        SecretString: 'v2',
        ClientRequestToken: TOKEN_B,
      }),
    );
    const repeatOlder = await sm.send(
      new PutSecretValueCommand({
        SecretId: NAME,
        SecretString: 'v1',
        ClientRequestToken: TOKEN_A,
      }),
    );

    expect(repeatLatest).toMatchObject({ VersionId: TOKEN_B, VersionStages: ['AWSCURRENT'] });
    // Replaying the older put does not make it current again.
    expect(repeatOlder).toMatchObject({ VersionId: TOKEN_A, VersionStages: ['AWSPREVIOUS'] });
    expect(fake.versions(NAME)).toEqual([
      { versionId: TOKEN_A, stages: ['AWSPREVIOUS'], secretString: 'v1' },
      { versionId: TOKEN_B, stages: ['AWSCURRENT'], secretString: 'v2' },
    ]);
  });

  it('rejects a repeated ClientRequestToken with a different value as ResourceExistsException', async () => {
    const { fake, sm } = await setup();
    await secretWith(sm, ['v1'], [TOKEN_A]);

    const error = await thrownBy(() =>
      sm.send(
        new PutSecretValueCommand({
          SecretId: NAME,
          SecretString: 'v2',
          ClientRequestToken: TOKEN_A,
        }),
      ),
    );

    expect(error).toBeInstanceOf(ResourceExistsException);
    expect(error).toMatchObject({
      name: 'ResourceExistsException',
      message: "You can't modify an existing version, you can only create a new version.",
      $metadata: { httpStatusCode: 400, attempts: 1 },
    });
    expect(fake.versions(NAME)).toEqual([
      { versionId: TOKEN_A, stages: ['AWSCURRENT'], secretString: 'v1' },
    ]);
  });

  it('rejects a ClientRequestToken shorter than 32 or longer than 64 characters', async () => {
    const { fake, sm } = await setup();
    await secretWith(sm, ['v1']);

    const errors = await Promise.all(
      ['short', 'x'.repeat(65)].map((token) =>
        thrownBy(() =>
          sm.send(
            new PutSecretValueCommand({
              SecretId: NAME,
              SecretString: 'v2',
              ClientRequestToken: token,
            }),
          ),
        ),
      ),
    );

    for (const error of errors) {
      // Not in the SDK's error model, so it arrives as the service's base exception.
      expect(error).toBeInstanceOf(SecretsManagerServiceException);
      expect(error).toMatchObject({ name: 'ValidationException', $fault: 'client' });
    }
    expect(fake.versions(NAME)).toHaveLength(1);
  });

  it('stages a pending version without making it current', async () => {
    const { fake, sm } = await setup();
    await secretWith(sm, ['v1'], [TOKEN_A]);

    const pending = await sm.send(
      new PutSecretValueCommand({
        SecretId: NAME,
        SecretString: 'v2',
        ClientRequestToken: TOKEN_B,
        VersionStages: ['AWSPENDING'],
      }),
    );

    expect(pending.VersionStages).toEqual(['AWSPENDING']);
    expect(fake.current(NAME)).toBe('v1');
    const read = await sm.send(
      new GetSecretValueCommand({ SecretId: NAME, VersionStage: 'AWSPENDING' }),
    );
    expect(read.SecretString).toBe('v2');
  });
});

describe('UpdateSecretVersionStage', () => {
  it('moves AWSCURRENT when RemoveFromVersionId names its holder, and AWSPREVIOUS follows', async () => {
    const { fake, sm } = await setup();
    await secretWith(sm, ['v1', 'v2', 'v3'], [TOKEN_A, TOKEN_B, TOKEN_C]);

    const moved = await sm.send(
      new UpdateSecretVersionStageCommand({
        SecretId: NAME,
        VersionStage: 'AWSCURRENT',
        MoveToVersionId: TOKEN_A,
        RemoveFromVersionId: TOKEN_C,
      }),
    );

    expect(moved.Name).toBe(NAME);
    expect(moved.ARN).toMatch(ARN_PATTERN);
    expect(fake.versions(NAME).map((v) => [v.versionId, v.stages])).toEqual([
      [TOKEN_A, ['AWSCURRENT']],
      [TOKEN_B, []],
      [TOKEN_C, ['AWSPREVIOUS']],
    ]);
    expect(fake.current(NAME)).toBe('v1');
  });

  it('refuses a move whose RemoveFromVersionId is stale or missing, and changes nothing', async () => {
    const { fake, sm } = await setup();
    await secretWith(sm, ['v1', 'v2', 'v3'], [TOKEN_A, TOKEN_B, TOKEN_C]);
    const before = fake.versions(NAME);

    // Another writer saw v2 as current; v3 replaced it since.
    const stale = await thrownBy(() =>
      sm.send(
        new UpdateSecretVersionStageCommand({
          SecretId: NAME,
          VersionStage: 'AWSCURRENT',
          MoveToVersionId: TOKEN_A,
          RemoveFromVersionId: TOKEN_B,
        }),
      ),
    );
    const missing = await thrownBy(() =>
      sm.send(
        new UpdateSecretVersionStageCommand({
          SecretId: NAME,
          VersionStage: 'AWSCURRENT',
          MoveToVersionId: TOKEN_A,
        }),
      ),
    );

    expect(stale).toBeInstanceOf(InvalidParameterException);
    expect(missing).toBeInstanceOf(InvalidParameterException);
    expect((missing as Error).message).toContain(`currently attached to version ${TOKEN_C}`);
    expect(fake.versions(NAME)).toEqual(before);
  });

  it('promotes a pending version and removes a custom label', async () => {
    const { fake, sm } = await setup();
    await secretWith(sm, ['v1'], [TOKEN_A]);
    await sm.send(
      new PutSecretValueCommand({
        SecretId: NAME,
        SecretString: 'v2',
        ClientRequestToken: TOKEN_B,
        VersionStages: ['AWSPENDING'],
      }),
    );

    await sm.send(
      new UpdateSecretVersionStageCommand({
        SecretId: NAME,
        VersionStage: 'AWSCURRENT',
        MoveToVersionId: TOKEN_B,
        RemoveFromVersionId: TOKEN_A,
      }),
    );
    await sm.send(
      new UpdateSecretVersionStageCommand({
        SecretId: NAME,
        VersionStage: 'AWSPENDING',
        RemoveFromVersionId: TOKEN_B,
      }),
    );

    expect(fake.versions(NAME).map((v) => [v.versionId, v.stages])).toEqual([
      [TOKEN_A, ['AWSPREVIOUS']],
      [TOKEN_B, ['AWSCURRENT']],
    ]);
  });
});

describe('the protocol edges', () => {
  it('answers an operation it does not implement with UnknownOperationException', async () => {
    const { sm } = await setup();

    const error = await thrownBy(() => sm.send(new DeleteSecretCommand({ SecretId: NAME })));

    expect(error).toBeInstanceOf(SecretsManagerServiceException);
    expect(error).toMatchObject({
      name: 'UnknownOperationException',
      $metadata: { httpStatusCode: 400 },
    });
  });

  it('refuses a body over 1 MiB with ValidationException, without reading the rest', async () => {
    const { fake } = await setup();
    const { port } = new URL(fake.endpoint);
    // 5 MiB announced, a little over 1 MiB sent, the socket left open: an answer can only come
    // if the fake stops reading at its cap.
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = connect({ host: '127.0.0.1', port: Number(port) });
      const chunks: Buffer[] = [];
      const timer = setTimeout(() => {
        socket.destroy();
        reject(new Error('no answer within 5 s'));
      }, 5_000);
      socket.on('data', (chunk: Buffer) => chunks.push(chunk));
      socket.on('error', () => undefined);
      socket.on('close', () => {
        clearTimeout(timer);
        resolve(Buffer.concat(chunks).toString('latin1'));
      });
      socket.write(
        'POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Amz-Target: secretsmanager.CreateSecret\r\n' +
          `Content-Type: application/x-amz-json-1.1\r\nContent-Length: ${5 * 1024 * 1024}\r\n\r\n`,
      );
      socket.write(Buffer.alloc(1024 * 1024 + 100, 'a'));
    });

    expect(answer).toMatch(/^HTTP\/1\.1 400 /);
    expect(answer).toMatch(/\r\nx-amzn-errortype: ValidationException\r\n/i);
    expect(answer).toMatch(/\r\nconnection: close\r\n/i);
    expect(fake.calls).toEqual([{ operation: 'CreateSecret' }]);
  });

  it('is reached through AWS_ENDPOINT_URL_SECRETS_MANAGER', async () => {
    const fake = await startSecretsManagerFake();
    onTestFinished(() => fake.close());
    vi.stubEnv('AWS_ENDPOINT_URL_SECRETS_MANAGER', fake.endpoint);
    onTestFinished(() => {
      vi.unstubAllEnvs();
    });

    await client().send(new CreateSecretCommand({ Name: NAME, SecretString: 'via-env' }));

    expect(fake.current(NAME)).toBe('via-env');
  });
});

describe('failNext and calls', () => {
  it('fails once with a 500 that the SDK retries, so the caller never sees it', async () => {
    const { fake, sm } = await setup();
    await secretWith(sm, ['v1']);
    fake.failNext('GetSecretValue');

    const read = await sm.send(new GetSecretValueCommand({ SecretId: NAME }));

    expect(read.SecretString).toBe('v1');
    expect(read.$metadata.attempts).toBe(2);
    expect(fake.calls.filter((call) => call.operation === 'GetSecretValue')).toEqual([
      { operation: 'GetSecretValue', secretId: NAME },
      { operation: 'GetSecretValue', secretId: NAME },
    ]);
  });

  it('surfaces InternalServiceError once the SDK has used its three attempts', async () => {
    const { fake, sm } = await setup();
    await secretWith(sm, ['v1']);
    fake.failNext('PutSecretValue', 3);

    const error = await thrownBy(() =>
      sm.send(new PutSecretValueCommand({ SecretId: NAME, SecretString: 'v2' })),
    );

    expect(error).toBeInstanceOf(InternalServiceError);
    expect(error).toMatchObject({
      $fault: 'server',
      $metadata: { httpStatusCode: 500, attempts: 3 },
    });
    expect(fake.calls.filter((call) => call.operation === 'PutSecretValue')).toHaveLength(4);
    expect(fake.current(NAME)).toBe('v1');
  });

  it('fails at once with an injected 400, and the next call succeeds', async () => {
    const { fake, sm } = await setup();
    await secretWith(sm, ['v1']);
    fake.failNext('GetSecretValue', 1, { code: 'InvalidRequestException', status: 400 });

    const error = await thrownBy(() => sm.send(new GetSecretValueCommand({ SecretId: NAME })));
    const read = await sm.send(new GetSecretValueCommand({ SecretId: NAME }));

    expect(error).toBeInstanceOf(InvalidRequestException);
    expect(error).toMatchObject({ $metadata: { httpStatusCode: 400, attempts: 1 } });
    expect(read.SecretString).toBe('v1');
    expect(fake.calls.filter((call) => call.operation === 'GetSecretValue')).toHaveLength(2);
  });

  it('records every call in order without a secret value, and logs nothing', async () => {
    const consoleCalls = (['log', 'info', 'warn', 'error', 'debug'] as const).map((method) =>
      vi.spyOn(console, method).mockImplementation(() => undefined),
    );
    onTestFinished(() => {
      for (const spy of consoleCalls) spy.mockRestore();
    });
    const { fake, sm } = await setup();
    const secrets = ['secret-value-one', 'secret-value-two', 'secret-value-three'];

    await sm.send(new CreateSecretCommand({ Name: NAME, SecretString: secrets[0] }));
    await sm.send(
      new PutSecretValueCommand({
        SecretId: NAME,
        SecretString: secrets[1],
        ClientRequestToken: TOKEN_B,
      }),
    );
    await thrownBy(() =>
      sm.send(
        new PutSecretValueCommand({
          SecretId: NAME,
          SecretString: secrets[2],
          ClientRequestToken: TOKEN_B,
        }),
      ),
    );
    await sm.send(new GetSecretValueCommand({ SecretId: NAME }));
    await thrownBy(() => sm.send(new DeleteSecretCommand({ SecretId: NAME })));

    expect(fake.calls).toEqual([
      { operation: 'CreateSecret', secretId: NAME },
      { operation: 'PutSecretValue', secretId: NAME },
      { operation: 'PutSecretValue', secretId: NAME },
      { operation: 'GetSecretValue', secretId: NAME },
      { operation: 'DeleteSecret', secretId: NAME },
    ]);
    const recorded = JSON.stringify(fake.calls);
    for (const secret of secrets) expect(recorded).not.toContain(secret);
    for (const spy of consoleCalls) expect(spy).not.toHaveBeenCalled();
  });
});
