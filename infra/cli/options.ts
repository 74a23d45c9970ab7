import { type ParseArgsOptionsConfig, parseArgs } from 'node:util';
import { secretNames } from '../../functions/shared/secret-names.ts';
import type { CliIo, Command, Values } from './command.ts';
import { environmentRegion } from './environment-region.ts';
import { awsCall, UsageError } from './errors.ts';
import { closeTarget, environmentTarget, localTarget, type Target } from './target.ts';

/*
 * What several commands share: the options that pick a relay (--env NAME, --local) and --json,
 * their help and checks, and the parsing of a command's arguments.
 */

export const TARGET_HELP = `  --env NAME   a deployed environment: its stack MauticRelay-NAME, in the region cdk.json
               binds NAME to (run in the project's directory; elsewhere, the region of
               AWS_REGION or AWS_PROFILE), with the usual AWS credentials
  --local      the running "npm start" (found from .mautic-relay/local.json in the directory
               it runs in, or in MAUTIC_RELAY_DIR)
  --json       print one JSON document on stdout`;

export const targetOptions = {
  env: { type: 'string' },
  local: { type: 'boolean', default: false },
  json: { type: 'boolean', default: false },
} satisfies ParseArgsOptionsConfig;

/** The --env NAME or --local of a command, checked; then the command on its target. */
export async function withTarget(
  values: Values,
  io: CliIo,
  run: (target: Target) => Promise<number>,
): Promise<number> {
  if (values.env !== undefined && values.local)
    throw new UsageError('Give --env NAME or --local, not both');
  if (values.env === undefined && !values.local)
    throw new UsageError(
      'Which relay? Give --env NAME (a deployed environment) or --local (npm start)',
    );
  const environment = values.local ? 'local' : checkEnvironment(values.env);
  return awsCall(environment, io, async () => {
    const target = values.local ? localTarget(io.env) : await environmentTarget(environment);
    try {
      return await run(target);
    } finally {
      closeTarget(target);
    }
  });
}

/** A valid environment name, and one the project's cdk.json knows (when there is one here). */
export function checkEnvironment(value: Values[string]): string {
  if (typeof value !== 'string' || value === '') throw new UsageError('--env NAME is required');
  secretNames(value);
  environmentRegion(value, process.cwd());
  return value;
}

export function wholeNumber(value: unknown, option: string, min: number, max: number): number {
  const number = Number(value);
  if (typeof value !== 'string' || !/^\d+$/.test(value) || number < min || number > max)
    throw new UsageError(`${option} must be a whole number from ${min} to ${max}`);
  return number;
}

/** A command's arguments, parsed strictly: a mistake is a UsageError in node's words. */
export function parseOptions(
  command: Command,
  args: string[],
): { values: Values; positionals: string[] } {
  let parsed: { values: Values; positionals: string[] };
  try {
    parsed = parseArgs({
      args: joinDashedValues(args, command.options),
      options: command.options,
      allowPositionals: command.positionals > 0,
      strict: true,
    }) as { values: Values; positionals: string[] };
  } catch (error) {
    throw new UsageError(error instanceof Error ? error.message : String(error));
  }
  if (parsed.positionals.length > command.positionals)
    throw new UsageError(`Unexpected argument "${parsed.positionals[command.positionals]}"`);
  return parsed;
}

/**
 * `--limit -5`: node's parser takes a value starting with a dash for an option of its own and
 * refuses it with its message, not the command's. Such a value after an option that takes one
 * (a string option) is joined to it, `--limit=-5`, so the command's check says what it takes.
 * Everything after `--` is left as it is.
 */
function joinDashedValues(args: string[], options: ParseArgsOptionsConfig): string[] {
  const joined: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] ?? '';
    if (arg === '--') return [...joined, ...args.slice(i)];
    const name = arg.startsWith('--') && !arg.includes('=') ? arg.slice(2) : '';
    const value = args[i + 1];
    const takesValue = Object.hasOwn(options, name) && options[name]?.type === 'string';
    if (takesValue && value !== undefined && /^-\d/.test(value)) {
      joined.push(`${arg}=${value}`);
      i++;
    } else joined.push(arg);
  }
  return joined;
}
