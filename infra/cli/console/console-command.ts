import type { Command } from '../command.ts';
import { deadLettersCommand } from '../dead-letters.ts';
import { EXIT } from '../errors.ts';
import { TARGET_HELP, withTarget } from '../options.ts';
import { redriveCommand } from '../redrive.ts';
import { sourcesCommand } from '../sources-command.ts';
import { statusCommand } from '../status.ts';
import { flowOf } from './console-flow.ts';
import { consoleRoutes } from './console-routes.ts';
import { readRunbook } from './console-runbook.ts';
import { startConsoleServer } from './console-server.ts';
import { commandRunner } from './console-views.ts';

/**
 * The commands the console's views run. `events` joins this list when it exists: the Events
 * view asks for it by name and says it is not in this version until then.
 */
const VIEWED: ReadonlyArray<Command> = [
  statusCommand,
  deadLettersCommand,
  redriveCommand,
  sourcesCommand,
];

/** How often the console looks for Ctrl-C while it serves. */
const POLL_MS = 200;

export const consoleCommand: Command = {
  name: 'console',
  usage: 'console (--env NAME | --local)',
  summary: 'a page on 127.0.0.1: the flow, the queue, dead letters, sources',
  details: `Serves a page on 127.0.0.1, on a free port, and prints its URL once, with a token: open it
in a browser on this machine. It shows the last hour's flow (events accepted, delivered, retrying
and dead-lettered per minute), the queue, Mautic's calls, the tokens' time left, the dead letters
by reason with the runbook's words (redrive and discard, the dry-run count first), and the
sources with a playground that runs "sources test" on a pasted payload. Each view runs the
operator command it shows, with --json, on the same target and with the same AWS credentials;
nothing is deployed for it. Only this machine reaches it; nothing it shows holds a token, a
secret or a record's contents (but the playground's events, mapped from the payload pasted).
Ctrl-C stops it.
${TARGET_HELP.split('\n  --json')[0]}`,
  options: { env: { type: 'string' }, local: { type: 'boolean', default: false } },
  positionals: 0,
  run: (values, _, io) =>
    withTarget(values, io, async (target) => {
      const targetArgs = target.local ? ['--local'] : ['--env', target.name];
      const server = await startConsoleServer(
        consoleRoutes({
          runner: commandRunner(VIEWED, targetArgs, io),
          flow: flowOf(target, io.env, io.now),
          runbook: readRunbook(),
          target: { name: target.name, local: target.local },
        }),
      );
      io.stdout(`Console of ${target.local ? 'the local stack' : `environment ${target.name}`}:`);
      io.stdout(`  ${server.url}`);
      io.stdout('Open it in a browser on this machine; Ctrl-C stops it.');
      try {
        while (!io.interrupted()) await io.sleep(POLL_MS);
      } finally {
        await server.close();
      }
      return EXIT.ok;
    }),
};
