import { type ParseArgsOptionsConfig, parseArgs } from 'node:util';
import { CloudFormationClient } from '@aws-sdk/client-cloudformation';
import { LambdaClient } from '@aws-sdk/client-lambda';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { DEAD_LETTER_REASONS } from '../../functions/core/dead-letter-reasons.ts';
import { ConfigError } from '../../functions/core/errors.ts';
import { CONTACT_ACTIONS } from '../../functions/core/events.ts';
import { DEFAULTS, secretNames } from '../../functions/shared/config.ts';
import {
  DEFAULT_HIDE_SECONDS,
  type DeadLetterFilters,
  type DeadLetterList,
  discardDeadLetters,
  listDeadLetters,
  parseSince,
  type RedriveResult,
  redriveDeadLetters,
} from './dead-letters.ts';
import { EXIT, explainAwsError, SetupError } from './errors.ts';
import { EVENTS_COMMAND, parseEventsCommand, runEvents } from './events.ts';
import { endpointsDir } from './local-endpoints.ts';
import { authorize, storeCredentials, UsageError } from './operator-commands.ts';
import { printRefresh, refreshEnvironment, refreshLocal } from './refresh.ts';
import { sendEvents } from './send.ts';
import { senders, sendersLines } from './senders.ts';
import { sourceRemapper } from './source-letters.ts';
import {
  environmentSources,
  listSources,
  localSources,
  parseHeaders,
  readPayload,
  type SourcesInUse,
  setSourceSecret,
  sourcesListLines,
  sourceTestLines,
  testSource,
} from './sources.ts';
import { collectStatus, statusLines } from './status.ts';
import { closeTarget, environmentTarget, localTarget, type Target } from './target.ts';

/** What the CLI talks to besides AWS; the bin passes the process's, tests their own. */
export interface CliIo {
  stdout: (line: string) => void;
  stderr: (text: string) => void;
  env: Readonly<Record<string, string | undefined>>;
  /** True when stderr is a terminal: progress bars are drawn there. */
  progressBar: boolean;
  now: () => number;
  sleep: (ms: number) => Promise<void>;
  /** True once Ctrl-C was pressed: a redrive stops after the batch in hand. */
  interrupted: () => boolean;
  readStdin: () => Promise<Uint8Array>;
  readSecret: (prompt: string) => Promise<string>;
}

type Values = Record<string, string | boolean | string[] | undefined>;

interface Command {
  usage: string;
  summary: string;
  /** The options and environment, for --help. */
  details: string;
  options: ParseArgsOptionsConfig;
  positionals: number;
  /** Checks everything it can before any AWS call; resolves the exit code. */
  run: (values: Values, positionals: string[], io: CliIo) => Promise<number>;
}

const TARGET_HELP = `  --env NAME   a deployed environment: its stack MauticRelay-NAME is found through the usual
               AWS environment (AWS_REGION or AWS_PROFILE, and credentials)
  --local      the running "npm start" (found from .mautic-relay/local.json in the directory
               it runs in, or in MAUTIC_RELAY_DIR)
  --json       print one JSON document on stdout`;

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

const FILTER_HELP = `  --reason R   only this reason, one of:
               ${reasonsHelp()}
  --entity E   only this entity (contacts, companies, …)
  --action A   only this action: create, edit, delete, or an integrator action (addToSegment, …)
  --since T    only dead letters from the last T (90s, 30m, 2h, 7d) or since an ISO 8601 time`;

const targetOptions = {
  env: { type: 'string' },
  local: { type: 'boolean', default: false },
  json: { type: 'boolean', default: false },
} satisfies ParseArgsOptionsConfig;

const filterOptions = {
  ...targetOptions,
  reason: { type: 'string' },
  entity: { type: 'string' },
  action: { type: 'string' },
  since: { type: 'string' },
  limit: { type: 'string' },
} satisfies ParseArgsOptionsConfig;

