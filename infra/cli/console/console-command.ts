import type { Command } from '../command.ts';
import { deadLettersCommand } from '../dead-letters.ts';
import { EXIT } from '../errors.ts';
import { eventsCommand } from '../events.ts';
import { TARGET_HELP, withTarget } from '../options.ts';
import { redriveCommand } from '../redrive.ts';
import { sourcesCommand } from '../sources-command.ts';
import { statusCommand } from '../status.ts';
import { flowOf } from './console-flow.ts';
import { consoleRoutes } from './console-routes.ts';
import { readRunbook } from './console-runbook.ts';
import { startConsoleServer } from './console-server.ts';
import { commandRunner } from './console-views.ts';

/** The commands the console's views run, each with --json (console-views.ts). */
const VIEWED: ReadonlyArray<Command> = [
  statusCommand,
  eventsCommand,
  deadLettersCommand,
  redriveCommand,
  sourcesCommand,
];

/** How often the console looks for Ctrl-C while it serves. */
const POLL_MS = 200;

export const consoleCommand: Command = {
  name: 'console',
  usage: 'console (--env NAME | --local)',
  summary: 'a page on 127.0.0.1: the flow, Mautic’s health, events, dead letters, sources',
  details: `Serves a page on 127.0.0.1, on a free port, and prints its URL once, with a token: open it
in a browser on this machine. Its views:
  Overview      the last hour's flow (events accepted, delivered, retrying and dead-lettered
                per minute), the queue, Mautic's health (its circuit, the next probe, the last
                failure, its time per item, the calls in flight allowed), the tokens' time left
  Events        an event's outcome by id (one or several), or a list by status, entity, action
                and time: its Mautic ids, tries, reason or last failure ("events show|list")
  Dead letters  the letters by reason with the runbook's words; redrive and discard, the dry-run
                count first; each letter links to its event's outcome
  Sources       each source, and a playground that runs "sources test" on a pasted payload
Each view runs the operator command it shows, with --json, on the same target and with the same
AWS credentials; nothing is deployed for it. Only this machine reaches it; nothing it shows holds
a token, a secret or a record's contents (but the playground's events, mapped from the payload
pasted). Ctrl-C stops it.
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
