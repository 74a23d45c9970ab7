import type { SQSClient } from '@aws-sdk/client-sqs';
import type { Command } from './command.ts';
import { maskedDetail } from './dead-letter-details.ts';
import { checkFilters, FILTER_HELP, filterOptions, hideSeconds } from './dead-letter-filters.ts';
import {
  countMessages,
  type DeadLetterFilters,
  type DeadLetterItem,
  matches,
  scan,
} from './dead-letter-queue.ts';
import { runDiscard } from './dead-letters-discard.ts';
import { EXIT, UsageError } from './errors.ts';
import { TARGET_HELP, withTarget } from './options.ts';

/** `dead-letters [discard]`: the list, here, and the discard (dead-letters-discard.ts). */
export const deadLettersCommand: Command = {
  name: 'dead-letters',
  usage:
    'dead-letters [discard] (--env NAME | --local) [--reason R] [--entity E] [--action A] [--since T] [--limit N] [--show-data] [--dry-run] [--json]',
  summary: 'list dead letters with their reasons, newest first; discard them',
  details: `Reads the dead-letter queue without consuming it (what it reads is visible again as
soon as it is done) and lists the matching dead letters, newest first, with a count by reason
(of all of them; only the newest --limit are kept). Record contents are shown only with
--show-data.
"dead-letters discard" deletes the matching dead letters for good (once they were looked at),
and says how many; the others stay, and so do those written after it started (by SQS's clock),
counted in "left". Exits 1 when some matching ones could not be deleted.
${TARGET_HELP}
${FILTER_HELP}
  --limit N    list (discard) at most N (default 100; the counts cover all)
  --show-data  include each event's record id and data, or a mapping_failed letter's payload
               (the list only)
  --dry-run    discard: only count what would be deleted`,
  options: {
    ...filterOptions,
    'show-data': { type: 'boolean', default: false },
    'dry-run': { type: 'boolean', default: false },
  },
  positionals: 1,
  run: async (values, positionals, io) => {
    const [action] = positionals;
    if (action !== undefined && action !== 'discard')
      throw new UsageError(`Unexpected argument "${action}": dead-letters takes only "discard"`);
    const filters = checkFilters(values, io, 100);
    if (action === 'discard') {
      if (values['show-data']) throw new UsageError('--show-data is for the list');
      return withTarget(values, io, (target) => runDiscard(target, values, filters, io));
    }
    if (values['dry-run']) throw new UsageError('--dry-run is for dead-letters discard');
    return withTarget(values, io, async (target) => {
      const showData = values['show-data'] === true;
      const list = await listDeadLetters(target.sqs, target.deadLetterQueueUrl, filters, {
        showData,
        now: io.now,
        hideSeconds: hideSeconds(io),
      });
      if (values.json) {
        const { complete: _complete, ...json } = list;
        io.stdout(JSON.stringify(json));
      } else {
        const where = target.local ? '--local' : `--env ${target.name}`;
        for (const line of deadLetterLines(list, showData, where)) io.stdout(line);
      }
      if (!list.complete)
        io.stderr(
          "The counts are partial: the queue is too large to read in one go, another read (or one that was stopped) still hides some dead letters for up to a minute, or a record has more dead letters than a read can show (the queue hands out a record's later dead letters only once its earlier ones are gone: a redrive moves them in turn).\n",
        );
      return EXIT.ok;
    });
  },
};

interface DeadLetterList {
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
        options.showData
          ? { ...plain, id: id ?? null, data, ...shown }
          : { ...plain, detail: maskedDetail(plain.detail) },
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

function deadLetterLines(list: DeadLetterList, showData: boolean, target: string): string[] {
  const reasons = Object.entries(list.byReason)
    .sort(([, a], [, b]) => b - a)
    .map(([reason, count]) => `${reason} ${count}`)
    .join(', ');
  const lines = [
    list.count === 0
      ? 'No dead letters match.'
      : `${list.count} dead ${list.count === 1 ? 'letter' : 'letters'} (${reasons})${list.items.length < list.count ? `; the newest ${list.items.length}:` : ':'}`,
  ];
  for (const item of list.items) {
    const detail = item.detail
      ? ` ${item.detail.length > 100 ? `${item.detail.slice(0, 100)}…` : item.detail}`
      : '';
    lines.push(
      `  ${item.deadLetteredAt ?? '?'}  ${item.reason}${item.status === null ? '' : ` ${item.status}`}  ${item.source === undefined ? `${item.entity ?? '?'} ${item.action ?? '?'}` : `source ${item.source}`}  ${item.eventId ?? '(no event id)'}${detail}`,
    );
    if (showData) lines.push(`      ${dataText(item)}`);
  }
  if (list.items.some((item) => item.eventId !== null))
    lines.push(`What became of each event: npx mautic-relay events show EVENT_ID ${target}`);
  return lines;
}

/** `--show-data`: the record id and data, or an action's own fields and the `match` it named. */
function dataText(item: DeadLetterItem): string {
  const fields = ACTION_FIELDS_SHOWN.filter((field) => item[field] !== undefined).map(
    (field) => `${field} ${JSON.stringify(item[field])}`,
  );
  return [`id ${item.id ?? '-'}`, ...fields, `data ${JSON.stringify(item.data ?? null)}`].join(' ');
}

const ACTION_FIELDS_SHOWN = [
  'match',
  'segmentId',
  'campaignId',
  'companyId',
  'points',
  'channel',
] as const;