const COMMANDS: Record<string, Command> = {
  status: {
    usage: 'status (--env NAME | --local) [--json]',
    summary: 'ingest URL, queue depth, dead letters, token time left',
    details: `Prints the ingest URL, the events queue (waiting, in flight, delayed, oldest event's
age: from CloudWatch, so not known locally), the dead-letter count, the access and refresh
tokens' time left and the last refresh (never a token), and the dashboard link for --env.
${TARGET_HELP}`,
    options: targetOptions,
    positionals: 0,
    run: (values, _, io) =>
      withTarget(values, io, async (target) => {
        const status = await collectStatus(target, io.now);
        if (values.json) io.stdout(JSON.stringify(status));
        else for (const line of statusLines(status, target)) io.stdout(line);
        return EXIT.ok;
      }),
  },
  'dead-letters': {
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
        const list = await listDeadLetters(target.sqs, target.deadLetterQueueUrl, filters, {
          showData: values['show-data'] === true,
          now: io.now,
          hideSeconds: hideSeconds(io),
        });
        if (values.json) {
          const { complete: _complete, ...json } = list;
          io.stdout(JSON.stringify(json));
        } else
          for (const line of deadLetterLines(
            list,
            values['show-data'] === true,
            target.local ? '--local' : `--env ${target.name}`,
          ))
            io.stdout(line);
        if (!list.complete)
          io.stderr(
            "The counts are partial: the queue is too large to read in one go, another read (or one that was stopped) still hides some dead letters for up to a minute, or a record has more dead letters than a read can show (the queue hands out a record's later dead letters only once its earlier ones are gone: a redrive moves them in turn).\n",
          );
        return EXIT.ok;
      });
    },
  },
  redrive: {
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
      const filters = checkFilters(values, io, 100);
      const rate = Number(values.rate);
      if (!/^\d+(\.\d+)?$/.test(String(values.rate)) || rate <= 0 || rate > 3000)
        throw new UsageError(
          '--rate must be a number of events a second, above 0 and at most 3000',
        );
      const from = typeof values.from === 'string' ? values.from : undefined;
      if (from !== undefined && !/^https?:\/\/\S+\/\d+\/[\w.-]+$/.test(from))
        throw new UsageError(
          '--from must be a queue URL, https://sqs.REGION.amazonaws.com/ACCOUNT/NAME',
        );
      return withTarget(values, io, async (target) => {
        if (from === target.eventsQueueUrl)
          throw new UsageError('--from names the events queue itself: nothing to move');
        const bar = progressBar(io);
        const keptReport = keptLines(io, values['dry-run'] === true);
        const result = await redriveDeadLetters(
          target.sqs,
          {
            deadLetterQueueUrl: from ?? target.deadLetterQueueUrl,
            eventsQueueUrl: target.eventsQueueUrl,
          },
          filters,
          {
            rate,
            dryRun: values['dry-run'] === true,
            hideSeconds: hideSeconds(io),
            waiting: (hidden) =>
              io.stderr(
                `${hidden} dead ${hidden === 1 ? 'letter is' : 'letters are'} hidden by an earlier read that did not finish; waiting up to ${hideSeconds(io)} s for ${hidden === 1 ? 'it' : 'them'} to come back…\n`,
              ),
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
        if (values.json) io.stdout(JSON.stringify({ matched, moved, left }));
        else
          io.stdout(
            redriveLine(result, {
              dryRun: values['dry-run'] === true,
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
        return values['dry-run'] || result.moved >= wanted ? EXIT.ok : EXIT.failed;
      });
    },
  },
  events: {
    ...EVENTS_COMMAND,
    run: (values, positionals, io) => {
      const query = parseEventsCommand(values, positionals, io.now());
      return withTarget(values, io, (target) => runEvents(target, query, values.json === true, io));
    },
  },
  senders: {
    usage: 'senders (list | add-secret | add-key | remove ID) (--env NAME | --local) [--json]',
    summary: 'list, add or remove the ingest credentials of senders',
    details: `Edits the ingest's sender credentials (the environment's webhook secret, or the local
stack's): list shows ids, kinds and creation times only; add-secret and add-key generate a new
Standard Webhooks secret or API key and print it once; remove ID stops accepting one (not the
last). Rotation: add-secret, give it to the sender, then remove the old id. Two edits at the
same moment both land: each is made on the version it read, and made again when another got in
first (exit 1 after 5 lost races, nothing changed).
${TARGET_HELP}`,
    options: targetOptions,
    positionals: 2,
    run: async (values, positionals, io) => {
      const [action, id] = positionals;
      if (
        action !== 'list' &&
        action !== 'add-secret' &&
        action !== 'add-key' &&
        action !== 'remove'
      )
        throw new UsageError('senders needs one of: list, add-secret, add-key, remove ID');
      if ((action === 'remove') !== (id !== undefined))
        throw new UsageError(
          action === 'remove'
            ? 'senders remove needs the ID to remove'
            : `senders ${action} takes no ID`,
        );
      return withTarget(values, io, async (target) => {
        const result = await senders(target, action, id, io.now);
        if (values.json) io.stdout(JSON.stringify(result));
        else for (const line of sendersLines(result, target)) io.stdout(line);
        return EXIT.ok;
      });
    },
  },
  sources: {
    usage:
      'sources (list | test NAME --payload FILE [--header "Name: value"]… | set-secret NAME [--add]) (--env NAME | --local) [--json]',
    summary: 'list the sources, test one on a payload, set one’s secret',
    details: `The sources (native webhooks, contract §6) of a deployed environment, as its ingest function
runs them (its document, ENTITIES and CONTACT_MATCH_FIELDS, read from the function's
configuration; stderr says when the sources in the cdk.json of this directory differ; the
caller needs cloudformation:DescribeStacks and lambda:GetFunctionConfiguration), or of the running
"npm start", as its SOURCES_FILE says now. Never prints a secret.
  list         each source's name, scheme, and whether it has a filter and an idempotencyKey
  test NAME    runs the source's filter, idempotencyKey and map on a payload, without signature
               or delivery, and checks the events as the ingest would; prints them, or the error
               a mapping_failed dead letter would hold (exit 1)
  set-secret NAME
               --env only: stores the source's secret (the provider's signing secret or API key)
               in Secrets Manager, read from SOURCE_SECRET or else stdin (typed without echo),
               never from the command line; the ingest uses it within 5 minutes. Locally the
               secret is in SOURCES_FILE.
${TARGET_HELP}
  --payload FILE  the webhook's body as the provider sends it (JSON)
  --header H      a request header the expressions read as $headers, 'Name: value' (repeatable)
  --add           set-secret: keep the secrets already there (rotation: the new one first)`,
    options: {
      ...targetOptions,
      payload: { type: 'string' },
      header: { type: 'string', multiple: true },
      add: { type: 'boolean', default: false },
    },
    positionals: 2,
    run: (values, positionals, io) => runSources(values, positionals, io),
  },
  credentials: {
    usage:
      'credentials --env NAME --base-url URL --client-id ID [--grant-type client_credentials|authorization_code]',
    summary: "store an environment's Mautic OAuth2 credential",
    details: `Stores the Mautic OAuth2 credential in the environment's client secret. The client secret
is read from MAUTIC_CLIENT_SECRET, else from stdin (typed without echo), never from the command
line. Needs the usual AWS environment (AWS_REGION or AWS_PROFILE, and credentials).`,
    options: {
      env: { type: 'string' },
      'base-url': { type: 'string' },
      'client-id': { type: 'string' },
      'grant-type': { type: 'string', default: 'client_credentials' },
    },
    positionals: 0,
    run: async (values, _, io) => {
      const env = checkEnvironment(values.env);
      if (!values['base-url'] || !values['client-id'])
        throw new UsageError('--base-url and --client-id are required');
      const clientSecret =
        io.env.MAUTIC_CLIENT_SECRET ?? (await io.readSecret('Mautic client secret: '));
      await awsCall(env, io, () =>
        storeCredentials(
          {
            env,
            baseUrl: String(values['base-url']),
            clientId: String(values['client-id']),
            clientSecret,
            grantType: String(values['grant-type']),
          },
          { secrets: new SecretsManagerClient({}), fetch, print: io.stdout, now: io.now },
        ),
      );
      return EXIT.ok;
    },
  },
  refresh: {
    usage: 'refresh (--env NAME | --local) [--json]',
    summary: 'run the token refresher now and wait for its result',
    details: `Asks the environment's token refresher for a refresh now (a synchronous invoke of the
stack's refresher, or the running "npm start"'s), waits for it and prints the result: whether it
refreshed and how long the access token is good for (never a token). Exits 1 if it failed.
${TARGET_HELP}`,
    options: targetOptions,
    positionals: 0,
    run: async (values, _, io) => {
      if (values.env !== undefined && values.local)
        throw new UsageError('Give --env NAME or --local, not both');
      if (values.env === undefined && !values.local)
        throw new UsageError('Which relay? Give --env NAME or --local');
      const result = values.local
        ? await refreshLocal(endpointsDir(io.env), fetch)
        : await awsCall(checkEnvironment(values.env), io, () =>
            refreshEnvironment(checkEnvironment(values.env), {
              cloudFormation: new CloudFormationClient({}),
              lambda: new LambdaClient({}),
            }),
          );
      const ok = printRefresh(result, {
        json: values.json === true,
        now: io.now(),
        print: io.stdout,
        authorize: `npx mautic-relay authorize ${values.local ? '--local' : `--env ${values.env}`}`,
      });
      return ok ? EXIT.ok : EXIT.failed;
    },
  },
  authorize: {
    usage: 'authorize (--env NAME | --local) [--port 8765] [--timeout SECONDS]',
    summary: 'authorize the relay with a Mautic user (authorization_code credentials)',
    details: `Prints Mautic's authorize URL, waits on http://127.0.0.1:PORT/callback for the code and
stores the tokens. Register that redirect URI on the Mautic credential. Needs the usual AWS
environment (AWS_REGION or AWS_PROFILE, and credentials); with --local, the running "npm start"
(whose embedded simulator registers the redirect URI of AUTHORIZE_PORT).
  --port N       the local port of the redirect URI (default 8765)
  --timeout S    how long to wait for the browser, in seconds (default 300)`,
    options: {
      env: { type: 'string' },
      local: { type: 'boolean', default: false },
      port: { type: 'string', default: '8765' },
      timeout: { type: 'string', default: '300' },
    },
    positionals: 0,
    run: async (values, _, io) => {
      if (values.env !== undefined && values.local)
        throw new UsageError('Give --env NAME or --local, not both');
      const port = wholeNumber(values.port, '--port', 1, 65_535);
      const timeout = wholeNumber(values.timeout, '--timeout', 1, 3600);
      if (values.local) {
        const target = localTarget(io.env);
        try {
          await authorize(
            { env: 'local', port, timeoutMs: timeout * 1000 },
            { secrets: target.secrets, fetch, print: io.stdout, now: io.now },
          );
        } finally {
          closeTarget(target);
        }
        return EXIT.ok;
      }
      const env = checkEnvironment(values.env);
      await awsCall(env, io, () =>
        authorize(
          { env, port, timeoutMs: timeout * 1000 },
          { secrets: new SecretsManagerClient({}), fetch, print: io.stdout, now: io.now },
        ),
      );
      return EXIT.ok;
    },
  },
  doctor: {
    usage: 'doctor --env NAME [--json]',
    summary: 'check that an environment can be deployed: account, quota, secrets, Mautic',
    details: `Checks what a deploy of environment NAME needs, before anything is created, in the
account and region cdk.json binds it to (run it in the project's directory): that cdk.json
names a real account, the one of the credentials here; that the account's Lambda concurrency
quota holds what the environment reserves (reservedConcurrency: 1 + maxConcurrency) and still
leaves Lambda's 100 unreserved; that the secrets' fixed names are free before the first deploy
(a teardown or a failed first deploy keeps them) and present after it; that Mautic's API
answers from this machine as Mautic does (401 or 403 with JSON, not a redirect, a 404 or a
5xx). Each failed check says what to do. Exits 1 when one failed. The caller needs
lambda:GetAccountSettings, lambda:GetFunctionConcurrency, secretsmanager:DescribeSecret,
cloudformation:DescribeStacks and cloudformation:ListStackResources.
  --env NAME   an environment of cdk.json
  --json       print one JSON document on stdout`,
    options: { env: { type: 'string' }, json: { type: 'boolean', default: false } },
    positionals: 0,
    run: async (values, _, io) => {
      const env = checkEnvironment(values.env);
      // Loaded here only: it reads cdk.json as the CDK app does, with the CDK library; STS
      // serves no other command.
      const doctor = await import('./doctor.ts');
      const { STSClient } = await import('@aws-sdk/client-sts');
      const settings = doctor.doctorSettings(env, process.cwd());
      const clients = {
        sts: new STSClient({ region: settings.region }),
        lambda: new LambdaClient({ region: settings.region }),
        secrets: new SecretsManagerClient({ region: settings.region }),
        cloudFormation: new CloudFormationClient({ region: settings.region }),
      };
      try {
        const checks = await awsCall(env, io, () =>
          doctor.runDoctor(settings, { ...clients, fetch }),
        );
        if (values.json) io.stdout(JSON.stringify({ environment: env, checks }));
        else for (const line of doctor.doctorLines(checks, settings)) io.stdout(line);
        return checks.every((check) => check.ok) ? EXIT.ok : EXIT.failed;
      } finally {
        for (const client of Object.values(clients)) client.destroy();
      }
    },
  },
  send: {
    usage:
      'send (--url URL | --local) [--secret whsec_... | --api-key KEY] [--id WEBHOOK_ID] [FILE]',
    summary: 'post events to an ingest URL, signed',
    details: `Posts FILE, or stdin, as it is to the ingest, signed with a Standard Webhooks secret or
with an API key; prints the answer. Exits 0 on a 2xx answer, else 1. Needs no AWS environment.
Any event shape of the contract: records, contacts named by "match", the integrator actions
(docs/recipes.md has worked examples).
  --url URL        the ingest URL, e.g. http://127.0.0.1:3000/events
  --local          the running "npm start"'s ingest URL
  --secret S       a whsec_ secret; better given as WEBHOOK_SECRET in the environment
  --api-key K      an API key; better given as INGEST_API_KEY in the environment
  --id ID          the webhook-id (default: random)`,
    options: {
      url: { type: 'string' },
      local: { type: 'boolean', default: false },
      secret: { type: 'string' },
      'api-key': { type: 'string' },
      id: { type: 'string' },
    },
    positionals: 1,
    run: async (values, positionals, io) => {
      if (values.local && values.url) throw new UsageError('Give --url or --local, not both');
      let url = values.url as string | undefined;
      if (values.local) {
        const target = localTarget(io.env);
        url = target.ingestUrl;
        closeTarget(target);
      }
      const result = await sendEvents(
        {
          url,
          secret: values.secret as string | undefined,
          apiKey: values['api-key'] as string | undefined,
          id: values.id as string | undefined,
          file: positionals[0],
          env: io.env,
        },
        { fetch, print: io.stdout, now: io.now, readStdin: io.readStdin },
      );
      return result.ok ? EXIT.ok : EXIT.failed;
    },
  },
};

function usage(): string {
  const width = Math.max(...Object.keys(COMMANDS).map((name) => name.length));
  return [
    'Usage: npx mautic-relay COMMAND [options]   (COMMAND --help for its options)',
    '',
    ...Object.entries(COMMANDS).map(([name, c]) => `  ${name.padEnd(width)}  ${c.summary}`),
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
    const about = rest[0] === undefined ? undefined : COMMANDS[rest[0]];
    io.stdout(about && rest[0] ? commandHelp(about) : usage());
    return EXIT.ok;
  }
  const command = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined;
  if (!command) {
    io.stderr(`Unknown command "${name}".\n${usage()}\n`);
    return EXIT.usage;
  }
  if (rest.includes('--help') || rest.includes('-h')) {
    io.stdout(commandHelp(command));
    return EXIT.ok;
  }
  try {
    let parsed: { values: Values; positionals: string[] };
    try {
      parsed = parseArgs({
        args: joinDashedValues(rest, command.options),
        options: command.options,
        allowPositionals: command.positionals > 0,
        strict: true,
      }) as { values: Values; positionals: string[] };
    } catch (error) {
      throw new UsageError(error instanceof Error ? error.message : String(error));
    }
    if (parsed.positionals.length > command.positionals)
      throw new UsageError(`Unexpected argument "${parsed.positionals[command.positionals]}"`);
    return await command.run(parsed.values, parsed.positionals, io);
  } catch (error) {
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

/** `sources list | test NAME | set-secret NAME`, checked before anything is read. */
async function runSources(values: Values, positionals: string[], io: CliIo): Promise<number> {
  const [action, name] = positionals;
  if (action !== 'list' && action !== 'test' && action !== 'set-secret')
    throw new UsageError('sources needs one of: list, test NAME, set-secret NAME');
  if ((action === 'list') !== (name === undefined))
    throw new UsageError(
      action === 'list'
        ? 'sources list takes no NAME'
        : `sources ${action} needs the source's NAME`,
    );
  if (action !== 'test' && (values.payload !== undefined || values.header !== undefined))
    throw new UsageError('--payload and --header are for sources test');
  if (action === 'test' && typeof values.payload !== 'string')
    throw new UsageError('sources test needs --payload FILE');
  if (values.add && action !== 'set-secret')
    throw new UsageError('--add is for sources set-secret');
  if (values.env !== undefined && values.local)
    throw new UsageError('Give --env NAME or --local, not both');
  if (values.env === undefined && !values.local)
    throw new UsageError('Which relay? Give --env NAME (cdk.json) or --local (npm start)');
  if (action === 'set-secret' && values.local)
    throw new UsageError(
      "Locally a source's secret is in SOURCES_FILE (verify.secret): edit it there, npm start reads it again",
    );
  const sources = values.local
    ? localSources(io.env)
    : await deployedSources(checkEnvironment(values.env), io);
  if (action === 'list') {
    const list = listSources(sources);
    if (values.json) io.stdout(JSON.stringify(list));
    else for (const line of sourcesListLines(list, sources.label)) io.stdout(line);
    return EXIT.ok;
  }
  const source = name as string;
  if (action === 'set-secret') return runSetSecret(values, source, sources, io);
  const headers = parseHeaders((values.header as string[] | undefined) ?? []);
  const { key, ...result } = await testSource(
    sources,
    source,
    readPayload(values.payload as string),
    headers,
  );
  if (values.json) io.stdout(JSON.stringify(result));
  else for (const line of sourceTestLines(source, { ...result, key })) io.stdout(line);
  return 'error' in result ? EXIT.failed : EXIT.ok;
}

async function runSetSecret(
  values: Values,
  name: string,
  sources: SourcesInUse,
  io: CliIo,
): Promise<number> {
  const environment = checkEnvironment(values.env);
  const secret = (
    io.env.SOURCE_SECRET ?? (await io.readSecret(`Secret of source "${name}": `))
  ).trim();
  if (secret === '')
    throw new UsageError('No secret given: set SOURCE_SECRET, or type it when asked');
  const secrets = new SecretsManagerClient({});
  try {
    const result = await awsCall(environment, io, () =>
      setSourceSecret({ environment, sources, secrets }, name, secret, values.add === true),
    );
    if (values.json) io.stdout(JSON.stringify(result));
    else
      io.stdout(
        `Stored ${result.secrets === 1 ? 'the secret' : `${result.secrets} secrets`} of source "${name}" in ${environment}; the ingest uses ${result.secrets === 1 ? 'it' : 'them'} within ${DEFAULTS.credentialsCacheSeconds / 60} minutes.`,
      );
    return EXIT.ok;
  } finally {
    secrets.destroy();
  }
}

/** `dead-letters discard`: deletes the matching dead letters for good. */
async function runDiscard(
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
    waiting: (hidden) =>
      io.stderr(
        `${hidden} dead ${hidden === 1 ? 'letter is' : 'letters are'} hidden by an earlier read that did not finish; waiting up to ${hideSeconds(io)} s for ${hidden === 1 ? 'it' : 'them'} to come back…\n`,
      ),
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

/** The --env NAME or --local of a command, checked; then the command on its target. */
async function withTarget(
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

/** A deployed environment's sources, as its ingest runs them; the notice, if any, on stderr. */
async function deployedSources(environment: string, io: CliIo): Promise<SourcesInUse> {
  const clients = { cloudFormation: new CloudFormationClient({}), lambda: new LambdaClient({}) };
  try {
    const sources = await awsCall(environment, io, () =>
      environmentSources(environment, clients, process.cwd()),
    );
    if (sources.notice !== undefined) io.stderr(`${sources.notice}\n`);
    return sources;
  } finally {
    clients.cloudFormation.destroy();
    clients.lambda.destroy();
  }
}

/** Runs AWS calls; an error the operator can fix becomes a SetupError naming the setting. */
async function awsCall<T>(
  environment: string,
  io: Pick<CliIo, 'env'>,
  call: () => Promise<T>,
): Promise<T> {
  try {
    return await call();
  } catch (error) {
    const explained = explainAwsError(error, {
      environment,
      local: environment === 'local',
      env: io.env,
    });
    if (explained) throw new SetupError(explained);
    throw error;
  }
}

function checkEnvironment(value: Values[string]): string {
  if (typeof value !== 'string' || value === '') throw new UsageError('--env NAME is required');
  secretNames(value);
  return value;
}

function checkFilters(values: Values, io: CliIo, defaultLimit: number): DeadLetterFilters {
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

/** How long a read hides dead letters: MAUTIC_RELAY_HIDE_SECONDS, for tests and huge queues. */
function hideSeconds(io: CliIo): number {
  const text = io.env.MAUTIC_RELAY_HIDE_SECONDS;
  return text === undefined
    ? DEFAULT_HIDE_SECONDS
    : wholeNumber(text, 'MAUTIC_RELAY_HIDE_SECONDS', 2, 43_200);
}

function wholeNumber(value: unknown, option: string, min: number, max: number): number {
  const number = Number(value);
  if (typeof value !== 'string' || !/^\d+$/.test(value) || number < min || number > max)
    throw new UsageError(`${option} must be a whole number from ${min} to ${max}`);
  return number;
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
      `  ${item.deadLetteredAt ?? '?'}  ${item.reason}${item.status === null ? '' : ` ${item.status}`}  ${item.entity ?? '?'} ${item.action ?? '?'}  ${item.eventId ?? '(no event id)'}${detail}`,
    );
    if (showData) lines.push(`      ${dataText(item)}`);
  }
  if (list.items.some((item) => item.eventId !== null))
    lines.push(`What became of each event: npx mautic-relay events show EVENT_ID ${target}`);
  return lines;
}

/** `--show-data`: the record id and data, or an action's own fields and the `match` it named. */
function dataText(item: DeadLetterList['items'][number]): string {
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
