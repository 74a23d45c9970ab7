/**
 * `senders` edits against the Secrets Manager stand-in the local stack uses (real HTTP, AWS's
 * version-stage semantics): each edit is a compare-and-swap on the version it read, so two edits
 * at the same moment both land, a concurrent add cannot bring back a key being removed, and an
 * edit that keeps losing the race says so and changes nothing.
 */
import {
  CreateSecretCommand,
  GetSecretValueCommand,
  PutSecretValueCommand,
  SecretsManagerClient,
} from '@aws-sdk/client-secrets-manager';
import { SQSClient } from '@aws-sdk/client-sqs';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { readSenderCredentials } from '../../functions/core/ingest/sender-credentials.ts';
import { senders } from '../../infra/cli/senders.ts';
import type { Target } from '../../infra/cli/target.ts';
import {
  type SecretsManagerFake,
  startSecretsManagerFake,
} from '../../infra/local/secrets-manager-fake.ts';

const SECRET_ID = 'MauticRelay/local/webhook';
const KEEP = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
const OLD_KEY = 'old-api-key-0123456789abcdef';

let fake: SecretsManagerFake;
let clients: SecretsManagerClient[];

beforeEach(async () => {
  fake = await startSecretsManagerFake();
  clients = [];
  await client().send(
    new CreateSecretCommand({
      Name: SECRET_ID,
      SecretString: JSON.stringify({ webhookSecrets: [KEEP], apiKeys: [OLD_KEY] }),
    }),
  );
});

afterEach(async () => {
  for (const c of clients) c.destroy();
  await fake.close();
});

function client(): SecretsManagerClient {
  const c = new SecretsManagerClient({
    endpoint: fake.endpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
  });
  clients.push(c);
  return c;
}

/** An operator's target: only the webhook secret is used here. */
function target(secrets: SecretsManagerClient): Target {
  return {
    name: 'local',
    local: true,
    ingestUrl: 'http://127.0.0.1:1/events',
    eventsQueueUrl: 'unused',
    deadLetterQueueUrl: 'unused',
    tokenSecretId: 'unused',
    webhookSecretId: SECRET_ID,
    dashboardUrl: null,
    sqs: new SQSClient({ region: 'us-east-1' }),
    secrets,
    cloudwatch: undefined,
  };
}

/** The credentials the ingest would read now. */
function current(): Array<{ id: string; value: string }> {
  return readSenderCredentials(fake.current(SECRET_ID)).map(({ id, value }) => ({ id, value }));
}

/**
 * A client whose first `readers` secret reads each wait until all of them have read: edits that
 * start at the same moment, each reading the version before the others write.
 */
function together(secrets: SecretsManagerClient, readers: number): void {
  const send = secrets.send.bind(secrets);
  let waiting = readers;
  let release = () => {};
  const allRead = new Promise<void>((resolve) => {
    release = resolve;
  });
  secrets.send = (async (command: Parameters<typeof send>[0]) => {
    const answer = await send(command);
    if (command instanceof GetSecretValueCommand && waiting > 0) {
      waiting--;
      if (waiting === 0) release();
      await allRead;
    }
    return answer;
  }) as typeof secrets.send;
}

describe('senders edits are compare-and-swap', () => {
  it('an add at the same moment as a remove keeps the key removed and the new one added', async () => {
    const shared = client();
    together(shared, 2);

    const [removed, added] = await Promise.all([
      senders(target(shared), 'remove', 'api-key-1', Date.now),
      senders(target(shared), 'add-secret', undefined, Date.now),
    ]);

    const now = current();
    expect(now.map((s) => s.value)).not.toContain(OLD_KEY);
    expect(now.map((s) => s.value)).toEqual([KEEP, added.added?.secret]);
    expect(removed.removed).toBe('api-key-1');
    // The one that lost the race read again and wrote on the other's version.
    expect(fake.calls.filter((c) => c.operation === 'GetSecretValue').length).toBeGreaterThan(2);
  });

  it('two adds at the same moment both land', async () => {
    const shared = client();
    together(shared, 2);

    const [first, second] = await Promise.all([
      senders(target(shared), 'add-key', undefined, Date.now),
      senders(target(shared), 'add-secret', undefined, Date.now),
    ]);

    expect(current().map((s) => s.value)).toEqual(
      expect.arrayContaining([KEEP, OLD_KEY, first.added?.secret, second.added?.secret]),
    );
    expect(current()).toHaveLength(4);
  });

  it('two removes of the same id at the same moment: both succeed, the id is gone once', async () => {
    const shared = client();
    together(shared, 2);

    await Promise.all([
      senders(target(shared), 'remove', 'api-key-1', Date.now),
      senders(target(shared), 'remove', 'api-key-1', Date.now),
    ]);

    expect(current().map((s) => s.value)).toEqual([KEEP]);
  });

  it('an edit that keeps losing the race says so after a bounded number of tries, and changes nothing', async () => {
    const secrets = client();
    const other = client();
    const send = secrets.send.bind(secrets);
    let interruptions = 0;
    // Another operator writes between each of this edit's reads and its write.
    secrets.send = (async (command: Parameters<typeof send>[0]) => {
      const answer = await send(command);
      if (command instanceof GetSecretValueCommand && command.input.VersionStage === undefined) {
        interruptions++;
        await other.send(
          new PutSecretValueCommand({
            SecretId: SECRET_ID,
            SecretString: JSON.stringify({ webhookSecrets: [KEEP], apiKeys: [OLD_KEY] }),
          }),
        );
      }
      return answer;
    }) as typeof secrets.send;

    await expect(senders(target(secrets), 'add-key', undefined, Date.now)).rejects.toThrow(
      /Other edits of MauticRelay\/local\/webhook got in first 5 times; this one changed nothing/,
    );
    expect(interruptions).toBeLessThanOrEqual(10);
    expect(current().map((s) => s.value)).toEqual([KEEP, OLD_KEY]);
  });
});
