import {
  ChangeMessageVisibilityBatchCommand,
  DeleteMessageBatchCommand,
  GetQueueAttributesCommand,
  type Message,
  ReceiveMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';

/*
 * The dead-letter queue as the commands read it: without consuming it (what a read hides comes
 * back), each letter's facts, the filters, SQS's clock at the start of a command, and the
 * deletes of letters read.
 */

/**
 * One dead letter as the commands show it (contract §4); with `--show-data` only, the record's
 * `id` and `data`, or an integrator action's own fields and the `match` reference it named.
 */
export interface DeadLetterItem {
  eventId: string | null;
  entity: string | null;
  action: string | null;
  reason: string;
  status: number | null;
  detail: string | null;
  firstReceivedAt: string | null;
  deadLetteredAt: string | null;
  id?: number | null;
  data?: unknown;
  /** A source's payload that could not be mapped (`mapping_failed`): the source's name. */
  source?: string;
  match?: unknown;
  segmentId?: unknown;
  campaignId?: unknown;
  companyId?: unknown;
  points?: unknown;
  channel?: unknown;
}

/** What an integrator action names beside its contact (contract §5): shown with `--show-data`. */
const ACTION_FIELDS = ['match', 'segmentId', 'campaignId', 'companyId', 'points', 'channel'];

/** The action fields a queued event holds, each it has. */
function actionFields(event: Record<string, unknown>): Partial<DeadLetterItem> {
  return Object.fromEntries(
    ACTION_FIELDS.filter((field) => event[field] !== undefined).map((field) => [
      field,
      event[field],
    ]),
  );
}

export interface DeadLetterFilters {
  reason?: string | undefined;
  entity?: string | undefined;
  action?: string | undefined;
  /** Only dead letters from this time on (epoch ms). */
  since?: number | undefined;
  limit: number;
}

/** A message SQS itself moved (too many receives) carries no reason of the relay's. */
const NO_REASON = 'too_many_receives';
/**
 * How long a read keeps dead letters hidden by default: long enough to see each one once in a
 * scan, short enough that a read killed half-way gives them back soon.
 */
export const DEFAULT_HIDE_SECONDS = 60;

/** What discard and redrive run with, besides the queues and the filters. */
export interface ChangeOptions {
  dryRun: boolean;
  hideSeconds: number;
  now: () => number;
  sleep: (ms: number) => Promise<void>;
  shouldStop: () => boolean;
  /** Told how many dead letters an earlier, interrupted read still hides. */
  waiting: (hidden: number) => void;
}

/** A letter as a scan read it. */
export interface Scanned {
  message: Message;
  item: DeadLetterItem;
  deadLetteredMs: number;
  /** When it reached this queue on SQS's clock (its SentTimestamp), else `deadLetteredMs`. */
  sentMs: number;
  body: string;
}

/** SQS names every FIFO queue, and only those, with this suffix. */
export function isFifoQueue(queueUrl: string): boolean {
  return queueUrl.endsWith('.fifo');
}

/**
 * Reads the dead-letter queue without consuming it: each receive hides what it returns (so the
 * next receive returns other messages and everything is counted, 10 at a time), and when the
 * scan ends every message is made visible again at once. A scan killed half-way loses nothing:
 * the messages come back by themselves after HIDE_SECONDS. Bounded by the queue's size at the
 * start and by time.
 *
 * A FIFO queue hands out none of a message group's later messages while one of the group is
 * hidden: a scan sees the first of each record's dead letters (up to 10), and the others only
 * once those are deleted (moved). An empty receive then does not mean the end of the queue, so
 * a FIFO scan is complete only when it saw as many messages as the queue held.
 */
export async function scan(
  sqs: SQSClient,
  queueUrl: string,
  options: { now: () => number; hideSeconds: number },
  onBatch: (batch: Scanned[]) => Promise<Set<string>>,
  shouldStop: () => boolean = () => false,
): Promise<{ complete: boolean }> {
  const { now, hideSeconds } = options;
  const estimate = (await countMessages(sqs, queueUrl)).total;
  const maxReceives = Math.ceil(estimate / 10) * 3 + 20;
  // Stops before the first messages it hid reappear, so none is seen twice.
  const budgetMs = hideSeconds * 1000 * 0.8;
  const started = now();
  const hidden = new Map<string, string>();
  // Every message received, moved ones included.
  const seen = new Set<string>();
  let complete = false;
  try {
    for (let receives = 0; receives < maxReceives; receives++) {
      if (shouldStop() || now() - started > budgetMs) break;
      const { Messages = [] } = await sqs.send(
        new ReceiveMessageCommand({
          QueueUrl: queueUrl,
          MaxNumberOfMessages: 10,
          VisibilityTimeout: hideSeconds,
          // Long polling asks every SQS server: an empty answer means an empty queue, or of a
          // FIFO queue, nothing more it may hand out now.
          WaitTimeSeconds: 1,
          MessageAttributeNames: ['All'],
          // The group is the record's: a redrive sends the letter back in it.
          MessageSystemAttributeNames: ['SentTimestamp', 'MessageGroupId'],
        }),
      );
      if (Messages.length === 0) {
        complete = !isFifoQueue(queueUrl) || seen.size >= estimate;
        break;
      }
      for (const m of Messages) if (m.MessageId) seen.add(m.MessageId);
      const fresh = Messages.filter((m) => m.MessageId && !hidden.has(m.MessageId));
      for (const m of Messages)
        if (m.MessageId && m.ReceiptHandle) hidden.set(m.MessageId, m.ReceiptHandle);
      if (fresh.length === 0) continue;
      const gone = await onBatch(fresh.map(describe));
      for (const messageId of gone) hidden.delete(messageId);
    }
  } finally {
    await reveal(sqs, queueUrl, [...hidden.values()]);
  }
  return { complete };
}

/** Makes hidden messages visible again; one that cannot be comes back after the hide time. */
async function reveal(sqs: SQSClient, queueUrl: string, receiptHandles: string[]): Promise<void> {
  for (let i = 0; i < receiptHandles.length; i += 10) {
    await sqs
      .send(
        new ChangeMessageVisibilityBatchCommand({
          QueueUrl: queueUrl,
          Entries: receiptHandles.slice(i, i + 10).map((handle, j) => ({
            Id: String(j),
            ReceiptHandle: handle,
            VisibilityTimeout: 0,
          })),
        }),
      )
      .catch(() => {});
  }
}

/** A queue's messages waiting, in flight (hidden) and delayed (SQS's approximate counts). */
export async function queueAttributes(sqs: SQSClient, queueUrl: string) {
  const { Attributes = {} } = await sqs.send(
    new GetQueueAttributesCommand({
      QueueUrl: queueUrl,
      AttributeNames: [
        'ApproximateNumberOfMessages',
        'ApproximateNumberOfMessagesNotVisible',
        'ApproximateNumberOfMessagesDelayed',
      ],
    }),
  );
  return {
    visible: Number(Attributes.ApproximateNumberOfMessages ?? 0),
    inFlight: Number(Attributes.ApproximateNumberOfMessagesNotVisible ?? 0),
    delayed: Number(Attributes.ApproximateNumberOfMessagesDelayed ?? 0),
  };
}

export async function countMessages(
  sqs: SQSClient,
  queueUrl: string,
): Promise<{ total: number; hidden: number }> {
  const { visible, inFlight, delayed } = await queueAttributes(sqs, queueUrl);
  return { total: visible + inFlight + delayed, hidden: inFlight };
}

/**
 * The queue's size, and SQS's clock now (epoch ms): a command's cut-off between the letters that
 * were there when it started and those written since. SQS's clock, not the operator's: a
 * letter's SentTimestamp is on it, and an operator's clock minutes off would otherwise take every
 * letter for a new one (or the reverse). Read from the Date header of SQS's answer, which has
 * whole seconds: the end of that second is taken, so what was sent in it counts as there. Without
 * the header (a client that does not speak HTTP: a test's mock), the operator's clock.
 */
export async function startOfCommand(
  sqs: SQSClient,
  queueUrl: string,
  now: () => number,
): Promise<{ total: number; cutOff: number }> {
  const command = new GetQueueAttributesCommand({
    QueueUrl: queueUrl,
    AttributeNames: [
      'ApproximateNumberOfMessages',
      'ApproximateNumberOfMessagesNotVisible',
      'ApproximateNumberOfMessagesDelayed',
    ],
  });
  let serverSecond = Number.NaN;
  command.middlewareStack.add(
    (next) => async (args) => {
      const result = await next(args);
      const { headers } = result.response as { headers?: Record<string, string | undefined> };
      serverSecond = Date.parse(headers?.date ?? '');
      return result;
    },
    { step: 'deserialize', name: 'sqsClock' },
  );
  const { Attributes = {} } = await sqs.send(command);
  const total = [
    Attributes.ApproximateNumberOfMessages,
    Attributes.ApproximateNumberOfMessagesNotVisible,
    Attributes.ApproximateNumberOfMessagesDelayed,
  ].reduce((sum, count) => sum + Number(count ?? 0), 0);
  return { total, cutOff: Number.isFinite(serverSecond) ? serverSecond + 1000 : now() };
}

/**
 * Nothing consumes the dead-letter queue but these commands: messages hidden in it are held by
 * a read that was killed (or runs elsewhere). Waits, bounded by the hide time, until they are
 * back; resolves how many are still hidden.
 */
export async function waitForHidden(
  sqs: SQSClient,
  queueUrl: string,
  options: { hideSeconds: number; now: () => number; sleep: (ms: number) => Promise<void> },
  notice: (hidden: number) => void,
): Promise<number> {
  const deadline = options.now() + (options.hideSeconds + 5) * 1000;
  let { hidden } = await countMessages(sqs, queueUrl);
  if (hidden > 0) notice(hidden);
  while (hidden > 0 && options.now() < deadline) {
    await options.sleep(1000);
    ({ hidden } = await countMessages(sqs, queueUrl));
  }
  return hidden;
}

/** A dead letter's facts, from the relay's attributes first, else from the queued event. */
function describe(message: Message): Scanned {
  const body = message.Body ?? '';
  let event: Record<string, unknown> = {};
  try {
    const parsed: unknown = JSON.parse(body);
    if (typeof parsed === 'object' && parsed !== null) event = parsed as Record<string, unknown>;
  } catch {
    // Not a queued event (invalid_event): the attributes say what is known.
  }
  const attribute = (name: string) => message.MessageAttributes?.[name]?.StringValue;
  const text = (value: unknown) => (typeof value === 'string' && value !== '' ? value : null);
  const sent = Number(message.Attributes?.SentTimestamp);
  const deadLetteredAt = attribute('relay.deadLetteredAt') ?? null;
  const deadLetteredMs = deadLetteredAt
    ? Date.parse(deadLetteredAt)
    : Number.isFinite(sent)
      ? sent
      : 0;
  const sentMs = Number.isFinite(sent) ? sent : deadLetteredMs;
  const status = Number(attribute('relay.status'));
  const detail = attribute('relay.detail');
  return {
    message,
    body,
    deadLetteredMs,
    sentMs,
    item: {
      eventId: text(event.eventId),
      entity: text(attribute('relay.entity')) ?? text(event.entity),
      action: text(attribute('relay.action')) ?? text(event.action),
      reason: attribute('relay.reason') ?? NO_REASON,
      status: attribute('relay.status') !== undefined && Number.isFinite(status) ? status : null,
      detail: detail === undefined || detail === '-' ? null : detail,
      firstReceivedAt: text(attribute('relay.firstReceivedAt')) ?? text(event.receivedAt),
      deadLetteredAt: deadLetteredMs > 0 ? new Date(deadLetteredMs).toISOString() : null,
      id: typeof event.id === 'number' ? event.id : null,
      // A source's payload that could not be mapped (contract §6): what `sources test` takes.
      data: typeof event.source === 'string' ? event.body : event.data,
      ...sourceOf(attribute('relay.source') ?? event.source),
      ...actionFields(event),
    },
  };
}

/** The source of a letter kept by a source's ingest, where its entity and action would be. */
function sourceOf(name: unknown): { source?: string } {
  return typeof name === 'string' && name !== '' ? { source: name } : {};
}

export function matches(scanned: Scanned, filters: DeadLetterFilters): boolean {
  const { item } = scanned;
  return (
    (filters.reason === undefined || item.reason === filters.reason) &&
    (filters.entity === undefined || item.entity === filters.entity) &&
    (filters.action === undefined || item.action === filters.action) &&
    (filters.since === undefined || scanned.deadLetteredMs >= filters.since)
  );
}

/** Deletes letters from the queue they were read from; resolves the message ids deleted. */
export async function deleteLetters(
  sqs: SQSClient,
  queueUrl: string,
  letters: ReadonlyArray<Scanned>,
): Promise<string[]> {
  const deleted: string[] = [];
  for (let i = 0; i < letters.length; i += 10) {
    const chunk = letters.slice(i, i + 10);
    const { Successful = [] } = await sqs.send(
      new DeleteMessageBatchCommand({
        QueueUrl: queueUrl,
        Entries: chunk.map(({ message }, j) => ({
          Id: String(j),
          ReceiptHandle: message.ReceiptHandle ?? '',
        })),
      }),
    );
    for (const entry of Successful) {
      const messageId = chunk[Number(entry.Id)]?.message.MessageId;
      if (messageId) deleted.push(messageId);
    }
  }
  return deleted;
}
