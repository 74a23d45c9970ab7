/**
 * Credentials have stable ids: the sender label of an envelope, and with it the action ledger's
 * key, is `webhook#<id>` / `api-key#<id>`, the credential's id in the webhook secret, never its
 * position in the list. Removing an earlier credential changes no other sender's label, and a
 * credential added later never takes a removed one's: `addPoints` stays at most once per event.
 * Through the real ingest, the Secrets Manager credentials adapter and the delivery against the
 * simulator.
 */
import { Logger } from '@aws-lambda-powertools/logger';
import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import type { APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { mockClient } from 'aws-sdk-client-mock';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SecretsManagerIngestCredentials } from '../../functions/adapters/secrets-manager-ingest-credentials.ts';
import { planBatches } from '../../functions/core/delivery/batch-plan.ts';
import { deliverChunks } from '../../functions/core/delivery/delivery.ts';
import { queuedEventSchema } from '../../functions/core/events.ts';
import { parseCredentials } from '../../functions/core/ingest/webhook-auth.ts';
import { MauticApiClient } from '../../functions/core/mautic/mautic-api.ts';
import type { OutgoingMessage } from '../../functions/core/queue-ports.ts';
import { createIngestHandler } from '../../functions/ingest/handler.ts';
import { lambdaContext } from '../../infra/local/lambda-context.ts';
import { type MauticSimulator, startMauticSimulator } from '../../mautic-simulator/server.ts';
import { InMemoryActionLedger } from '../support/action-ledger.ts';
import {
  API_KEY,
  httpApiEvent,
  INGEST_LIMITS,
  NOW,
  OTHER_SECRET,
  recordingQueue,
  signedHeaders,
  WEBHOOK_SECRET,
} from '../support/ingest.ts';
import { recorder } from '../support/observe.ts';

const THIRD_SECRET = `whsec_${Buffer.alloc(32, 9).toString('base64')}`;
const secretsManager = mockClient(SecretsManagerClient);
let stored: Array<{ id: string; kind: 'webhook_secret' | 'api_key'; secret: string }> = [];
let sim: MauticSimulator;

beforeEach(async () => {
  secretsManager.on(GetSecretValueCommand).callsFake(async () => ({
    SecretString: JSON.stringify({
      senders: stored.map((sender) => ({ ...sender, createdAt: null })),
    }),
  }));
  sim = await startMauticSimulator();
});

afterEach(async () => {
  secretsManager.reset();
  await sim.close();
});

/** The ingest as deployed: credentials read from the secret on every request (no cache). */
function ingest() {
  const queue = recordingQueue();
  const credentials = new SecretsManagerIngestCredentials(
    new SecretsManagerClient({ region: 'eu-west-1' }),
    'relay/dev/webhook',
    { cacheMs: 0, clock: { now: () => NOW } },
  );
  const handler = createIngestHandler({
    credentials: () => credentials.load(),
    queue,
    clock: { now: () => NOW },
    newId: () => 'generated',
    limits: INGEST_LIMITS,
    logger: new Logger({ serviceName: 'sender-ids-test', logLevel: 'SILENT' }),
  });
  let request = 0;
  return {
    queue,
    /** Posts `event` signed with `secret` under a new webhook id; its status. */
    async post(event: Record<string, unknown>, secret: string): Promise<number> {
      const body = JSON.stringify(event);
      const headers = signedHeaders(body, { id: `msg_${++request}`, secret });
      const result = (await handler(
        httpApiEvent({ body, headers }),
        lambdaContext('ingest', 10_000),
      )) as APIGatewayProxyStructuredResultV2;
      return result.statusCode ?? 0;
    },
  };
}

/** Delivers queued messages as the batch function does, with one ledger across runs. */
async function deliver(messages: OutgoingMessage[], ledger: InMemoryActionLedger) {
  const observed = recorder();
  const incoming = messages.map((message, i) => ({
    messageId: `m${i}-${message.deduplicationId}`,
    event: queuedEventSchema().parse(JSON.parse(message.body)),
  }));
  const token = sim.issueToken().accessToken;
  await deliverChunks(planBatches(incoming, 200), Date.now() + 60_000, {
    api: new MauticApiClient({ baseUrl: sim.url, fetch }),
    ledger,
    tokens: { accessToken: async () => token },
    logger: observed.logger,
    metrics: observed.metrics,
    clock: Date,
    sleep: async () => {},
    random: () => 0.5,
    learnedLimit: { value: undefined },
  });
}

const points = (eventId: string, value: number) => ({
  entity: 'contacts',
  action: 'addPoints',
  eventId,
  match: { email: 'ann@example.com' },
  points: value,
});

