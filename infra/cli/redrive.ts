import type { CliIo, Command, Values } from './command.ts';
import {
  checkFilters,
  FILTER_HELP,
  filterOptions,
  hiddenNotice,
  hideSeconds,
} from './dead-letter-filters.ts';
import type { DeadLetterFilters } from './dead-letter-queue.ts';
import { EXIT, UsageError } from './errors.ts';
import { TARGET_HELP, withTarget } from './options.ts';
import { type RedriveResult, redriveDeadLetters } from './redrive-letters.ts';
import { sourceRemapper } from './source-letters.ts';
import { deployedSources, localSources } from './sources.ts';
import type { Target } from './target.ts';

/** `redrive`: its options and what it says; the moving itself is redrive-letters.ts. */
export const redriveCommand: Command = {
  name: 'redrive',
  usage:
    'redrive (--env NAME | --local) [--reason R] [--entity E] [--action A] [--since T] [--limit N] [--rate N] [--from URL] [--dry-run] [--json]',
  summary: 'move dead letters back to the events queue',
  details: `Moves the matching dead letters back to the events queue, where they start a new retry
horizon: each is sent to the events queue before it is deleted from the dead-letter queue, so an
interrupted redrive loses nothing, and running it again finishes the job. Ctrl-C stops after the
batch in hand. A redrive killed between a send and its delete leaves that event in both queues,
and the re-run sends it again (delivery is at least once). Each goes back into its record's
message group, in the order the record's dead letters were written. A mapping_failed letter (a
source's payload, contract §6) is mapped again by its source as it runs now (the running
stack's SOURCES_FILE, or the document the environment's ingest function is deployed with): its
events are queued as the ingest queues them, or nothing when the filter is false now; one whose
mapping still fails stays, named on stderr with the error (never its payload). Only the letters
there when it started (by SQS's clock, not this computer's) are moved, each event once: one
written since (say, one it moved that came back) stays, counted in "left". Exits 1 when some
matching dead letters could not be moved.
${TARGET_HELP}
${FILTER_HELP}
  --limit N    move at most N (default 100, as for dead-letters; "left" counts the rest)
  --rate N     at most N events a second (default 50)
  --from URL   move from this queue instead of the dead-letter queue: one an upgrade kept
               aside (docs/operations.md, Upgrade); a message without a record's group gets
               one of its own
  --dry-run    only count what would be moved`,
  options: {
    ...filterOptions,
    rate: { type: 'string', default: '50' },
    from: { type: 'string' },
    'dry-run': { type: 'boolean', default: false },
  },
  positionals: 0,
  run: async (values, _, io) => {
    const how = checkRedrive(values, io);
    return withTarget(values, io, async (target) => {
      if (how.from === target.eventsQueueUrl)
        throw new UsageError('--from names the events queue itself: nothing to move');
      return runRedrive(target, how, io);
    });
  },
};

/** What a redrive is asked to do, its options checked. */
interface Redrive {
  filters: DeadLetterFilters;
  rate: number;
  from: string | undefined;
  dryRun: boolean;
  json: boolean;
}

function checkRedrive(values: Values, io: CliIo): Redrive {
  const filters = checkFilters(values, io, 100);
  const rate = Number(values.rate);
  if (!/^\d+(\.\d+)?$/.test(String(values.rate)) || rate <= 0 || rate > 3000)
    throw new UsageError('--rate must be a number of events a second, above 0 and at most 3000');
  const from = typeof values.from === 'string' ? values.from : undefined;
  if (from !== undefined && !/^https?:\/\/\S+\/\d+\/[\w.-]+$/.test(from))
    throw new UsageError(
      '--from must be a queue URL, https://sqs.REGION.amazonaws.com/ACCOUNT/NAME',
    );
  return { filters, rate, from, dryRun: values['dry-run'] === true, json: values.json === true };
}

