import { ConfigError } from '../../functions/core/errors.ts';
import { loadSourceCompiler } from '../../functions/core/sources/source-compiler.ts';
import type { CliIo, Command } from './command.ts';
import { consoleCommand } from './console/console-command.ts';
import { deadLettersCommand } from './dead-letters.ts';
import { doctorCommand } from './doctor-command.ts';
import { EXIT, SetupError, UsageError } from './errors.ts';
import { eventsCommand } from './events.ts';
import { mauticCommand } from './mautic-command.ts';
import { authorizeCommand, credentialsCommand } from './operator-commands.ts';
import { parseOptions } from './options.ts';
import { redriveCommand } from './redrive.ts';
import { refreshCommand } from './refresh.ts';
import { sendCommand } from './send.ts';
import { sendersCommand } from './senders.ts';
import { sourcesCommand } from './sources-command.ts';
import { statusCommand } from './status.ts';

/** What the bin and the tests give runCli. */
export type { CliIo };

/** Every command, in the order the usage lists them. */
const COMMANDS: ReadonlyArray<Command> = [
  statusCommand,
  deadLettersCommand,
  redriveCommand,
  eventsCommand,
  sendersCommand,
  sourcesCommand,
  mauticCommand,
  credentialsCommand,
  refreshCommand,
  authorizeCommand,
  doctorCommand,
  sendCommand,
  consoleCommand,
];

function commandNamed(name: string | undefined): Command | undefined {
  return COMMANDS.find((command) => command.name === name);
}

function usage(): string {
  const width = Math.max(...COMMANDS.map(({ name }) => name.length));
  return [
    'Usage: npx mautic-relay COMMAND [options]   (COMMAND --help for its options)',
    '',
    ...COMMANDS.map(({ name, summary }) => `  ${name.padEnd(width)}  ${summary}`),
    '',
    'Exit codes: 0 done, 1 failed, 2 usage mistake, 3 cannot reach what the command needs.',
  ].join('\n');
}

function commandHelp(command: Command): string {
  return `Usage: npx mautic-relay ${command.usage}\n\n${command.details}\n`;
}

/**
 * The operator CLI (contract §4): parses and checks everything before any AWS call, runs the
 * command, and turns what went wrong into one message that names what to fix. Resolves the exit
 * code (see EXIT).
 */
export async function runCli(argv: string[], io: CliIo): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined) {
    io.stderr(`${usage()}\n`);
    return EXIT.usage;
  }
  if (name === 'help' || name === '--help' || name === '-h') {
    const about = commandNamed(rest[0]);
    io.stdout(about ? commandHelp(about) : usage());
    return EXIT.ok;
  }
  const command = commandNamed(name);
  if (!command) {
    io.stderr(`Unknown command "${name}".\n${usage()}\n`);
    return EXIT.usage;
  }
  if (rest.includes('--help') || rest.includes('-h')) {
    io.stdout(commandHelp(command));
    return EXIT.ok;
  }
  try {
    const { values, positionals } = parseOptions(command, rest);
    // Several commands compile sources (sources, redrive, doctor): JSONata first, for them all.
    await loadSourceCompiler();
    return await command.run(values, positionals, io);
  } catch (error) {
    return failed(name, error, io);
  }
}

/** What went wrong, as one message on stderr; resolves the exit code it calls for. */
function failed(name: string, error: unknown, io: CliIo): number {
  if (error instanceof UsageError || error instanceof ConfigError) {
    io.stderr(`${error.message}\nSee: npx mautic-relay ${name} --help\n`);
    return EXIT.usage;
  }
  if (error instanceof SetupError) {
    io.stderr(`${error.message}\n`);
    return EXIT.setup;
  }
  io.stderr(
    `${name} failed: ${error instanceof Error ? `${error.name}: ${error.message}` : String(error)}\n`,
  );
  return EXIT.failed;
}
