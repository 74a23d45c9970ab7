import type { ParseArgsOptionsConfig } from 'node:util';
import { DEAD_LETTER_REASONS } from '../../functions/core/dead-letter-reasons.ts';
import { CONTACT_ACTIONS } from '../../functions/core/events.ts';
import type { CliIo, Values } from './command.ts';
import { DEFAULT_HIDE_SECONDS, type DeadLetterFilters } from './dead-letter-queue.ts';
import { UsageError } from './errors.ts';
import { targetOptions, wholeNumber } from './options.ts';

/*
 * What `dead-letters` and `redrive` share: the filters that pick dead letters (their options,
 * help and checks) and how long a read hides what it reads.
 */

/** The dead-letter reasons, as many to a line as fit under --reason's description. */
function reasonsHelp(): string {
  const lines = [''];
  for (const reason of DEAD_LETTER_REASONS) {
    const line = lines[lines.length - 1] ?? '';
    if (line !== '' && line.length + reason.length > 76) lines.push(reason);
    else lines[lines.length - 1] = line === '' ? reason : `${line}, ${reason}`;
  }
  return lines.join(',\n               ');
}

export const FILTER_HELP = `  --reason R   only this reason, one of:
               ${reasonsHelp()}
  --entity E   only this entity (contacts, companies, …)
  --action A   only this action: create, edit, delete, or an integrator action (addToSegment, …)
  --since T    only dead letters from the last T (90s, 30m, 2h, 7d) or since an ISO 8601 time`;

export const filterOptions = {
  ...targetOptions,
  reason: { type: 'string' },
  entity: { type: 'string' },
  action: { type: 'string' },
  since: { type: 'string' },
  limit: { type: 'string' },
} satisfies ParseArgsOptionsConfig;

export function checkFilters(values: Values, io: CliIo, defaultLimit: number): DeadLetterFilters {
  const text = (name: string) =>
    typeof values[name] === 'string' ? (values[name] as string) : undefined;
  const reason = text('reason');
  if (reason !== undefined && !(DEAD_LETTER_REASONS as ReadonlyArray<string>).includes(reason))
    throw new UsageError(
      `--reason must be one of the dead-letter reasons: ${DEAD_LETTER_REASONS.join(', ')}`,
    );
  const entity = text('entity');
  if (entity !== undefined && !/^[a-z][a-zA-Z]{1,63}$/.test(entity))
    throw new UsageError('--entity must be a Mautic entity such as contacts');
  const action = text('action');
  const actions = ['create', 'edit', 'delete', ...Object.keys(CONTACT_ACTIONS)];
  if (action !== undefined && !actions.includes(action))
    throw new UsageError(`--action must be one of: ${actions.join(', ')}`);
  const sinceText = text('since');
  const since = sinceText === undefined ? undefined : parseSince(sinceText, io.now());
  if (sinceText !== undefined && since === undefined)
    throw new UsageError('--since must be like 90s, 30m, 2h or 7d, or an ISO 8601 time');
  const limitText = text('limit');
  const limit =
    limitText === undefined ? defaultLimit : wholeNumber(limitText, '--limit', 1, 1_000_000);
  return { reason, entity, action, since, limit };
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

/** How long a read hides dead letters: MAUTIC_RELAY_HIDE_SECONDS, for tests and huge queues. */
export function hideSeconds(io: CliIo): number {
  const text = io.env.MAUTIC_RELAY_HIDE_SECONDS;
  return text === undefined
    ? DEFAULT_HIDE_SECONDS
    : wholeNumber(text, 'MAUTIC_RELAY_HIDE_SECONDS', 2, 43_200);
}

/** What discard and redrive say while they wait for letters an earlier read still hides. */
export function hiddenNotice(io: CliIo): (hidden: number) => void {
  return (hidden) =>
    io.stderr(
      `${hidden} dead ${hidden === 1 ? 'letter is' : 'letters are'} hidden by an earlier read that did not finish; waiting up to ${hideSeconds(io)} s for ${hidden === 1 ? 'it' : 'them'} to come back…\n`,
    );
}