describe('the sender label of an envelope', () => {
  it('is the credential’s id, the same after an earlier credential is removed', async () => {
    stored = [
      { id: 'shop', kind: 'webhook_secret', secret: WEBHOOK_SECRET },
      { id: 'crm', kind: 'webhook_secret', secret: OTHER_SECRET },
      { id: 'forms', kind: 'api_key', secret: API_KEY },
    ];
    const relay = ingest();

    expect(await relay.post(points('order-1', 10), OTHER_SECRET)).toBe(202);
    stored = stored.filter((sender) => sender.id !== 'shop');
    expect(await relay.post(points('order-1', 10), OTHER_SECRET)).toBe(202);

    const senders = relay.queue.messages.map((message) => JSON.parse(message.body).sender);
    expect(senders).toEqual(['webhook#crm', 'webhook#crm']);
  });

  it('names a credential given as a value (WEBHOOK_SECRET, INGEST_API_KEYS) by a digest that never holds it', () => {
    const first = parseCredentials({ webhookSecrets: [WEBHOOK_SECRET], apiKeys: [API_KEY] });
    const reordered = parseCredentials({
      webhookSecrets: [OTHER_SECRET, WEBHOOK_SECRET],
      apiKeys: [API_KEY],
    });

    expect(reordered.webhookIds[1]).toBe(first.webhookIds[0]);
    expect(reordered.apiKeyIds[0]).toBe(first.apiKeyIds[0]);
    expect(first.webhookIds[0]).not.toBe(reordered.webhookIds[0]);
    for (const id of [...first.webhookIds, ...first.apiKeyIds]) {
      expect(id).toMatch(/^env-[0-9a-f]{16}$/);
      expect(WEBHOOK_SECRET).not.toContain(id.slice(4));
      expect(API_KEY).not.toContain(id.slice(4));
    }
  });
});

describe('addPoints at most once per event, whatever happens to other credentials', () => {
  it('applies an event sent again after an earlier credential was removed once: 10 points, not 20', async () => {
    const ann = sim.seed('contacts', { email: 'ann@example.com', points: 0 });
    stored = [
      { id: 'shop', kind: 'webhook_secret', secret: WEBHOOK_SECRET },
      { id: 'crm', kind: 'webhook_secret', secret: OTHER_SECRET },
    ];
    const relay = ingest();
    const ledger = new InMemoryActionLedger();

    await relay.post(points('order-1', 10), OTHER_SECRET);
    await deliver(relay.queue.messages.splice(0), ledger);
    stored = stored.filter((sender) => sender.id !== 'shop');
    await relay.post(points('order-1', 10), OTHER_SECRET);
    await deliver(relay.queue.messages.splice(0), ledger);

    expect(sim.records('contacts').find((c) => c.id === ann.id)?.points).toBe(10);
  });

  it('applies a new sender’s own event with a removed sender’s event id: 50 points, not 0', async () => {
    const ann = sim.seed('contacts', { email: 'ann@example.com', points: 0 });
    stored = [
      { id: 'shop', kind: 'webhook_secret', secret: WEBHOOK_SECRET },
      { id: 'crm', kind: 'webhook_secret', secret: OTHER_SECRET },
    ];
    const relay = ingest();
    const ledger = new InMemoryActionLedger();

    await relay.post(points('order-1', 10), WEBHOOK_SECRET);
    await deliver(relay.queue.messages.splice(0), ledger);
    // The shop's secret goes; the forms tool gets a secret of its own, first in the list now.
    stored = [
      { id: 'forms', kind: 'webhook_secret', secret: THIRD_SECRET },
      { id: 'crm', kind: 'webhook_secret', secret: OTHER_SECRET },
    ];
    await relay.post(points('order-1', 50), THIRD_SECRET);
    await deliver(relay.queue.messages.splice(0), ledger);

    expect(sim.records('contacts').find((c) => c.id === ann.id)?.points).toBe(60);
  });

  it('still delivers an envelope queued with a label by position, keyed as before', async () => {
    const ann = sim.seed('contacts', { email: 'ann@example.com', points: 0 });
    const ledger = new InMemoryActionLedger();
    const queued: OutgoingMessage = {
      eventId: 'order-9',
      groupId: 'g',
      deduplicationId: 'old',
      body: JSON.stringify({
        v: 1,
        receivedAt: new Date(NOW).toISOString(),
        sender: 'webhook#1',
        ...points('order-9', 7),
      }),
    };

    await deliver([queued], ledger);
    await deliver([queued], ledger);

    expect(sim.records('contacts').find((c) => c.id === ann.id)?.points).toBe(7);
  });
});