/** The redrive on its target, reported on stdout and stderr; resolves the exit code. */
async function runRedrive(target: Target, how: Redrive, io: CliIo): Promise<number> {
  const { filters, rate, from, dryRun } = how;
  const bar = progressBar(io);
  const keptReport = keptLines(io, dryRun);
  const result = await redriveDeadLetters(
    target.sqs,
    {
      deadLetterQueueUrl: from ?? target.deadLetterQueueUrl,
      eventsQueueUrl: target.eventsQueueUrl,
    },
    filters,
    {
      rate,
      dryRun,
      hideSeconds: hideSeconds(io),
      waiting: hiddenNotice(io),
      now: io.now,
      sleep: io.sleep,
      shouldStop: io.interrupted,
      progress: bar.update,
      remap: sourceRemapper(() =>
        target.local ? localSources(io.env) : deployedSources(target.name, io),
      ),
      kept: keptReport.add,
    },
  );
  bar.done();
  keptReport.done();
  const { matched, moved, left } = result;
  if (how.json) io.stdout(JSON.stringify({ matched, moved, left }));
  else
    io.stdout(
      redriveLine(result, {
        dryRun,
        interrupted: io.interrupted(),
        kept: keptReport.count(),
        limit: filters.limit,
      }),
    );
  // Unread ones matter only when the limit left room for them.
  if (!result.complete && !io.interrupted() && result.moved < filters.limit)
    io.stderr(
      "Not every dead letter could be read: the queue is too large to read in one go, another read still hides some, or some wait behind a record's earlier dead letters that were not moved (the queue hands out a record's later dead letters only once its earlier ones are gone). npx mautic-relay dead-letters shows what is left.\n",
    );
  // Those written after it started were not for this run to move: it says so, and left
  // counts them, but they are no failure of it.
  const wanted = Math.min(result.matched - result.skipped, filters.limit);
  return dryRun || result.moved >= wanted ? EXIT.ok : EXIT.failed;
}

/** A one-line bar on a terminal's stderr; nothing otherwise. */
function progressBar(io: CliIo) {
  let drawn = false;
  return {
    update: (state: { scanned: number; matched: number; moved: number; total: number }) => {
      if (!io.progressBar) return;
      const total = Math.max(state.total, state.scanned, 1);
      const filled = Math.round((20 * state.scanned) / total);
      io.stderr(
        `\r[${'#'.repeat(filled)}${'.'.repeat(20 - filled)}] read ${state.scanned}/${total}, moved ${state.moved} of ${state.matched} matching`,
      );
      drawn = true;
    },
    done: () => {
      if (drawn) io.stderr('\n');
    },
  };
}

function redriveLine(
  result: RedriveResult,
  options: { dryRun: boolean; interrupted: boolean; kept: number; limit: number },
): string {
  const letters = (n: number) => `dead ${n === 1 ? 'letter' : 'letters'}`;
  const { dryRun, interrupted, kept, limit } = options;
  const skipped =
    result.skipped === 0
      ? ''
      : ` ${result.skipped} of them ${result.skipped === 1 ? 'was' : 'were'} written after the redrive started, or ${result.skipped === 1 ? 'is a copy' : 'are copies'} of an event it moved (it moves each event once): run it again for those.`;
  if (dryRun) {
    const movable = Math.min(result.matched - result.skipped - kept, limit);
    const stay = kept === 0 ? '' : `; the ${kept} named above would stay`;
    const of = movable === result.matched ? '' : `${movable} of `;
    return `${of}${result.matched} matching ${letters(result.matched)} would be moved (dry run: none moved)${stay}.${skipped}`;
  }
  const nothing =
    result.nothingQueued === 0
      ? ''
      : ` (${result.nothingQueued} of them deleted with nothing to queue: their source's filter is false now, or its mapping yields no event)`;
  return `Moved ${result.moved} of ${result.matched} matching ${letters(result.matched)} to the events queue${nothing}; ${result.left} left.${skipped}${interrupted ? ' Interrupted: run the same command again to finish.' : ''}`;
}

/** Most letters a redrive names as staying; the count covers the rest. */
const KEPT_LINES = 20;

/** The `mapping_failed` letters a redrive leaves, on stderr: each id and why, never its payload. */
function keptLines(io: CliIo, dryRun: boolean) {
  let count = 0;
  return {
    add: (eventId: string, problem: string) => {
      count++;
      if (count <= KEPT_LINES)
        io.stderr(`Dead letter ${eventId} ${dryRun ? 'would stay' : 'stays'}: ${problem}\n`);
    },
    count: () => count,
    done: () => {
      if (count > KEPT_LINES)
        io.stderr(
          `…and ${count - KEPT_LINES} more dead letters that ${dryRun ? 'would stay' : 'stay'} (npx mautic-relay dead-letters --reason mapping_failed lists them).\n`,
        );
    },
  };
}
