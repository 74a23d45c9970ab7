import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { parseCredentials, signWebhook } from '../../functions/core/ingest/webhook-auth.ts';
import { ENV, loadIngestConfig } from '../../functions/shared/config.ts';
import { startIngestThread } from '../../infra/local/ingest-thread.ts';
import { createQueuePair } from '../../infra/local/queue-pair.ts';
import {
  type LocalSqs,
  receiveUntil,
  startLocalSqs,
  uniqueQueueName,
} from '../support/local-sqs.ts';

let local: LocalSqs;
let queueUrl: string;
const secret = `whsec_${randomBytes(32).toString('base64')}`;

beforeAll(async () => {
  local = await startLocalSqs();
  ({ queueUrl } = await createQueuePair(local.sqs, {
    name: uniqueQueueName('ingest-thread'),
    maxReceiveCount: 5,
    visibilityTimeoutSeconds: 30,
  }));
});

afterAll(async () => {
  await local.stop();
});

function config(extra: Record<string, string> = {}) {
  return loadIngestConfig({
    [ENV.EVENTS_QUEUE_URL]: queueUrl,
    [ENV.WEBHOOK_SECRET]: secret,
    [ENV.DEDUP_WINDOW_SECONDS]: '0',
    [ENV.MAX_RECORD_EVENTS_PER_MINUTE]: '0',
    ...extra,
  });
}

/** Standard Webhooks headers for `body`, signed with the test's secret. */
function signed(body: string, id: string): Record<string, string> {
  const key = parseCredentials({ webhookSecrets: [secret], apiKeys: [] }).webhookKeys[0];
  if (key === undefined) throw new Error('no key');
  const timestamp = Math.floor(Date.now() / 1000);
  return {
    'webhook-id': id,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': signWebhook(key, id, timestamp, Buffer.from(body)),
  };
}

async function post(url: string, body: string, headers: Record<string, string>) {
  const response = await fetch(`${url}/events`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body,
    signal: AbortSignal.timeout(5_000),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

describe('the ingest thread', () => {
  it('accepts a signed event into the queue and prints a line for a refused request', async () => {
    const lines: string[] = [];
    const thread = await startIngestThread(
      { config: config(), sqsEndpoint: local.endpoint, debug: false },
      (line) => lines.push(line),
    );
    onTestFinished(() => thread.close());
    const body = JSON.stringify({
      entity: 'contacts',
      action: 'create',
      data: { email: 'thread@example.com' },
    });

    const accepted = await post(thread.url, body, signed(body, 'msg_thread_1'));
    const refused = await post(thread.url, body, {
      ...signed(body, 'msg_thread_2'),
      'webhook-signature': 'v1,AAAA',
    });
    const queued = await receiveUntil(local.sqs, queueUrl, 1, { timeoutMs: 5_000 });

    expect(accepted).toMatchObject({ status: 202, body: { accepted: 1 } });
    expect(refused.status).toBe(401);
    expect(queued.map((message) => JSON.parse(message.Body ?? '{}').data)).toEqual([
      { email: 'thread@example.com' },
    ]);
    // The line crosses from the thread: wait for it, bounded.
    for (let i = 0; i < 50 && lines.length < 2; i++) await new Promise((r) => setTimeout(r, 20));
    // The operator's line, and the log line that says which check refused (never the secret).
    expect(lines).toEqual([
      expect.stringMatching(
        /^warning: Refused a request \(401\): no sender credential matched it \(.*check=webhook-signature/,
      ),
      expect.stringMatching(/^refused request \S+: 401 unauthorized$/),
    ]);
    expect(lines.join('\n')).not.toContain(secret);
  });

  it("rejects with the thread's error when the front cannot listen", async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    onTestFinished(() => new Promise<void>((resolve) => taken.close(() => resolve())));
    const port = (taken.address() as { port: number }).port;

    const started = startIngestThread(
      { config: config(), sqsEndpoint: local.endpoint, port, debug: false },
      () => {},
    );

    await expect(started).rejects.toThrow(/EADDRINUSE/);
  });

  it('closes at once a thread that already ended, having said why', async () => {
    const lines: string[] = [];
    // A heap far below what a large body takes: the thread ends on its first such request.
    const thread = await startIngestThread(
      {
        config: config({
          [ENV.MAX_BODY_BYTES]: String(6 * 1024 * 1024),
          [ENV.MAX_EVENTS_PER_REQUEST]: '10000',
        }),
        sqsEndpoint: local.endpoint,
        debug: false,
        memoryMb: 30,
      },
      (line) => lines.push(line),
    );
    const body = JSON.stringify(
      Array.from({ length: 5_000 }, (_, i) => ({
        entity: 'contacts',
        action: 'create',
        data: { email: `big-${i}@example.com`, notes: 'x'.repeat(1_000) },
      })),
    );

    const answer = await post(thread.url, body, signed(body, 'msg_thread_big')).catch(
      (error: unknown) => error,
    );
    for (let i = 0; i < 100 && lines.length === 0; i++) await new Promise((r) => setTimeout(r, 20));
    await thread.close();

    expect(answer).toBeInstanceOf(Error);
    expect(lines).toEqual([expect.stringMatching(/^error: the ingest thread failed: .*memory/)]);
  });

  it('closes: the front stops answering, and a second close is the same', async () => {
    const thread = await startIngestThread(
      { config: config(), sqsEndpoint: local.endpoint, debug: false },
      () => {},
    );

    await thread.close();
    await thread.close();

    await expect(post(thread.url, '{}', {})).rejects.toThrow();
  });
});
