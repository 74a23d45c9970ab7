/**
 * The local stack's edges, what stands in for AWS and Mautic on this machine: the Mautic (the
 * simulator, unless MAUTIC_BASE_URL names one), the Secrets Manager stand-in with the stack's
 * secrets, and fauxqs with the events queue and its dead-letter queue. Each pushes its stops.
 */

import { randomBytes } from 'node:crypto';
import { CreateSecretCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { GetQueueAttributesCommand, SQSClient } from '@aws-sdk/client-sqs';
import type { RetryPolicy } from '../../functions/core/retry-policy.ts';
import { secretNames } from '../../functions/shared/secret-names.ts';
import { DEFAULT_SIMULATOR_CLIENT, startMauticSimulator } from '../../mautic-simulator/server.ts';
import { type FauxqsThread, startFauxqsThread } from './fauxqs-thread.ts';
import type { LocalConfig } from './local-config.ts';
import { seedLocalMautic } from './mautic-seed.ts';
import { createQueuePair } from './queue-pair.ts';
import { startSecretsManagerFake } from './secrets-manager-fake.ts';

/** What stops the stack, run last first. */
export type Stops = Array<() => Promise<void>>;

const LOCAL_AWS = {
  region: 'us-east-1',
  credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
};

/** The Mautic the relay delivers to, as its client credential secret names it. */
export interface MauticCredential {
  baseUrl: string;
  clientId: string;
  clientSecret: string;
  grantType: LocalConfig['MAUTIC_GRANT_TYPE'];
}

/** The Mautic of MAUTIC_BASE_URL, or else an embedded simulator. */
export async function startMautic(
  config: LocalConfig,
  stops: Stops,
): Promise<{ credential: MauticCredential; simulated: boolean }> {
  if (config.MAUTIC_BASE_URL) {
    const credential = {
      baseUrl: config.MAUTIC_BASE_URL,
      clientId: config.MAUTIC_CLIENT_ID ?? '',
      clientSecret: config.MAUTIC_CLIENT_SECRET ?? '',
      grantType: config.MAUTIC_GRANT_TYPE,
    };
    return { credential, simulated: false };
  }
  const sim = await startMauticSimulator({
    clients: [
      {
        ...DEFAULT_SIMULATOR_CLIENT,
        // What `authorize --local` sends, so the authorization_code flow can be tried here.
        redirectUris: [`http://127.0.0.1:${config.AUTHORIZE_PORT}/callback`],
      },
    ],
    mauticVersion: config.MAUTIC_SIMULATOR_VERSION ?? '5.1',
  });
  stops.push(() => sim.close());
  seedLocalMautic(sim);
  const credential = {
    baseUrl: sim.url,
    clientId: DEFAULT_SIMULATOR_CLIENT.clientId,
    clientSecret: DEFAULT_SIMULATOR_CLIENT.clientSecret,
    grantType: config.MAUTIC_GRANT_TYPE,
  };
  return { credential, simulated: true };
}

export type LocalSecrets = Awaited<ReturnType<typeof startSecrets>>;

/**
 * The Secrets Manager stand-in with the client credential and an empty token secret, named as
 * the stack names them for the environment `local`.
 */
export async function startSecrets(credential: MauticCredential, stops: Stops) {
  const fake = await startSecretsManagerFake();
  stops.push(() => fake.close());
  const client = new SecretsManagerClient({ ...LOCAL_AWS, endpoint: fake.endpoint });
  stops.push(async () => client.destroy());
  const names = secretNames('local');
  const ids = { clientSecretId: names.client, tokenSecretId: names.token };
  await client.send(
    new CreateSecretCommand({ Name: ids.clientSecretId, SecretString: JSON.stringify(credential) }),
  );
  await client.send(new CreateSecretCommand({ Name: ids.tokenSecretId, SecretString: '{}' }));
  return { client, endpoint: fake.endpoint, ids, webhookSecretId: names.webhook };
}

/**
 * The sender credentials in the stand-in, which the ingest reads as in the cloud
 * (WEBHOOK_SECRET_ID, a 1 s cache), so `npx mautic-relay senders … --local` changes them while
 * the stack runs. Without WEBHOOK_SECRET one is made up, and answered.
 */
export async function storeSenders(
  config: LocalConfig,
  secrets: LocalSecrets,
): Promise<string | undefined> {
  const generated = config.WEBHOOK_SECRET.length === 0;
  const webhookSecrets = generated
    ? [`whsec_${randomBytes(32).toString('base64')}`]
    : config.WEBHOOK_SECRET;
  const sender = (id: string, kind: string) => (secret: string, i: number) => ({
    id: `${id}-${i + 1}`,
    kind,
    secret,
    createdAt: new Date().toISOString(),
  });
  await secrets.client.send(
    new CreateSecretCommand({
      Name: secrets.webhookSecretId,
      // The `senders` format (functions/core/ingest/sender-credentials.ts), created now.
      SecretString: JSON.stringify({
        senders: [
          ...webhookSecrets.map(sender('webhook-secret', 'webhook_secret')),
          ...config.INGEST_API_KEYS.map(sender('api-key', 'api_key')),
        ],
      }),
    }),
  );
  return generated ? webhookSecrets[0] : undefined;
}

export interface LocalQueues {
  fauxqs: FauxqsThread;
  sqs: SQSClient;
  /** The SQS endpoint, for clients of other threads and the operator commands. */
  endpoint: string;
  queueUrl: string;
  queueArn: string;
  deadLetterQueueUrl: string;
}

/**
 * fauxqs on a thread of its own (the batch handler keeps this loop, the ingest one of its own),
 * with the events queue and its dead-letter queue as the stack makes them. When the stack stops
 * it says what the in-memory queues still held.
 */
export async function startQueues(
  config: LocalConfig,
  retry: RetryPolicy,
  print: (line: string) => void,
  stops: Stops,
): Promise<LocalQueues> {
  const fauxqs = await startFauxqsThread();
  stops.push(() => fauxqs.stop());
  const endpoint = `http://127.0.0.1:${fauxqs.port}`;
  const sqs = new SQSClient({ ...LOCAL_AWS, endpoint });
  stops.push(async () => sqs.destroy());
  const queues = await createQueuePair(sqs, {
    name: 'mautic-relay-events',
    maxReceiveCount: retry.maxReceiveCount,
    visibilityTimeoutSeconds: config.VISIBILITY_TIMEOUT_SECONDS,
  });
  // Runs after the pollers have stopped.
  stops.push(async () => {
    const left = await queueCounts(sqs, queues.queueUrl);
    const dead = await queueCounts(sqs, queues.deadLetterQueueUrl);
    if (left > 0)
      print(`${events(left)} still queued; the local queues live in memory, so they are gone.`);
    if (dead > 0) print(`${events(dead)} in the dead-letter queue.`);
  });
  return { fauxqs, sqs, endpoint, ...queues };
}

async function queueCounts(sqs: SQSClient, queueUrl: string): Promise<number> {
  const { Attributes = {} } = await sqs.send(
    new GetQueueAttributesCommand({
      QueueUrl: queueUrl,
      AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
    }),
  );
  return (
    Number(Attributes.ApproximateNumberOfMessages ?? 0) +
    Number(Attributes.ApproximateNumberOfMessagesNotVisible ?? 0)
  );
}

/** "1 event was", "2 events were". */
function events(count: number): string {
  return count === 1 ? '1 event was' : `${count} events were`;
}
