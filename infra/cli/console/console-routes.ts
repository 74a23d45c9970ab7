import type { Target } from '../target.ts';
import type { Flow } from './console-flow.ts';
import type { RunbookEntry } from './console-runbook.ts';
import { type Answer, type CommandRunner, withPayloadFile } from './console-views.ts';

/** One API route: its method, and what it answers for a query and a JSON body. */
export interface Route {
  method: 'GET' | 'POST';
  handle: (query: URLSearchParams, body: Record<string, unknown>) => Promise<Answer>;
}

export interface ConsoleDeps {
  runner: CommandRunner;
  flow: () => Promise<Flow | null>;
  runbook: Record<string, RunbookEntry>;
  target: Pick<Target, 'name' | 'local'>;
}

/** The filters each view passes on to its command, each as `--name=value` (never an option). */
const LETTER_FILTERS = ['reason', 'entity', 'action', 'since', 'limit'] as const;
const EVENT_FILTERS = ['status', 'entity', 'action', 'since', 'limit'] as const;
/** Most ids one lookup takes, as `events show` does. */
const MAX_EVENT_IDS = 100;

function filterArgs(
  source: (name: string) => unknown,
  filters: ReadonlyArray<string> = LETTER_FILTERS,
): string[] {
  const args: string[] = [];
  for (const name of filters) {
    const value = source(name);
    if (typeof value === 'string' && value !== '') args.push(`--${name}=${value.slice(0, 200)}`);
  }
  return args;
}

/** A source's name or an event's id: a word, never something the parser could take for an option. */
const isName = (value: string) => /^[\w.:][\w.:-]{0,199}$/.test(value);
const badRequest = (error: string): Answer => ({ status: 400, body: { error } });
const badName = (what: string) => badRequest(`Not ${what}`);

const fromQuery = (query: URLSearchParams) => (name: string) => query.get(name) ?? undefined;
const fromBody = (body: Record<string, unknown>) => (name: string) => body[name];

/**
 * The console's API: each view is an operator command with `--json` (console-views.ts), so the
 * page shows the numbers the CLI prints. The state-changing ones are POST (console-server.ts
 * asks them for the token header).
 */
export function consoleRoutes(deps: ConsoleDeps): Record<string, Route> {
  const { runner } = deps;
  const changeLetters =
    (command: string[]) => async (_: URLSearchParams, body: Record<string, unknown>) =>
      runner.run(command[0] ?? '', [
        ...command.slice(1),
        ...filterArgs(fromBody(body)),
        ...(body.dryRun === true ? ['--dry-run'] : []),
      ]);
  return {
    '/api/overview': {
      method: 'GET',
      handle: async () => {
        const [status, flow] = await Promise.all([
          runner.run('status', []),
          deps.flow().catch(() => null),
        ]);
        if (status.status !== 200) return status;
        return { status: 200, body: { target: deps.target, ...(status.body as object), flow } };
      },
    },
    '/api/dead-letters': {
      method: 'GET',
      handle: async (query) => {
        const answer = await runner.run('dead-letters', filterArgs(fromQuery(query)));
        if (answer.status !== 200) return answer;
        return { status: 200, body: { ...(answer.body as object), runbook: deps.runbook } };
      },
    },
    '/api/dead-letters/redrive': { method: 'POST', handle: changeLetters(['redrive']) },
    '/api/dead-letters/discard': {
      method: 'POST',
      handle: changeLetters(['dead-letters', 'discard']),
    },
    '/api/sources': { method: 'GET', handle: () => runner.run('sources', ['list']) },
    '/api/sources/test': {
      method: 'POST',
      handle: async (_, body) => {
        const name = typeof body.name === 'string' ? body.name : '';
        if (!isName(name)) return badName("a source's name");
        const payload = typeof body.payload === 'string' ? body.payload : '';
        const headers = Array.isArray(body.headers)
          ? body.headers.filter((h): h is string => typeof h === 'string' && h.trim() !== '')
          : [];
        return withPayloadFile(payload, (path) =>
          runner.run('sources', [
            'test',
            name,
            `--payload=${path}`,
            ...headers.map((header) => `--header=${header}`),
          ]),
        );
      },
    },
    '/api/events': {
      method: 'GET',
      handle: async (query) => {
        // One id or several, apart by spaces or commas: `events show ID…`; else `events list`.
        const ids = [...new Set((query.get('id') ?? '').split(/[\s,]+/).filter(Boolean))];
        if (ids.length > MAX_EVENT_IDS) return badRequest(`At most ${MAX_EVENT_IDS} event ids`);
        if (!ids.every(isName)) return badName("an event's id");
        return ids.length > 0
          ? runner.run('events', ['show', ...ids])
          : runner.run('events', ['list', ...filterArgs(fromQuery(query), EVENT_FILTERS)]);
      },
    },
  };
}
