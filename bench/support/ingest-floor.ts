/**
 * The ingest's floor (issue 38): the least a server can do and still take events as the relay
 * does. It verifies the Standard Webhooks signature, parses the body and validates each event
 * with the relay's own schema (`relayEventSchema`), and queues one message per event with
 * SendMessageBatch, 10 at a time, through the same SDK client to the same FIFO queue emulator:
 * a record's events (contacts by email) one per batch, a batch sent once every earlier batch
 * holding one of its records is queued. Nothing else: no idempotency, no logging, no metrics,
 * no middleware. It runs on a worker thread of its own, as the local stack's ingest does, with
 * the emulator on the thread that started it.
 */
import { createHash } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { SendMessageBatchCommand, SQSClient } from '@aws-sdk/client-sqs';
import { relayEventSchema } from '../../functions/core/events.ts';
import { verifySignature } from './verify-signature.ts';

const FLOOR_THREAD = 'ingest-floor';

export interface FloorData {
  secret: string;
  /** The queue emulator's endpoint, `http://127.0.0.1:<port>`. */
  endpoint: string;
  queueUrl: string;
}

interface Entry {
  Id: string;
  MessageBody: string;
  MessageGroupId: string;
  MessageDeduplicationId: string;
}

if (!isMainThread && parentPort && (workerData as { kind?: unknown })?.kind === FLOOR_THREAD) {
  const port = parentPort;
  const url = await serve(workerData as FloorData);
  port.postMessage({ url });
}

/** Starts the floor on a worker thread; resolves once it listens. */
export async function startIngestFloorThread(
  data: FloorData,
): Promise<{ url: string; close(): Promise<void> }> {
  const worker = new Worker(new URL(import.meta.url), {
    workerData: { kind: FLOOR_THREAD, ...data },
  });
  const { url } = await new Promise<{ url: string }>((resolve, reject) => {
    worker.once('message', resolve).once('error', reject);
  });
  return {
    url,
    async close() {
      await worker.terminate();
    },
  };
}

async function serve(data: FloorData): Promise<string> {
  const key = Buffer.from(data.secret.slice('whsec_'.length), 'base64');
  const sqs = new SQSClient({
    endpoint: data.endpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
  });
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const answer = (status: number, body: string) =>
        res.writeHead(status, { 'content-type': 'application/json' }).end(body);
      const body = Buffer.concat(chunks);
      if (!verifySignature(key, req.headers, body)) {
        answer(401, '{"error":"unauthorized"}');
        return;
      }
      const entries = toEntries(body, String(req.headers['webhook-id']));
      if (entries === undefined) {
        answer(422, '{"error":"invalid_event"}');
        return;
      }
      void queue(sqs, data.queueUrl, entries).then(
        () => answer(202, `{"accepted":${entries.length}}`),
        () => answer(503, '{"error":"queue_unavailable"}'),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** One queue entry per valid event; undefined when the body or any event is not valid. */
function toEntries(body: Buffer, requestId: string): Entry[] | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString());
  } catch {
    return undefined;
  }
  const events = Array.isArray(parsed) ? parsed : [parsed];
  const receivedAt = new Date().toISOString();
  const entries: Entry[] = [];
  for (const [index, value] of events.entries()) {
    const result = relayEventSchema().safeParse(value);
    if (!result.success) return undefined;
    const event = result.data;
    const eventId = event.eventId ?? `${requestId}:${index}`;
    const email = event.entity === 'contacts' ? event.data?.email : undefined;
    const record = typeof email === 'string' ? `email ${email}` : `event ${eventId}`;
    entries.push({
      Id: String(entries.length % 10),
      MessageBody: JSON.stringify({ v: 1, eventId, receivedAt, sender: 'bench', ...event }),
      MessageGroupId: createHash('sha256').update(`${event.entity} ${record}`).digest('base64url'),
      MessageDeduplicationId: createHash('sha256').update(`${eventId}\n${index}`).digest('hex'),
    });
  }
  return entries;
}

/**
 * Batches of up to 10 with no record twice; each sent once the earlier batches holding one of
 * its records are queued, the others at once.
 */
async function queue(sqs: SQSClient, queueUrl: string, entries: Entry[]): Promise<void> {
  const batches: Entry[][] = [];
  let current: Entry[] = [];
  for (const entry of entries) {
    const repeats = current.some((other) => other.MessageGroupId === entry.MessageGroupId);
    if (current.length === 10 || repeats) {
      batches.push(current);
      current = [];
    }
    current.push({ ...entry, Id: String(current.length) });
  }
  if (current.length > 0) batches.push(current);
  const lastOfRecord = new Map<string, Promise<void>>();
  const sent = batches.map((batch) => {
    const earlier = batch.flatMap((entry) => lastOfRecord.get(entry.MessageGroupId) ?? []);
    const done = Promise.all(earlier).then(() => send(sqs, queueUrl, batch));
    for (const entry of batch) lastOfRecord.set(entry.MessageGroupId, done);
    return done;
  });
  await Promise.all(sent);
}

async function send(sqs: SQSClient, queueUrl: string, batch: Entry[]): Promise<void> {
  const answer = await sqs.send(
    new SendMessageBatchCommand({ QueueUrl: queueUrl, Entries: batch }),
  );
  if ((answer.Failed ?? []).length > 0) throw new Error('SendMessageBatch: entries failed');
}
