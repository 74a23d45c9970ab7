import type { SQSClient } from '@aws-sdk/client-sqs';
import type { CliIo, Values } from './command.ts';
import { hiddenNotice, hideSeconds } from './dead-letter-filters.ts';
import {
  type ChangeOptions,
  type DeadLetterFilters,
  deleteLetters,
  matches,
  scan,
  startOfCommand,
  waitForHidden,
} from './dead-letter-queue.ts';
import { EXIT } from './errors.ts';
import type { Target } from './target.ts';

/** `dead-letters discard`: deletes the matching dead letters for good. */
export async function runDiscard(
  target: Target,
  values: Values,
  filters: DeadLetterFilters,
  io: CliIo,
): Promise<number> {
  const dryRun = values['dry-run'] === true;
  const result = await discardDeadLetters(target.sqs, target.deadLetterQueueUrl, filters, {
    dryRun,
    hideSeconds: hideSeconds(io),
    now: io.now,
    sleep: io.sleep,
    shouldStop: io.interrupted,
    waiting: hiddenNotice(io),
  });
  const { matched, discarded, left, skipped } = result;
  const letters = `dead ${matched === 1 ? 'letter' : 'letters'}`;
  const newer =
    skipped === 0
      ? ''
      : ` ${skipped} of them ${skipped === 1 ? 'was' : 'were'} written after it started (not looked at), and ${skipped === 1 ? 'stays' : 'stay'}.`;
  // At most --limit of those there when it started.
  const wanted = Math.min(matched - skipped, filters.limit);
  if (values.json) io.stdout(JSON.stringify({ matched, discarded, left }));
  else if (dryRun)
    io.stdout(
      `${wanted === matched ? '' : `${wanted} of `}${matched} matching ${letters} would be discarded (dry run: none discarded).${newer}`,
    );
  else io.stdout(`Discarded ${discarded} of ${matched} matching ${letters}; ${left} left.${newer}`);
  if (!result.complete && !io.interrupted() && discarded < filters.limit)
    io.stderr(
      'Not every dead letter could be read: the queue is too large to read in one go, or another read still hides some. npx mautic-relay dead-letters shows what is left.\n',
    );
  return dryRun || discarded >= wanted ? EXIT.ok : EXIT.failed;
}

interface DiscardResult {
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
  options: ChangeOptions,
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
