/**
 * The console's views run the operator commands with --json on the console's target: the
 * arguments they pass (filters as `--name=value`, so no value is taken for an option), what they
 * answer for a usage mistake, and the Events view's lookups and lists.
 */
import { describe, expect, it } from 'vitest';
import type { CliIo, Command } from '../../infra/cli/command.ts';
import { consoleRoutes } from '../../infra/cli/console/console-routes.ts';
import { commandRunner } from '../../infra/cli/console/console-views.ts';
import { UsageError } from '../../infra/cli/errors.ts';
import { targetOptions } from '../../infra/cli/options.ts';

const io: CliIo = {
  stdout: () => {},
  stderr: () => {},
  env: {},
  progressBar: true,
  now: Date.now,
  sleep: async () => {},
  interrupted: () => false,
  readStdin: async () => new Uint8Array(),
  readSecret: async () => 'never',
};

/** A command that prints its parsed arguments as its JSON, as the real ones print theirs. */
function echo(name: string): Command {
  return {
    name,
    usage: name,
    summary: '',
    details: '',
    options: {
      ...targetOptions,
      reason: { type: 'string' },
      status: { type: 'string' },
      since: { type: 'string' },
      'dry-run': { type: 'boolean' },
      payload: { type: 'string' },
      header: { type: 'string', multiple: true },
    },
    positionals: 5,
    run: async (values, positionals, quiet) => {
      if (values.reason === 'bad') throw new UsageError('--reason must be one of …');
      quiet.stderr('a note\n');
      quiet.stdout(JSON.stringify({ values, positionals, tty: quiet.progressBar }));
      return 0;
    },
  };
}

const deps = (commands: Command[]) => ({
  runner: commandRunner(commands, ['--env', 'dev'], io),
  flow: async () => null,
  runbook: { no_match: { happened: 'h', todo: 't' } },
  target: { name: 'dev', local: false },
});

describe('the console’s views', () => {
  it('run the command with --json on the console’s target, filters as --name=value', async () => {
    const routes = consoleRoutes(deps([echo('dead-letters'), echo('redrive')]));
    const query = new URLSearchParams({ reason: '--local', since: '2h', other: 'x' });
    const list = await routes['/api/dead-letters']?.handle(query, {});
    expect(list?.status).toBe(200);
    expect(list?.body).toMatchObject({
      result: {
        values: { reason: '--local', since: '2h', env: 'dev', json: true, local: false },
        positionals: [],
        tty: false,
      },
      failed: false,
      notes: ['a note'],
      runbook: { no_match: { happened: 'h', todo: 't' } },
    });
    const dry = await routes['/api/dead-letters/redrive']?.handle(new URLSearchParams(), {
      reason: 'no_match',
      dryRun: true,
    });
    expect(dry?.body).toMatchObject({
      result: { values: { reason: 'no_match', 'dry-run': true } },
    });
  });

  it('answer a usage mistake with 400 and its message', async () => {
    const routes = consoleRoutes(deps([echo('dead-letters')]));
    const answer = await routes['/api/dead-letters']?.handle(
      new URLSearchParams({ reason: 'bad' }),
      {},
    );
    expect(answer).toEqual({ status: 400, body: { error: '--reason must be one of …' } });
  });

  it('refuse a source name or an event id the parser could take for an option', async () => {
    const routes = consoleRoutes(deps([echo('sources'), echo('events')]));
    const test = await routes['/api/sources/test']?.handle(new URLSearchParams(), {
      name: '--local',
      payload: '{}',
    });
    expect(test?.status).toBe(400);
    const show = await routes['/api/events']?.handle(new URLSearchParams({ id: '-x' }), {});
    expect(show?.status).toBe(400);
  });

  it('map a pasted payload through a file sources test reads, with the headers', async () => {
    const routes = consoleRoutes(deps([echo('sources')]));
    const answer = await routes['/api/sources/test']?.handle(new URLSearchParams(), {
      name: 'stripe',
      payload: '{"a":1}',
      headers: ['X-Topic: a', ''],
    });
    type Echoed = { result: { values: Record<string, unknown>; positionals: string[] } };
    const { values, positionals } = (answer as { body: Echoed }).body.result;
    expect(positionals).toEqual(['test', 'stripe']);
    expect(values.header).toEqual(['X-Topic: a']);
    expect(String(values.payload)).toMatch(/payload\.json$/);
  });

  it('look events up by one id or several, each checked, with events show', async () => {
    const routes = consoleRoutes(deps([echo('events')]));
    const get = (query: Record<string, string>) =>
      routes['/api/events']?.handle(new URLSearchParams(query), {});
    const one = await get({ id: 'msg_1:0' });
    expect(one?.body).toMatchObject({ result: { positionals: ['show', 'msg_1:0'] } });
    const several = await get({ id: ' stripe:evt_1, msg_2:1  msg_2:1\nmsg_3 ' });
    expect(several?.body).toMatchObject({
      result: { positionals: ['show', 'stripe:evt_1', 'msg_2:1', 'msg_3'] },
    });
    for (const id of ['-x', 'msg_1 --local', 'a/b', 'x'.repeat(201)])
      expect((await get({ id }))?.status, id).toBe(400);
    const tooMany = Array.from({ length: 101 }, (_, i) => `e${i}`).join(' ');
    expect(await get({ id: tooMany })).toEqual({
      status: 400,
      body: { error: 'At most 100 event ids' },
    });
  });

  it('list events with events list, the filters as --name=value, only the ones it takes', async () => {
    const routes = consoleRoutes(deps([echo('events')]));
    const listed = await routes['/api/events']?.handle(
      new URLSearchParams({
        status: 'delivered',
        since: '--local',
        reason: 'no_match',
        entity: '',
      }),
      {},
    );
    expect(listed?.status).toBe(200);
    const { result } = (listed as { body: { result: Record<string, unknown> } }).body;
    expect(result).toMatchObject({
      positionals: ['list'],
      values: { status: 'delivered', since: '--local', env: 'dev', json: true, local: false },
    });
    expect(result.values).not.toHaveProperty('reason');
  });

  it('pass on a command that printed nothing and failed with its notes (outcomes turned off)', async () => {
    const off: Command = {
      ...echo('events'),
      run: async (_, __, quiet) => {
        quiet.stderr('This npm start keeps no outcomes of events (OUTCOME_RETENTION_SECONDS=0).\n');
        return 1;
      },
    };
    const routes = consoleRoutes(deps([off]));
    expect(await routes['/api/events']?.handle(new URLSearchParams(), {})).toEqual({
      status: 200,
      body: {
        result: null,
        failed: true,
        notes: ['This npm start keeps no outcomes of events (OUTCOME_RETENTION_SECONDS=0).'],
      },
    });
  });

  it('say a command that is not in this version is not', async () => {
    const without = consoleRoutes(deps([]));
    expect(await without['/api/events']?.handle(new URLSearchParams(), {})).toEqual({
      status: 501,
      body: { error: 'events is not in this version' },
    });
  });
});
