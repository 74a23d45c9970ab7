import {
  ChangeMessageVisibilityBatchCommand,
  DeleteMessageBatchCommand,
  GetQueueAttributesCommand,
  type Message,
  type MessageAttributeValue,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  type SendMessageBatchRequestEntry,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { SqsEventQueue } from '../../functions/adapters/sqs-event-queue.ts';
import { QueueUnavailableError } from '../../functions/core/errors.ts';
import type { OutgoingMessage } from '../../functions/core/ports.ts';
import type { Remapper } from './source-letters.ts';

/**
 * One dead letter as the commands show it (contract §4); with `--show-data` only, the record's
 * `id` and `data`, or an integrator action's own fields and the `match` reference it named.
 */
interface DeadLetterItem {
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

interface Scanned {
  message: Message;
  item: DeadLetterItem;
  deadLetteredMs: number;
  /** When it reached this queue on SQS's clock (its SentTimestamp), else `deadLetteredMs`. */
  sentMs: number;
  body: string;
}

/** SQS names every FIFO queue, and only those, with this suffix. */
function isFifoQueue(queueUrl: string): boolean {
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
async function scan(
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

async function countMessages(
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
async function startOfCommand(
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
async function waitForHidden(
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
      ...actionFields(event),
    },
  };
}

function matches(scanned: Scanned, filters: DeadLetterFilters): boolean {
  const { item } = scanned;
  return (
    (filters.reason === undefined || item.reason === filters.reason) &&
    (filters.entity === undefined || item.entity === filters.entity) &&
    (filters.action === undefined || item.action === filters.action) &&
    (filters.since === undefined || scanned.deadLetteredMs >= filters.since)
  );
}

export interface DeadLetterList {
  count: number;
  byReason: Record<string, number>;
  items: DeadLetterItem[];
  /** False when the scan stopped before the queue's end (a very large queue). */
  complete: boolean;
}

/**
 * `dead-letters`: the matching dead letters, newest first, counted by reason. It streams: every
 * letter is counted as it is read, and only the newest `limit` items are kept (never a body),
 * so a queue of any size is listed in the memory of `--limit` items.
 */
export async function listDeadLetters(
  sqs: SQSClient,
  queueUrl: string,
  filters: DeadLetterFilters,
  options: { showData: boolean; now: () => number; hideSeconds: number },
): Promise<DeadLetterList> {
  const newest = newestItems(filters.limit);
  const byReason: Record<string, number> = {};
  let count = 0;
  // Dead letters another read still hides (a read running now, or one that was killed) cannot
  // be counted: the list then says it is partial rather than under-count quietly.
  const { hidden } = await countMessages(sqs, queueUrl);
  const { complete: scanned } = await scan(sqs, queueUrl, options, async (batch) => {
    for (const letter of batch.filter((scanned) => matches(scanned, filters))) {
      count++;
      byReason[letter.item.reason] = (byReason[letter.item.reason] ?? 0) + 1;
      const { id, data, ...rest } = letter.item;
      const { match, segmentId, campaignId, companyId, points, channel, ...plain } = rest;
      const fields = { match, segmentId, campaignId, companyId, points, channel };
      const shown = Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined));
      newest.add(
        letter.deadLetteredMs,
        options.showData ? { ...plain, id: id ?? null, data, ...shown } : plain,
      );
    }
    return new Set();
  });
  return { count, byReason, items: newest.items(), complete: scanned && hidden === 0 };
}

/**
 * The `limit` newest of the items added, holding at most about twice that many: they are sorted
 * and cut whenever that many have gathered. The sort is stable, so letters of the same time keep
 * the order they were read in.
 */
function newestItems(limit: number) {
  let kept: Array<{ ms: number; item: DeadLetterItem }> = [];
  const cut = () => {
    kept.sort((a, b) => b.ms - a.ms);
    kept = kept.slice(0, limit);
  };
  return {
    add(ms: number, item: DeadLetterItem) {
      kept.push({ ms, item });
      if (kept.length >= 2 * limit + 10) cut();
    },
    items(): DeadLetterItem[] {
      cut();
      return kept.map(({ item }) => item);
    },
  };
}

export interface RedriveResult {
  /** Every matching dead letter read, those `skipped` included. */
  matched: number;
  moved: number;
  /** The matching dead letters still there: `matched - moved`. */
  left: number;
  complete: boolean;
  /** Of those moved, the `mapping_failed` ones that had nothing to queue now: deleted. */
  nothingQueued: number;
  /**
   * Of those left, the ones it did not try: written after it started (one it moved that came
   * back, the cause not fixed yet, or a new one), or another letter of an event it moved.
   */
  skipped: number;
}

interface RedriveOptions {
  rate: number;
  dryRun: boolean;
  hideSeconds: number;
  now: () => number;
  sleep: (ms: number) => Promise<void>;
  shouldStop: () => boolean;
  progress: (state: { scanned: number; matched: number; moved: number; total: number }) => void;
  /** Told how many dead letters an earlier, interrupted read still hides. */
  waiting: (hidden: number) => void;
  /** Maps a `mapping_failed` letter with its source as configured now (source-letters.ts). */
  remap: Remapper;
  /** Told of each matching letter that stays, and why (never its payload). */
  kept: (eventId: string, problem: string) => void;
}

/**
 * `redrive`: moves the matching dead letters (at most `filters.limit`) back to the events queue,
 * each sent before it is deleted, at most `rate` events a second. The others are made visible
 * again. Killed at any point it loses nothing; killed between a send and its delete, that message
 * is in both queues and a re-run sends it again (at least once, as everywhere in the relay).
 * `shouldStop` (Ctrl-C) ends it after the batch in hand, so that never happens on Ctrl-C.
 *
 * A `mapping_failed` letter holds a source's payload, not an event: it is mapped again with the
 * source as configured now (`remap`), and its events are queued as the ingest queues them, or,
 * when the filter is false or the mapping yields `[]`, nothing is; either way it is deleted then.
 * One whose mapping still fails stays, and `kept` says why; so does one a dry run would keep.
 *
 * Only letters already there when it started are moved, each event once: what it moved may be
 * refused again and come back as a new dead letter while it runs (the cause not fixed yet), and
 * moving that copy would send the same event round and round. "When it started" is on SQS's
 * clock (`startOfCommand`). The letters it leaves for that are counted in `left` (`skipped`).
 */
export async function redriveDeadLetters(
  sqs: SQSClient,
  urls: { deadLetterQueueUrl: string; eventsQueueUrl: string },
  filters: DeadLetterFilters,
  options: RedriveOptions,
): Promise<RedriveResult> {
  // Those hidden by a redrive that was killed must be back, or this one could not finish the job.
  await waitForHidden(sqs, urls.deadLetterQueueUrl, options, options.waiting);
  const { total, cutOff } = await startOfCommand(sqs, urls.deadLetterQueueUrl, options.now);
  const state = { scanned: 0, matched: 0, moved: 0, total, nothingQueued: 0, sent: 0 };
  // Pacing measures intervals, which the operator's clock does well.
  const started = options.now();
  const movedEvents = new Set<string>();
  const skipped = new Set<string>();
  const before = (scanned: Scanned) => {
    const there =
      scanned.sentMs < cutOff &&
      (scanned.item.eventId === null || !movedEvents.has(scanned.item.eventId));
    if (!there) skipped.add(scanned.message.MessageId ?? '');
    return there;
  };
  const remapped = remapOnce(options);
  // A scan ends before what it hid reappears; on a large queue another round finds the rest.
  let complete = false;
  for (let round = 0; round < 100 && !complete && !options.shouldStop(); round++) {
    const movedBefore = state.moved;
    // Records with a letter SQS did not take this round: their later letters wait for the next.
    const stopped = new Set<string>();
    state.scanned = 0;
    state.matched = state.moved;
    ({ complete } = await scan(
      sqs,
      urls.deadLetterQueueUrl,
      options,
      async (batch) => {
        state.scanned += batch.length;
        const matching = batch.filter((scanned) => matches(scanned, filters) && before(scanned));
        state.matched += matching.length;
        const room = Math.max(0, filters.limit - state.moved);
        const { plain, mapped } = await remapped(matching.slice(0, room));
        const gone = new Set<string>();
        if (!options.dryRun && plain.length + mapped.length > 0) {
          // Paced from the start by the events sent, so the average never passes the rate.
          const events = plain.length + mapped.reduce((n, { messages }) => n + messages.length, 0);
          const due = started + ((state.sent + events) / options.rate) * 1000;
          const wait = due - options.now();
          if (wait > 0) await options.sleep(wait);
          state.sent += events;
          for (const messageId of await move(sqs, urls, plain, stopped)) gone.add(messageId);
          for (const messageId of await deliver(sqs, urls, mapped, options.kept)) {
            gone.add(messageId);
            const letter = mapped.find(({ letter }) => letter.message.MessageId === messageId);
            if (letter?.messages.length === 0) state.nothingQueued++;
          }
          state.moved += gone.size;
          // Only those moved: one SQS did not take is matched again, and tried, in the next round.
          for (const { message, item } of [...plain, ...mapped.map(({ letter }) => letter)])
            if (item.eventId !== null && gone.has(message.MessageId ?? ''))
              movedEvents.add(item.eventId);
        }
        options.progress({ ...state });
        return gone;
      },
      options.shouldStop,
    ));
    if (state.moved === movedBefore) break;
  }
  const { moved, nothingQueued } = state;
  const matched = state.matched + skipped.size;
  return { matched, moved, left: matched - moved, complete, nothingQueued, skipped: skipped.size };
}

/** A `mapping_failed` letter mapped again, and what it now queues (maybe nothing). */
interface MappedLetter {
  letter: Scanned;
  messages: OutgoingMessage[];
}

/**
 * Splits letters into those moved as they are and the `mapping_failed` ones mapped again; a
 * letter whose mapping fails is reported (once a redrive: later rounds read it again) and left.
 */
function remapOnce(options: Pick<RedriveOptions, 'remap' | 'kept'>) {
  const keeping = new Set<string>();
  return async (letters: Scanned[]): Promise<{ plain: Scanned[]; mapped: MappedLetter[] }> => {
    const plain: Scanned[] = [];
    const mapped: MappedLetter[] = [];
    for (const letter of letters) {
      if (letter.item.reason !== MAPPING_FAILED) {
        plain.push(letter);
        continue;
      }
      const messageId = letter.message.MessageId ?? '';
      if (keeping.has(messageId)) continue;
      const outcome = await options.remap(letter.body);
      if (outcome.kind === 'kept') {
        keeping.add(messageId);
        options.kept(letter.item.eventId ?? '(no id)', outcome.problem);
      } else {
        mapped.push({ letter, messages: outcome.kind === 'events' ? outcome.messages : [] });
      }
    }
    return { plain, mapped };
  };
}

/** The reason of a source's payload that could not be mapped (contract §6). */
const MAPPING_FAILED = 'mapping_failed';

/**
 * Queues each mapped letter's events as the ingest queues them (`SqsEventQueue`: each in its
 * record's message group, deduplicated per event), then deletes the letter; resolves the message
 * ids deleted. A letter whose events the queue did not all take stays (`kept` says so): a re-run
 * sends them again, deduplicated by SQS within five minutes, and the batch function's
 * de-duplication of a batch's event ids after that.
 */
async function deliver(
  sqs: SQSClient,
  urls: { deadLetterQueueUrl: string; eventsQueueUrl: string },
  mapped: MappedLetter[],
  kept: RedriveOptions['kept'],
): Promise<string[]> {
  const queue = new SqsEventQueue(sqs, urls.eventsQueueUrl);
  const sent: Scanned[] = [];
  for (const { letter, messages } of mapped) {
    try {
      if (messages.length > 0) await queue.enqueue(messages);
      sent.push(letter);
    } catch (error) {
      if (!(error instanceof QueueUnavailableError)) throw error;
      kept(
        letter.item.eventId ?? '(no id)',
        `the events queue did not take its events (${error.reason.code ?? error.reason.error ?? 'no answer'}): run the redrive again`,
      );
    }
  }
  return deleteLetters(sqs, urls.deadLetterQueueUrl, sent);
}

/** Deletes letters from the queue they were read from; resolves the message ids deleted. */
async function deleteLetters(
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

export interface DiscardResult {
  /** Every matching dead letter read, those `skipped` included. */
  matched: number;
  discarded: number;
  /** The matching dead letters still there: `matched - discarded`. */
  left: number;
  complete: boolean;
  /** Of those left, the ones written after it started: not looked at, so not discarded. */
  skipped: number;
}

/**
 * `dead-letters discard`: deletes the matching dead letters (at most `filters.limit`) for good;
 * the others are made visible again. Only letters there when it started (on SQS's clock,
 * `startOfCommand`): one written since was not looked at. A record's later letters, which a FIFO
 * queue hands out only once its earlier ones are gone, are reached in later rounds.
 */
export async function discardDeadLetters(
  sqs: SQSClient,
  queueUrl: string,
  filters: DeadLetterFilters,
  options: Pick<
    RedriveOptions,
    'dryRun' | 'hideSeconds' | 'now' | 'sleep' | 'shouldStop' | 'waiting'
  >,
): Promise<DiscardResult> {
  await waitForHidden(sqs, queueUrl, options, options.waiting);
  const { cutOff } = await startOfCommand(sqs, queueUrl, options.now);
  let matched = 0;
  let discarded = 0;
  let complete = false;
  const skipped = new Set<string>();
  for (let round = 0; round < 100 && !complete && !options.shouldStop(); round++) {
    const discardedBefore = discarded;
    matched = discarded;
    ({ complete } = await scan(
      sqs,
      queueUrl,
      options,
      async (batch) => {
        const matching = batch.filter((scanned) => {
          if (!matches(scanned, filters)) return false;
          if (scanned.sentMs < cutOff) return true;
          skipped.add(scanned.message.MessageId ?? '');
          return false;
        });
        matched += matching.length;
        if (options.dryRun) return new Set();
        const room = Math.max(0, filters.limit - discarded);
        const gone = await deleteLetters(sqs, queueUrl, matching.slice(0, room));
        discarded += gone.length;
        return new Set(gone);
      },
      options.shouldStop,
    ));
    if (discarded === discardedBefore) break;
  }
  matched += skipped.size;
  return { matched, discarded, left: matched - discarded, complete, skipped: skipped.size };
}

/**
 * Sends to the events queue, then deletes from the dead-letter queue what was sent. To a FIFO
 * events queue each letter goes back in its record's message group, after the letters before it
 * (they come in the group's order and are sent in it); a letter without a group (one from a
 * standard queue: before the relay's queues were FIFO) gets a group of its own. Its
 * deduplication id is the letter's message id: each dead letter is a copy of its own, so a
 * redrive is never taken for a duplicate of the event's earlier trips, while a re-run that sends
 * the same letter again within SQS's 5-minute window is.
 */
async function move(
  sqs: SQSClient,
  urls: { deadLetterQueueUrl: string; eventsQueueUrl: string },
  letters: Scanned[],
  stopped: Set<string>,
): Promise<string[]> {
  const moved: string[] = [];
  let pending = letters;
  // One letter of a record per call, in order, and none after one that did not move: an entry
  // sent again cannot fall behind a later letter of its record that went through.
  while (pending.length > 0) {
    const now: Scanned[] = [];
    const later: Scanned[] = [];
    const taken = new Set<string>();
    for (const letter of pending) {
      const group = groupOf(letter.message);
      if (stopped.has(group)) continue;
      if (taken.has(group)) later.push(letter);
      else {
        taken.add(group);
        now.push(letter);
      }
    }
    const done = new Set(await sendAndDelete(sqs, urls, now));
    for (const letter of now) {
      if (done.has(letter.message.MessageId ?? '')) moved.push(letter.message.MessageId ?? '');
      else stopped.add(groupOf(letter.message));
    }
    pending = later;
  }
  return moved;
}

/** A letter's record (message group); one of its own when it has none (a standard queue's). */
function groupOf(message: Message): string {
  return message.Attributes?.MessageGroupId ?? message.MessageId ?? '';
}

/**
 * Sends letters of different records (at most 10) and deletes those sent, in calls within
 * SendMessageBatch's limits; resolves the message ids moved.
 */
async function sendAndDelete(
  sqs: SQSClient,
  urls: { deadLetterQueueUrl: string; eventsQueueUrl: string },
  letters: Scanned[],
): Promise<string[]> {
  const fifo = isFifoQueue(urls.eventsQueueUrl);
  const entries = letters.map(({ message, body }, i) => ({
    Id: String(i),
    MessageBody: body,
    MessageAttributes: originalAttributes(message),
    ...(fifo ? fifoIds(message) : {}),
  }));
  const moved: string[] = [];
  for (const group of bySize(entries)) moved.push(...(await sendGroup(sqs, urls, letters, group)));
  return moved;
}

/** SendMessageBatch takes at most 10 entries and 1 MiB (1,048,576 bytes) of messages in all. */
const BATCH_ENTRIES = 10;
const BATCH_BYTES = 1_048_576;

/**
 * Entries in groups SendMessageBatch takes, in their order: a group is closed when the next
 * entry would pass 10 entries or 1 MiB. One letter is at most SQS's largest message, so it
 * always fits a group of its own.
 */
function bySize<
  T extends { MessageBody: string; MessageAttributes: Record<string, MessageAttributeValue> },
>(entries: T[]): T[][] {
  const groups: T[][] = [];
  let group: T[] = [];
  let bytes = 0;
  for (const entry of entries) {
    const size = messageSize(entry.MessageBody, entry.MessageAttributes);
    if (group.length > 0 && (group.length === BATCH_ENTRIES || bytes + size > BATCH_BYTES)) {
      groups.push(group);
      group = [];
      bytes = 0;
    }
    group.push(entry);
    bytes += size;
  }
  if (group.length > 0) groups.push(group);
  return groups;
}

/**
 * A message's size as SQS counts it against its limits: the body's bytes, and each message
 * attribute's name, data type and value (UTF-8 bytes of text, raw bytes of binary).
 */
function messageSize(body: string, attributes: Record<string, MessageAttributeValue>): number {
  let size = Buffer.byteLength(body, 'utf8');
  for (const [name, { DataType, StringValue, BinaryValue }] of Object.entries(attributes)) {
    size += Buffer.byteLength(name, 'utf8') + Buffer.byteLength(DataType ?? '', 'utf8');
    if (StringValue !== undefined) size += Buffer.byteLength(StringValue, 'utf8');
    if (BinaryValue !== undefined) size += BinaryValue.byteLength;
  }
  return size;
}

/** One SendMessageBatch of `group` (entries whose Id is the letter's index), then its delete. */
async function sendGroup(
  sqs: SQSClient,
  urls: { deadLetterQueueUrl: string; eventsQueueUrl: string },
  letters: Scanned[],
  group: SendMessageBatchRequestEntry[],
): Promise<string[]> {
  const sent = await sqs.send(
    new SendMessageBatchCommand({ QueueUrl: urls.eventsQueueUrl, Entries: group }),
  );
  const sentIndexes = (sent.Successful ?? []).map((entry) => Number(entry.Id));
  if (sentIndexes.length === 0) return [];
  const deleted = await sqs.send(
    new DeleteMessageBatchCommand({
      QueueUrl: urls.deadLetterQueueUrl,
      Entries: sentIndexes.map((i) => ({
        Id: String(i),
        ReceiptHandle: letters[i]?.message.ReceiptHandle ?? '',
      })),
    }),
  );
  // A message sent but not deleted is still a dead letter: it counts as not moved (and a
  // re-run sends it again).
  return (deleted.Successful ?? []).flatMap((entry) => {
    const messageId = letters[Number(entry.Id)]?.message.MessageId;
    return messageId ? [messageId] : [];
  });
}

function fifoIds(message: Message): { MessageGroupId: string; MessageDeduplicationId: string } {
  return { MessageGroupId: groupOf(message), MessageDeduplicationId: message.MessageId ?? '' };
}

/** The attributes the event had on the events queue: the relay's own are dropped. */
function originalAttributes(message: Message): Record<string, MessageAttributeValue> {
  return Object.fromEntries(
    Object.entries(message.MessageAttributes ?? {}).filter(([name]) => !name.startsWith('relay.')),
  );
}

/** `--since`: `90s`, `30m`, `2h`, `7d`, or an ISO 8601 time; undefined when it is neither. */
export function parseSince(text: string, now: number): number | undefined {
  const relative = text.match(/^(\d+)([smhd])$/);
  if (relative) {
    const unit = { s: 1, m: 60, h: 3600, d: 86_400 }[relative[2] as 's' | 'm' | 'h' | 'd'];
    return now - Number(relative[1]) * unit * 1000;
  }
  if (!/^\d{4}-\d{2}-\d{2}/.test(text)) return undefined;
  const time = Date.parse(text);
  return Number.isNaN(time) ? undefined : time;
}
