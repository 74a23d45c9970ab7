import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Logger } from '@aws-lambda-powertools/logger';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { parseCredentials } from '../../functions/core/ingest/webhook-auth.ts';
import type { FetchLike } from '../../functions/core/ports.ts';
import { createIngestHandler } from '../../functions/ingest/handler.ts';
import { UsageError } from '../../infra/cli/errors.ts';
import { type SendDeps, sendEvents } from '../../infra/cli/send.ts';
import { type HttpFront, startHttpFront } from '../../infra/local/http-front.ts';
import {
  API_KEY,
  API_KEY_SENDER,
  contact,
  INGEST_LIMITS,
  type IngestBody,
  OTHER_SECRET,
  recordingQueue,
  WEBHOOK_SECRET,
  WEBHOOK_SENDER,
} from '../support/ingest.ts';
import { freePort } from '../support/net.ts';

const run = promisify(execFile);
/** Whatever the command prints or throws must never hold one of these. */
const CREDENTIALS = [WEBHOOK_SECRET, WEBHOOK_SECRET.slice('whsec_'.length), OTHER_SECRET, API_KEY];

let front: HttpFront;
let url: string;
let queue: ReturnType<typeof recordingQueue>;
let frontErrors: unknown[];
let directory: string;
let printed: string[];
/** The bodies as they left the command, byte for byte. */
let sent: Buffer[];
let deps: SendDeps;

beforeAll(async () => {
  directory = await mkdtemp(join(tmpdir(), 'mautic-relay-send-'));
  frontErrors = [];
  queue = recordingQueue();
  // The real ingest handler, on the real clock (the bin signs with Date.now), behind the local
  // API Gateway stand-in.
  const credentials = parseCredentials({ webhookSecrets: [WEBHOOK_SECRET], apiKeys: [API_KEY] });
  let n = 0;
  front = await startHttpFront({
    handler: createIngestHandler({
      credentials: async () => credentials,
      queue,
      clock: Date,
      newId: () => `generated-${++n}`,
      limits: INGEST_LIMITS,
      logger: new Logger({ serviceName: 'send-test', logLevel: 'SILENT' }),
    }),
    functionTimeoutMs: 10_000,
    onError: (error) => frontErrors.push(error),
  });
  url = `${front.url}/events`;
});

afterAll(async () => {
  await front.close();
  await rm(directory, { recursive: true, force: true });
});

beforeEach(() => {
  queue.messages.length = 0;
  printed = [];
  sent = [];
  const recordingFetch: FetchLike = async (target, init) => {
    sent.push(Buffer.from(init.body as Uint8Array));
    return fetch(target, init);
  };
  deps = {
    fetch: recordingFetch,
    print: (line) => printed.push(line),
    now: Date.now,
    readStdin: async () => {
      throw new Error('stdin was not expected to be read');
    },
  };
});

afterEach(() => {
  expect(frontErrors).toEqual([]);
  const output = printed.join('\n');
  for (const credential of CREDENTIALS) expect(output).not.toContain(credential);
});

async function bodyFile(name: string, content: string | Uint8Array): Promise<string> {
  const path = join(directory, name);
  await writeFile(path, content);
  return path;
}

/** The answer's JSON, from the lines after the status line. */
function answer(): IngestBody {
  return JSON.parse(printed.slice(1).join('\n')) as IngestBody;
}

/** What `sendEvents` threw, checked to be a UsageError that quotes no credential. */
async function usageError(promise: Promise<unknown>): Promise<string> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(UsageError);
  const message = (error as Error).message;
  for (const credential of CREDENTIALS) expect(message).not.toContain(credential);
  expect(message).not.toContain('\n');
  return message;
}

