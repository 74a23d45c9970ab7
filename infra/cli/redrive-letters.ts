import type { SQSClient } from '@aws-sdk/client-sqs';
import { SqsEventQueue } from '../../functions/adapters/sqs-event-queue.ts';
import { QueueUnavailableError } from '../../functions/core/errors.ts';
import type { OutgoingMessage } from '../../functions/core/queue-ports.ts';
import {
  type ChangeOptions,
  type DeadLetterFilters,
  deleteLetters,
  matches,
  type Scanned,
  scan,
  startOfCommand,
  waitForHidden,
} from './dead-letter-queue.ts';
import { move, type RedriveQueues } from './redrive-sends.ts';
import type { Remapper } from './source-letters.ts';

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

interface RedriveOptions extends ChangeOptions {
  rate: number;
  progress: (state: { scanned: number; matched: number; moved: number; total: number }) => void;
  /** Maps a `mapping_failed` letter with its source as configured now (source-letters.ts). */
  remap: Remapper;
  /** Told of each matching letter that stays, and why (never its payload). */
  kept: (eventId: string, problem: string) => void;
}

/** A redrive across its rounds: what it counted, and what it must not move again. */
interface Run {
  tally: {
    scanned: number;
    matched: number;
    moved: number;
    total: number;
    nothingQueued: number;
    /** Events sent, for the pacing. */
    sent: number;
  };
  /** When it started on SQS's clock: letters written since are not its to move. */
  cutOff: number;
  /** When it started on the operator's clock: pacing measures intervals, which that does well. */
  started: number;
  /** The events it moved: another letter of one of them is a copy, and stays. */
  movedEvents: Set<string>;
  /** The letters it did not try (RedriveResult's `skipped`). */
  skipped: Set<string>;
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
  urls: RedriveQueues,
  filters: DeadLetterFilters,
  options: RedriveOptions,
): Promise<RedriveResult> {
  // Those hidden by a redrive that was killed must be back, or this one could not finish the job.
  await waitForHidden(sqs, urls.deadLetterQueueUrl, options, options.waiting);
  const { total, cutOff } = await startOfCommand(sqs, urls.deadLetterQueueUrl, options.now);
  const run: Run = {
    tally: { scanned: 0, matched: 0, moved: 0, total, nothingQueued: 0, sent: 0 },
    cutOff,
    started: options.now(),
    movedEvents: new Set(),
    skipped: new Set(),
  };
  const { tally } = run;
  const remapped = remapOnce(options);
  // A scan ends before what it hid reappears; on a large queue another round finds the rest.
  let complete = false;
  for (let round = 0; round < 100 && !complete && !options.shouldStop(); round++) {
    const movedBefore = tally.moved;
    // Records with a letter SQS did not take this round: their later letters wait for the next.
    const stopped = new Set<string>();
    tally.scanned = 0;
    tally.matched = tally.moved;
    ({ complete } = await scan(
      sqs,
      urls.deadLetterQueueUrl,
      options,
      async (batch) => {
        tally.scanned += batch.length;
        const matching = batch.filter((letter) => matches(letter, filters) && isOurs(run, letter));
        tally.matched += matching.length;
        const room = Math.max(0, filters.limit - tally.moved);
        const letters = await remapped(matching.slice(0, room));
        const gone = options.dryRun
          ? new Set<string>()
          : await moveLetters(sqs, urls, letters, { run, stopped, options });
        options.progress({ ...tally });
        return gone;
      },
      options.shouldStop,
    ));
    if (tally.moved === movedBefore) break;
  }
  const { moved, nothingQueued } = tally;
  const matched = tally.matched + run.skipped.size;
  return {
    matched,
    moved,
    left: matched - moved,
    complete,
    nothingQueued,
    skipped: run.skipped.size,
  };
}

/** Whether a letter is the redrive's to move: there when it started, of an event not moved yet. */
function isOurs(run: Run, letter: Scanned): boolean {
  const ours =
    letter.sentMs < run.cutOff &&
    (letter.item.eventId === null || !run.movedEvents.has(letter.item.eventId));
  if (!ours) run.skipped.add(letter.message.MessageId ?? '');
  return ours;
}

/**
 * Moves a batch's letters, paced: the plain ones as they are, the mapped ones as their events;
 * resolves the message ids gone from the dead-letter queue.
 */
async function moveLetters(
  sqs: SQSClient,
  urls: RedriveQueues,
  { plain, mapped }: { plain: Scanned[]; mapped: MappedLetter[] },
  { run, stopped, options }: { run: Run; stopped: Set<string>; options: RedriveOptions },
): Promise<Set<string>> {
  const gone = new Set<string>();
  if (plain.length + mapped.length === 0) return gone;
  await pace(
    run,
    plain.length + mapped.reduce((n, { messages }) => n + messages.length, 0),
    options,
  );
  for (const messageId of await move(sqs, urls, plain, stopped)) gone.add(messageId);
  for (const messageId of await deliver(sqs, urls, mapped, options.kept)) {
    gone.add(messageId);
    const letter = mapped.find(({ letter }) => letter.message.MessageId === messageId);
    if (letter?.messages.length === 0) run.tally.nothingQueued++;
  }
  run.tally.moved += gone.size;
  // Only those moved: one SQS did not take is matched again, and tried, in the next round.
  for (const { message, item } of [...plain, ...mapped.map(({ letter }) => letter)])
    if (item.eventId !== null && gone.has(message.MessageId ?? ''))
      run.movedEvents.add(item.eventId);
  return gone;
}

/** Paced from the start by the events sent, so the average never passes the rate. */
async function pace(
  run: Run,
  events: number,
  options: Pick<RedriveOptions, 'rate' | 'now' | 'sleep'>,
): Promise<void> {
  const due = run.started + ((run.tally.sent + events) / options.rate) * 1000;
  const wait = due - options.now();
  if (wait > 0) await options.sleep(wait);
  run.tally.sent += events;
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
  urls: RedriveQueues,
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
