/**
 * How fast the relay drains a backlog: events already queued on a fauxqs events queue are
 * delivered by N pollers (the local stand-in for the SQS event source mapping, batches of 200
 * within a 1 s window, as the local stack sets them) each invoking the real batch handler, into
 * the Mautic simulator answering every API call after a fixed latency, as a real Mautic across a
 * network does. Prints the rate, the Mautic calls per event, and the ratio of the rate to the
 * ideal one: every poller keeping one full batch in Mautic all the time (concurrency × batch size
 * ÷ latency), which only Mautic's latency would limit.
 *
 *   npm run bench:drain -- [events=20000] [concurrency=2] [latencyMs=50]
 *
 * The events (contacts creates with distinct emails) are queued before the clock starts; it runs
 * from starting the pollers until the simulator holds every contact. The queue emulator, the
 * simulator and the Secrets Manager stand-in run in this process, so the peak RSS and the CPU
 * include theirs (and the queueing before the clock).
 */
import { randomUUID } from 'node:crypto';
import { availableParallelism } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import { CreateSecretCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SendMessageBatchCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { SecretsManagerTokenStore } from '../functions/adapters/secrets-manager-token-store.ts';
import { SqsDeliveryQueues } from '../functions/adapters/sqs-delivery-queues.ts';
import { createBatchHandler } from '../functions/batch/handler.ts';
import { DEFAULT_DELIVERY_OPTIONS } from '../functions/core/delivery.ts';
import { MauticApiClient } from '../functions/core/mautic-api.ts';
import type { TokenSecret } from '../functions/core/token-secret.ts';
import {
  type MauticSimulator,
  startMauticSimulator,
} from '../infra/local/mautic-simulator/server.ts';
import { startSecretsManagerFake } from '../infra/local/secrets-manager-fake.ts';
import { createQueuePair, SqsEventSource } from '../infra/local/sqs-event-source.ts';
import { queueCounts, startLocalSqs } from '../test/support/local-sqs.ts';

/** The local stack's defaults (infra/local/local-stack.ts). */
const BATCH_SIZE = 200;
const BATCH_WINDOW_MS = 1_000;
const BATCH_TIMEOUT_MS = 10_000;
const VISIBILITY_TIMEOUT_SECONDS = 30;
const MAX_RECEIVE_COUNT = 5;
const TOKEN_CACHE_MS = 30_000;
/** SendMessageBatch calls in flight while the backlog is queued. */
const FILL_PARALLELISM = 16;
/** How often the simulator is looked at while the queue drains. */
const POLL_INTERVAL_MS = 10;
/** The drain gives up after this long, or 20 × the ideal time when that is longer. */
const MIN_DRAIN_TIMEOUT_MS = 120_000;

const events = positiveInteger(process.argv[2], 20_000, 'events');
const concurrency = positiveInteger(process.argv[3], 2, 'concurrency');
const latencyMs = positiveInteger(process.argv[4], 50, 'latencyMs');
const idealRate = (concurrency * BATCH_SIZE) / (latencyMs / 1000);
const drainTimeoutMs = Math.max(MIN_DRAIN_TIMEOUT_MS, (20 * events * 1000) / idealRate);

interface DrainResult {
  seconds: number;
  apiCalls: number;
  invocations: number;
}

try {
  const result = await drain();
  print(result);
} catch (error) {
  console.error(`bench:drain failed: ${error instanceof Error ? error.message : error}`);
  process.exitCode = 1;
}

async function drain(): Promise<DrainResult> {
  const stops: Array<() => Promise<void>> = [];
  try {
    const sim = await startMauticSimulator({
      faults: { seed: 1, latencyMs: { min: latencyMs, max: latencyMs }, scope: 'api' },
    });
    stops.push(() => sim.close());

    // The token as the local stack's batch handler reads it: the token secret in the Secrets
    // Manager stand-in, through SecretsManagerTokenStore with the stack's cache. The token is
    // minted by the simulator directly, so no refresher runs and /oauth is never called.
    const localAws = {
      region: 'us-east-1',
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    };
    const secretsFake = await startSecretsManagerFake();
    stops.push(() => secretsFake.close());
    const secrets = new SecretsManagerClient({ ...localAws, endpoint: secretsFake.endpoint });
    stops.push(async () => secrets.destroy());
    const tokenSecretId = 'MauticRelay/bench/token';
    const now = new Date();
    const token: TokenSecret = {
      accessToken: sim.issueToken().accessToken,
      // The simulator's default access token lifetime.
      accessTokenExpiresAt: new Date(now.getTime() + 3_600_000).toISOString(),
      obtainedWith: 'client_credentials',
      updatedAt: now.toISOString(),
    };
    await secrets.send(
      new CreateSecretCommand({ Name: tokenSecretId, SecretString: JSON.stringify(token) }),
    );

    const local = await startLocalSqs();
    stops.push(() => local.stop());
    const queues = await createQueuePair(local.sqs, {
      name: `bench-drain-${randomUUID().slice(0, 8)}`,
      maxReceiveCount: MAX_RECEIVE_COUNT,
      visibilityTimeoutSeconds: VISIBILITY_TIMEOUT_SECONDS,
    });
    await fill(local.sqs, queues.queueUrl);
    const queued = await queueCounts(local.sqs, queues.queueUrl);
    if (queued.visible !== events) {
      throw new Error(`the events queue holds ${queued.visible} messages, not ${events}`);
    }

    process.env.POWERTOOLS_METRICS_DISABLED = 'true';
    const refreshRequests: string[] = [];
    const clock = { now: () => Date.now() };
    const batch = createBatchHandler({
      api: new MauticApiClient({ baseUrl: sim.url, fetch }),
      retry: { baseSeconds: 1, maxDelaySeconds: 1, horizonSeconds: 3600, maxReceiveCount: 1000 },
      tokens: new SecretsManagerTokenStore(secrets, tokenSecretId, {
        cacheMs: TOKEN_CACHE_MS,
        clock,
      }),
      refresher: { requestRefresh: async (reason) => void refreshRequests.push(reason) },
      queues: new SqsDeliveryQueues(local.sqs, {
        eventsQueueUrl: queues.queueUrl,
        deadLetterQueueUrl: queues.deadLetterQueueUrl,
      }),
      logger: new Logger({ logLevel: 'SILENT' }),
      metrics: new Metrics({ namespace: 'MauticBatchRelay/bench', serviceName: 'bench' }),
      clock,
      sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
      random: Math.random,
      learnedLimit: { value: undefined },
      options: { ...DEFAULT_DELIVERY_OPTIONS, batchSize: BATCH_SIZE, maxDelaySeconds: 3600 },
    });

    let invocations = 0;
    let failedMessages = 0;
    const pollErrors: string[] = [];
    const pollers = Array.from(
      { length: concurrency },
      () =>
        new SqsEventSource({
          sqs: local.sqs,
          queueUrl: queues.queueUrl,
          queueArn: queues.queueArn,
          handler: batch,
          batchSize: BATCH_SIZE,
          batchWindowMs: BATCH_WINDOW_MS,
          functionTimeoutMs: BATCH_TIMEOUT_MS,
          onInvoke: (report) => {
            invocations++;
            failedMessages += report.failed.length;
          },
          onError: (error) => void pollErrors.push(String(error)),
        }),
    );
    let pollersStopped: Promise<unknown> | undefined;
    const stopPollers = () => {
      pollersStopped ??= Promise.all(pollers.map((poller) => poller.stop()));
      return pollersStopped;
    };
    stops.push(async () => void (await stopPollers()));

    const started = performance.now();
    for (const poller of pollers) poller.start();
    await untilDelivered(sim, started);
    const seconds = (performance.now() - started) / 1000;
    await stopPollers();

    const problems: string[] = [];
    const contacts = sim.records('contacts');
    const emails = new Set(contacts.map((contact) => contact.email));
    if (contacts.length !== events || emails.size !== events) {
      problems.push(`the simulator holds ${contacts.length} contacts, ${emails.size} emails`);
    }
    const left = await queueCounts(local.sqs, queues.queueUrl);
    if (left.visible + left.inFlight > 0) {
      problems.push(`the events queue still holds ${left.visible} + ${left.inFlight} in flight`);
    }
    const dead = await queueCounts(local.sqs, queues.deadLetterQueueUrl);
    if (dead.visible + dead.inFlight > 0) {
      problems.push(`${dead.visible + dead.inFlight} events were dead-lettered`);
    }
    if (failedMessages > 0) problems.push(`${failedMessages} messages were reported failed`);
    if (pollErrors.length > 0) {
      problems.push(`${pollErrors.length} polling errors, first: ${pollErrors[0]}`);
    }
    if (refreshRequests.length > 0) {
      problems.push(`the handler asked for a token refresh: ${refreshRequests[0]}`);
    }
    if (problems.length > 0) throw new Error(problems.join('; '));

    const apiCalls = sim.requests.filter((entry) => entry.path.startsWith('/api/')).length;
    return { seconds, apiCalls, invocations };
  } finally {
    for (const stop of stops.splice(0).reverse()) await stop().catch(() => {});
  }
}

/** Queues the backlog: SendMessageBatch in groups of 10, FILL_PARALLELISM calls at a time. */
async function fill(sqs: SQSClient, queueUrl: string): Promise<void> {
  const receivedAt = new Date().toISOString();
  const body = (index: number) =>
    JSON.stringify({
      v: 1,
      eventId: `drain-${index}`,
      receivedAt,
      sender: 'bench',
      entity: 'contacts',
      action: 'create',
      data: { email: `drain-${index}@example.com`, firstname: 'Drain', lastname: `N${index}` },
    });
  let next = 0;
  const worker = async () => {
    while (next < events) {
      const first = next;
      next = Math.min(events, first + 10);
      const { Failed = [] } = await sqs.send(
        new SendMessageBatchCommand({
          QueueUrl: queueUrl,
          Entries: Array.from({ length: next - first }, (_, offset) => ({
            Id: String(offset),
            MessageBody: body(first + offset),
          })),
        }),
      );
      if (Failed.length > 0) throw new Error(`SendMessageBatch failed: ${JSON.stringify(Failed)}`);
    }
  };
  await Promise.all(Array.from({ length: FILL_PARALLELISM }, worker));
}

/**
 * Resolves when the simulator holds every event. Listing the contacts costs time in proportion
 * to their number, so it is only done once the answered batch/new calls carried enough items
 * (a cheap bound from the short request log: an item carried is at most one contact created).
 */
async function untilDelivered(sim: MauticSimulator, started: number): Promise<void> {
  while (performance.now() - started < drainTimeoutMs) {
    const carried = sim.requests
      .filter((entry) => entry.path === '/api/contacts/batch/new' && entry.status !== 0)
      .reduce((sum, entry) => sum + (entry.items ?? 0), 0);
    if (carried >= events && sim.records('contacts').length >= events) return;
    await sleep(POLL_INTERVAL_MS);
  }
  const held = sim.records('contacts').length;
  throw new Error(`the simulator holds ${held} of ${events} contacts after ${drainTimeoutMs} ms`);
}

function print({ seconds, apiCalls, invocations }: DrainResult): void {
  const rate = events / seconds;
  const rssMiB = process.resourceUsage().maxRSS / 1024;
  console.log(
    `drain: ${events} queued contacts creates, ${concurrency} pollers, batches of ${BATCH_SIZE} ` +
      `within ${BATCH_WINDOW_MS} ms, Mautic latency ${latencyMs} ms per call, ` +
      `node ${process.version}, ${availableParallelism()} CPUs`,
  );
  console.log(`events:          ${events} in ${seconds.toFixed(2)} s`);
  console.log(`events/s:        ${rate.toFixed(0)}`);
  console.log(
    `Mautic calls:    ${apiCalls} (${(apiCalls / events).toFixed(4)} per event), ` +
      `${invocations} invocations (${(events / invocations).toFixed(1)} events each)`,
  );
  console.log(
    `ideal events/s:  ${idealRate.toFixed(0)} (${concurrency} × ${BATCH_SIZE} ÷ ${latencyMs} ms)`,
  );
  console.log(`measured / ideal: ${(rate / idealRate).toFixed(2)}`);
  console.log(`peak RSS:        ${rssMiB.toFixed(1)} MiB`);
}

function positiveInteger(text: string | undefined, fallback: number, name: string): number {
  if (text === undefined) return fallback;
  const value = Number(text);
  if (!Number.isInteger(value) || value < 1)
    throw new RangeError(`${name} must be a positive integer`);
  return value;
}