describe('sendEvents', () => {
  it('signs a file body with Standard Webhooks headers; the webhook-id prefixes the event ids', async () => {
    const file = await bodyFile('two.json', JSON.stringify([contact(1), contact(2)]));

    const result = await sendEvents({ url, secret: WEBHOOK_SECRET, id: 'msg_cli_1', file }, deps);

    expect(result).toEqual({ status: 202, ok: true });
    expect(printed[0]).toBe('202 Accepted');
    expect(answer()).toEqual({ accepted: 2, eventIds: ['msg_cli_1:0', 'msg_cli_1:1'] });
    expect(printed.slice(1).join('\n')).toBe(JSON.stringify(answer(), null, 2));
    expect(queue.messages.map((m) => m.eventId)).toEqual(['msg_cli_1:0', 'msg_cli_1:1']);
    expect(JSON.parse(queue.messages[1]?.body ?? '')).toMatchObject({
      sender: WEBHOOK_SENDER,
      data: { email: 'user2@example.com' },
    });
  });

  it('makes up a msg_ webhook-id and takes the first secret of WEBHOOK_SECRET', async () => {
    const file = await bodyFile('one.json', JSON.stringify(contact(3)));

    const result = await sendEvents(
      { url, file, env: { WEBHOOK_SECRET: `${WEBHOOK_SECRET},${OTHER_SECRET}` } },
      deps,
    );

    expect(result.ok).toBe(true);
    expect(queue.messages.map((m) => m.eventId)).toEqual([
      expect.stringMatching(/^msg_[A-Za-z0-9_-]{16}:0$/),
    ]);
  });

  it('sends with an API key from INGEST_API_KEY as a Bearer token, the body from stdin', async () => {
    const body = Buffer.from(JSON.stringify(contact(4)));
    deps.readStdin = async () => body;

    const result = await sendEvents({ url, env: { INGEST_API_KEY: API_KEY } }, deps);

    expect(result).toEqual({ status: 202, ok: true });
    expect(answer()).toEqual({ accepted: 1, eventIds: ['generated-1'] });
    expect(JSON.parse(queue.messages[0]?.body ?? '')).toMatchObject({ sender: API_KEY_SENDER });
    expect(sent).toEqual([body]);
  });

  it('prefers --api-key over a WEBHOOK_SECRET in the environment', async () => {
    const file = await bodyFile('key.json', JSON.stringify(contact(5)));

    const result = await sendEvents(
      { url, apiKey: API_KEY, file, env: { WEBHOOK_SECRET: OTHER_SECRET } },
      deps,
    );

    expect(result.status).toBe(202);
    expect(JSON.parse(queue.messages[0]?.body ?? '')).toMatchObject({ sender: API_KEY_SENDER });
  });

  it('reports a wrong secret as the 401 it gets, not ok, without printing the secret', async () => {
    const file = await bodyFile('wrong.json', JSON.stringify(contact(6)));

    const result = await sendEvents({ url, secret: OTHER_SECRET, file }, deps);

    expect(result).toEqual({ status: 401, ok: false });
    expect(printed[0]).toBe('401 Unauthorized');
    expect(answer().error?.code).toBe('unauthorized');
    expect(queue.messages).toEqual([]);
  });

  it('signs with the current time: a sender clock 10 minutes off gets 401', async () => {
    const file = await bodyFile('late.json', JSON.stringify(contact(7)));
    deps.now = () => Date.now() - 600_000;

    const result = await sendEvents({ url, secret: WEBHOOK_SECRET, file }, deps);

    expect(result).toEqual({ status: 401, ok: false });
  });

  it('sends the exact bytes of the file, non-ASCII and formatting included, and they verify', async () => {
    // Re-serialising would change every one of these: the BOM-less CRLF layout, the escaped and
    // literal non-ASCII, the key order and spacing, 1.0, and the trailing new line.
    const text =
      '[\r\n  {"action" : "create", "entity":"contacts",\r\n' +
      '   "data": {"email":"zoe@example.com", "firstname":"Zo\\u00eb 😀 東京", "points": 1.0}}\r\n]\n';
    const bytes = Buffer.from(text, 'utf8');
    const file = await bodyFile('unicode.json', bytes);

    const result = await sendEvents({ url, secret: WEBHOOK_SECRET, id: 'msg_unicode', file }, deps);

    expect(result).toEqual({ status: 202, ok: true });
    expect(sent).toHaveLength(1);
    expect(sent[0]?.equals(bytes)).toBe(true);
    expect(JSON.parse(queue.messages[0]?.body ?? '')).toMatchObject({
      eventId: 'msg_unicode:0',
      data: { email: 'zoe@example.com', firstname: 'Zoë 😀 東京', points: 1 },
    });
  });

  it('sends contacts named by match and the integrator actions as they are (contract §5)', async () => {
    const events = [
      { entity: 'contacts', action: 'create', data: { email: 'ann@example.com' } },
      {
        entity: 'contacts',
        action: 'addToSegment',
        match: { email: 'ann@example.com' },
        segmentId: 4,
      },
      { entity: 'contacts', action: 'addPoints', match: { email: 'ann@example.com' }, points: 10 },
      {
        entity: 'contacts',
        action: 'addDoNotContact',
        id: 7,
        channel: 'email',
        reason: 'unsubscribed',
        comments: 'unsubscribed in the shop',
      },
      { entity: 'contacts', action: 'delete', match: { email: 'bob@example.com' } },
    ];
    const file = await bodyFile('actions.json', JSON.stringify(events));

    const result = await sendEvents({ url, secret: WEBHOOK_SECRET, id: 'msg_actions', file }, deps);

    expect(result).toEqual({ status: 202, ok: true });
    expect(answer().accepted).toBe(events.length);
    expect(queue.messages.map((message) => JSON.parse(message.body))).toEqual(
      events.map((event, index) =>
        expect.objectContaining({ eventId: `msg_actions:${index}`, ...event }),
      ),
    );
  });

  it('prints the 422 of a match on a field the relay does not allow', async () => {
    const file = await bodyFile(
      'crm.json',
      JSON.stringify({ entity: 'contacts', action: 'delete', match: { crm_id: 'C-1' } }),
    );

    const result = await sendEvents({ url, secret: WEBHOOK_SECRET, file }, deps);

    expect(result).toEqual({ status: 422, ok: false });
    expect(answer().error?.details).toEqual([
      {
        index: 0,
        path: '/match/crm_id',
        message: 'is not a field contacts may be matched on (CONTACT_MATCH_FIELDS)',
      },
    ]);
    expect(queue.messages).toEqual([]);
  });

  it('prints a refusal as pretty JSON and is not ok', async () => {
    const file = await bodyFile('invalid.json', '{"entity":"contacts","action":"create"}');

    const result = await sendEvents({ url, secret: WEBHOOK_SECRET, file }, deps);

    expect(result).toEqual({ status: 422, ok: false });
    expect(printed[0]).toBe('422 Unprocessable Entity');
    expect(answer().error).toMatchObject({
      code: 'invalid_event',
      details: [{ index: 0, path: '/data' }],
    });
    expect(printed[1]).toBe(JSON.stringify(answer(), null, 2));
  });

  it('refuses to run without a credential, naming where one comes from', async () => {
    const file = await bodyFile('none.json', JSON.stringify(contact(8)));

    const message = await usageError(sendEvents({ url, file, env: {} }, deps));

    expect(message).toBe(
      'No credential: set WEBHOOK_SECRET or INGEST_API_KEY, or give --secret or --api-key',
    );
    expect(sent).toEqual([]);
  });

  it('refuses a malformed secret or key without quoting it', async () => {
    const file = await bodyFile('bad.json', JSON.stringify(contact(9)));
    const notASecret = WEBHOOK_SECRET.slice('whsec_'.length);

    expect(await usageError(sendEvents({ url, secret: notASecret, file }, deps))).toBe(
      'The webhook secret (--secret) must start with "whsec_"',
    );
    expect(
      await usageError(
        sendEvents({ url, file, env: { WEBHOOK_SECRET: `${WEBHOOK_SECRET}==` } }, deps),
      ),
    ).toContain('WEBHOOK_SECRET');
    expect(await usageError(sendEvents({ url, apiKey: 'short key', file }, deps))).toContain(
      'API key (--api-key) must be 16 to 256 printable characters',
    );
    expect(
      await usageError(sendEvents({ url, secret: WEBHOOK_SECRET, apiKey: API_KEY, file }, deps)),
    ).toBe('Give --secret or --api-key, not both');
    expect(sent).toEqual([]);
  });

  it('refuses a missing or bad URL, an unreadable file, an empty body and a bad webhook-id', async () => {
    const file = await bodyFile('fine.json', JSON.stringify(contact(10)));
    const missing = join(directory, 'missing.json');

    expect(
      await usageError(sendEvents({ url: undefined, secret: WEBHOOK_SECRET, file }, deps)),
    ).toBe('--url is required, e.g. --url http://127.0.0.1:3000/events');
    expect(await usageError(sendEvents({ url: 'nope', secret: WEBHOOK_SECRET, file }, deps))).toBe(
      '--url is not a URL, e.g. --url http://127.0.0.1:3000/events',
    );
    expect(await usageError(sendEvents({ url, secret: WEBHOOK_SECRET, file: missing }, deps))).toBe(
      `Cannot read ${missing}: no such file`,
    );
    expect(
      await usageError(sendEvents({ url, secret: WEBHOOK_SECRET, file: directory }, deps)),
    ).toBe(`Cannot read ${directory}: it is a directory`);
    deps.readStdin = async () => new Uint8Array();
    expect(await usageError(sendEvents({ url, secret: WEBHOOK_SECRET }, deps))).toBe(
      'Nothing to send: stdin is empty',
    );
    expect(
      await usageError(sendEvents({ url, secret: WEBHOOK_SECRET, id: 'msg.1', file }, deps)),
    ).toContain('--id must be');
    expect(sent).toEqual([]);
  });

  it('reports a refused connection in one line', async () => {
    const port = await freePort();
    const file = await bodyFile('refused.json', JSON.stringify(contact(11)));

    const message = await usageError(
      sendEvents({ url: `http://127.0.0.1:${port}/events`, secret: WEBHOOK_SECRET, file }, deps),
    );

    expect(message).toBe(
      `Could not send to http://127.0.0.1:${port}/events: connect ECONNREFUSED 127.0.0.1:${port}`,
    );
  });

  it('gives up on a server that does not answer within the timeout', async () => {
    // Takes the connection and never answers.
    const sockets = new Set<Socket>();
    const silent = createServer((socket) => {
      sockets.add(socket);
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = silent.address() as { port: number };
      const file = await bodyFile('slow.json', JSON.stringify(contact(12)));

      const message = await usageError(
        sendEvents(
          { url: `http://127.0.0.1:${port}/events`, secret: WEBHOOK_SECRET, file, timeoutMs: 300 },
          deps,
        ),
      );

      expect(message).toBe(
        `Could not send to http://127.0.0.1:${port}/events: no answer within 0.3 s`,
      );
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => silent.close(resolve));
    }
  });
});

describe('the mautic-relay send command', () => {
  /** The parent's environment without any credential of its own. */
  const environment = (extra: Record<string, string>) => {
    const env: NodeJS.ProcessEnv = { ...process.env, ...extra };
    for (const name of ['WEBHOOK_SECRET', 'INGEST_API_KEY', 'INGEST_API_KEYS'])
      if (!(name in extra)) delete env[name];
    return env;
  };

  /** Runs the bin with `stdin` piped in; resolves with its exit code and output. */
  async function bin(args: string[], env: NodeJS.ProcessEnv, stdin = '') {
    const pending = run('node', ['infra/cli/mautic-relay.ts', 'send', ...args], {
      env,
      timeout: 20_000,
    });
    pending.child.stdin?.end(stdin);
    return pending.then(
      ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
      (e: { code: number; stdout: string; stderr: string }) => ({
        code: e.code,
        stdout: e.stdout,
        stderr: e.stderr,
      }),
    );
  }

  it('posts the body from stdin signed with WEBHOOK_SECRET and exits 0', async () => {
    const body = JSON.stringify(contact(20));

    const result = await bin(
      ['--url', url, '--id', 'msg_bin'],
      environment({ WEBHOOK_SECRET: WEBHOOK_SECRET }),
      body,
    );

    expect(result).toMatchObject({ code: 0, stderr: '' });
    expect(result.stdout).toBe(
      `202 Accepted\n${JSON.stringify({ accepted: 1, eventIds: ['msg_bin:0'] }, null, 2)}\n`,
    );
    expect(queue.messages.map((m) => m.eventId)).toEqual(['msg_bin:0']);
  });

  it('exits 1 on a 401 and prints neither secret', async () => {
    const result = await bin(
      ['--url', url],
      environment({ WEBHOOK_SECRET: OTHER_SECRET }),
      JSON.stringify(contact(21)),
    );

    expect(result.code).toBe(1);
    expect(result.stdout).toMatch(/^401 Unauthorized\n/);
    for (const credential of CREDENTIALS) {
      expect(result.stdout).not.toContain(credential);
      expect(result.stderr).not.toContain(credential);
    }
  });

  it('exits 2 (a usage mistake) naming the settings when there is no credential', async () => {
    const result = await bin(['--url', url], environment({}), JSON.stringify(contact(22)));

    expect(result).toEqual({
      code: 2,
      stdout: '',
      stderr:
        'No credential: set WEBHOOK_SECRET or INGEST_API_KEY, or give --secret or --api-key\nSee: npx mautic-relay send --help\n',
    });
  });
});
