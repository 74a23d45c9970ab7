/**
 * `redrive` of `mapping_failed` dead letters (contract §6) against fauxqs: the letters are kept
 * by the real ingest handler, the redrive runs as `npx mautic-relay redrive --local` does, with
 * the stack's SOURCES_FILE as it is now. Fixing the mapping and redriving delivers the payload's
 * events exactly as the endpoint would have queued them; a letter whose mapping still fails, or
 * whose source is gone, stays and is named; a payload the filter now refuses is deleted.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { CloudFormationClient, DescribeStacksCommand } from '@aws-sdk/client-cloudformation';
import { GetFunctionConfigurationCommand, LambdaClient } from '@aws-sdk/client-lambda';
import {
  DeleteMessageBatchCommand,
  type Message,
  SendMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { mockClient } from 'aws-sdk-client-mock';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SqsEventQueue } from '../../functions/adapters/sqs-event-queue.ts';
import { SqsSourceDeadLetters } from '../../functions/adapters/sqs-source-dead-letters.ts';
import { type CliIo, runCli } from '../../infra/cli/cli.ts';
import { EXIT } from '../../infra/cli/errors.ts';
import { endpointsPathIn, writeLocalEndpoints } from '../../infra/cli/local-endpoints.ts';
import { redriveDeadLetters } from '../../infra/cli/redrive-letters.ts';
import { sourceRemapper } from '../../infra/cli/source-letters.ts';
import { environmentSources, localSources } from '../../infra/cli/sources.ts';
import { createQueuePair } from '../../infra/local/queue-pair.ts';
import { NOW } from '../support/ingest.ts';
import {
  type LocalSqs,
  queueCounts,
  receiveUntil,
  sqsClient,
  startLocalSqs,
  uniqueQueueName,
} from '../support/local-sqs.ts';
import { recorder } from '../support/observe.ts';
import {
  STRIPE_SECRET,
  sourceEvent,
  sourcesHandler,
  stripeEvent,
  stripeHeaders,
  stripeSource,
} from '../support/sources.ts';

const STRIPE = 'stripe-customers';
/** What a payload holds that no output may show. */
const NAME = 'Zelda Quartermain';

/** The mapping that dead-letters: the customer's name where the email belongs. */
const BROKEN = stripeSource({
  map: "{ 'entity': 'contacts', 'action': 'create', 'data': { 'email': data.object.name } }",
});

let local: LocalSqs;
let dir: string;

beforeAll(async () => {
  local = await startLocalSqs();
  dir = mkdtempSync(join(tmpdir(), 'relay-redrive-sources-'));
});

afterAll(async () => {
  await local.stop();
  rmSync(dir, { recursive: true, force: true });
});

/**
 * A local stack as the CLI finds it: fresh FIFO queues, an endpoints file naming them and a
 * SOURCES_FILE; `post` sends a Stripe webhook through the real handler with the `BROKEN`
 * mapping, which keeps it as a dead letter on these queues.
 */
async function stack(name: string) {
  const pair = await createQueuePair(local.sqs, {
    name: uniqueQueueName('redrive-sources'),
    maxReceiveCount: 5,
    visibilityTimeoutSeconds: 30,
  });
  const home = join(dir, name);
  mkdirSync(home);
  const sourcesFile = join(home, 'sources.json');
  writeFileSync(sourcesFile, JSON.stringify({ sources: { [STRIPE]: BROKEN } }));
  writeLocalEndpoints(endpointsPathIn(home), {
    ingestUrl: 'http://127.0.0.1:3000/events',
    sqsEndpoint: local.endpoint,
    queueUrl: pair.queueUrl,
    deadLetterQueueUrl: pair.deadLetterQueueUrl,
    secretsEndpoint: 'http://127.0.0.1:1',
    tokenSecretId: 'MauticRelay/local/token',
    sourcesFile,
    entities: ['contacts'],
    contactMatchFields: ['email'],
    pid: process.pid,
    startedAt: new Date().toISOString(),
  });
  const handle = sourcesHandler({
    document: { sources: { [STRIPE]: BROKEN } },
    queue: new SqsEventQueue(local.sqs, pair.queueUrl),
    deadLetters: new SqsSourceDeadLetters(local.sqs, pair.deadLetterQueueUrl),
    logger: recorder().logger,
  });
  const post = async (id: string, type = 'customer.created') => {
    const payload = stripeEvent(id, type, `${id}@example.com`, { name: NAME });
    const answer = await handle(sourceEvent(STRIPE, payload, stripeHeaders(payload)));
    expect(answer.body).toEqual({ accepted: 0, eventIds: [], deadLettered: `${STRIPE}:${id}` });
    return payload;
  };
  const setSources = (sources: Record<string, unknown>) =>
    writeFileSync(sourcesFile, JSON.stringify({ sources }));
  return { pair, home, sourcesFile, post, setSources };
}

/** `npx mautic-relay ARGV` against the stack in `home`; no output shows a secret or the payload. */
async function cli(home: string, argv: string[]) {
  const out: string[] = [];
  let err = '';
  const io: CliIo = {
    stdout: (line) => out.push(line),
    stderr: (text) => {
      err += text;
    },
    env: { MAUTIC_RELAY_DIR: home, MAUTIC_RELAY_HIDE_SECONDS: '5' },
    progressBar: false,
    now: Date.now,
    sleep: (ms) => sleep(ms),
    interrupted: () => false,
    readStdin: async () => new Uint8Array(),
    readSecret: async () => {
      throw new Error('no prompt expected');
    },
  };
  const code = await runCli(argv, io);
  const output = `${out.join('\n')}\n${err}`;
  // No secret ever; no record contents unless asked for with --show-data (contract §4).
  const contents = argv.includes('--show-data')
    ? []
    : [NAME, NAME.split(' ')[1] as string, '@example.com'];
  for (const secret of [STRIPE_SECRET, ...contents]) expect(output).not.toContain(secret);
  return { code, out: out.join('\n'), err };
}

/** Every message in the queue, received and deleted. */
async function drain(sqs: SQSClient, queueUrl: string, count: number): Promise<Message[]> {
  const messages = await receiveUntil(sqs, queueUrl, count, { timeoutMs: 3_000 });
  if (messages.length > 0)
    await sqs.send(
      new DeleteMessageBatchCommand({
        QueueUrl: queueUrl,
        Entries: messages.map((message, i) => ({
          Id: String(i),
          ReceiptHandle: message.ReceiptHandle ?? '',
        })),
      }),
    );
  return messages;
}

/** What the endpoint queues for this payload with the fixed mapping: body, group, dedup id. */
async function queuedByTheEndpoint(payload: string): Promise<Message> {
  const pair = await createQueuePair(local.sqs, {
    name: uniqueQueueName('endpoint'),
    maxReceiveCount: 5,
    visibilityTimeoutSeconds: 30,
  });
  const handle = sourcesHandler({
    document: { sources: { [STRIPE]: stripeSource() } },
    queue: new SqsEventQueue(local.sqs, pair.queueUrl),
    deadLetters: new SqsSourceDeadLetters(local.sqs, pair.deadLetterQueueUrl),
    logger: recorder().logger,
  });
  const answer = await handle(sourceEvent(STRIPE, payload, stripeHeaders(payload)));
  expect(answer.body.accepted).toBe(1);
  const [message] = await drain(local.sqs, pair.queueUrl, 1);
  if (message === undefined) throw new Error('the endpoint queued nothing');
  return message;
}

const queued = (message: Message | undefined) => ({
  body: JSON.parse(message?.Body ?? '{}'),
  group: message?.Attributes?.MessageGroupId,
  deduplicationId: message?.Attributes?.MessageDeduplicationId,
});

describe('redrive of mapping_failed dead letters', () => {
  it('delivers a payload once its mapping is fixed, as the endpoint would have queued it, beside plain dead letters', async () => {
    const { pair, home, post, setSources } = await stack('fixed');
    const payload = await post('evt_40');
    await local.sqs.send(
      new SendMessageCommand({
        QueueUrl: pair.deadLetterQueueUrl,
        MessageBody: JSON.stringify({ eventId: 'plain-1', entity: 'contacts', action: 'edit' }),
        MessageAttributes: {
          'relay.reason': { DataType: 'String', StringValue: 'mautic_rejected_item' },
        },
        MessageGroupId: 'record-1',
        MessageDeduplicationId: 'plain-1',
      }),
    );
    setSources({ [STRIPE]: stripeSource() });

    const { code, out, err } = await cli(home, ['redrive', '--local', '--json']);

    expect(code).toBe(EXIT.ok);
    expect(err).toBe('');
    expect(JSON.parse(out)).toEqual({ matched: 2, moved: 2, left: 0 });
    const messages = await drain(local.sqs, pair.queueUrl, 2);
    const mapped = messages.find((message) => message.Body?.includes(`"source:${STRIPE}"`));
    expect(queued(mapped)).toEqual(queued(await queuedByTheEndpoint(payload)));
    expect(queued(mapped).body).toMatchObject({
      eventId: `${STRIPE}:evt_40:0`,
      receivedAt: new Date(NOW).toISOString(),
      data: { email: 'evt_40@example.com', firstname: NAME },
    });
    expect(messages.map((message) => JSON.parse(message.Body ?? '{}').eventId).sort()).toEqual([
      'plain-1',
      `${STRIPE}:evt_40:0`,
    ]);
    expect(await queueCounts(local.sqs, pair.deadLetterQueueUrl)).toEqual({
      visible: 0,
      inFlight: 0,
    });
  });

  it('shows a mapping_failed letter’s payload with --show-data, and only then', async () => {
    const { home, post } = await stack('shown');
    await post('evt_41');

    const hidden = await cli(home, ['dead-letters', '--local', '--json']);
    const shown = await cli(home, ['dead-letters', '--local', '--json', '--show-data']);

    expect(hidden.out).not.toContain('evt_41@example.com');
    // Where an event's entity and action would be: the source that kept it.
    expect(JSON.parse(hidden.out).items[0]).toMatchObject({ entity: null, source: STRIPE });
    const human = await cli(home, ['dead-letters', '--local']);
    expect(human.out).toContain(`mapping_failed  source ${STRIPE}  ${STRIPE}:evt_41`);
    expect(human.out).not.toContain('? ?');
    expect(JSON.parse(shown.out).items[0].data).toMatchObject({
      id: 'evt_41',
      data: { object: { email: 'evt_41@example.com' } },
    });
  });

  it('leaves a letter whose mapping still fails, naming the new error without the payload, and a dry run says so first', async () => {
    const { pair, home, post, setSources } = await stack('still-failing');
    const payload = await post('evt_41');
    setSources({ [STRIPE]: stripeSource({ map: '$number(data.object.name)' }) });

    const dry = await cli(home, ['redrive', '--local', '--dry-run']);
    const { code, out, err } = await cli(home, ['redrive', '--local', '--json']);

    const stays = `Dead letter ${STRIPE}:evt_41 stays: source "${STRIPE}": the mapping still fails: map: Unable to cast value to a number: "…" (D3030 at position 8)\n`;
    expect(dry.code).toBe(EXIT.ok);
    expect(dry.err).toBe(stays.replace('stays', 'would stay'));
    expect(dry.out).toBe(
      '0 of 1 matching dead letter would be moved (dry run: none moved); the 1 named above would stay.',
    );
    expect(code).toBe(EXIT.failed);
    expect(JSON.parse(out)).toEqual({ matched: 1, moved: 0, left: 1 });
    expect(err).toBe(stays);
    // The letter is as it was, its payload whole, for the next fix.
    const [letter] = await drain(local.sqs, pair.deadLetterQueueUrl, 1);
    expect(JSON.parse(letter?.Body ?? '{}')).toMatchObject({
      source: STRIPE,
      eventId: `${STRIPE}:evt_41`,
      body: JSON.parse(payload),
    });
    expect(letter?.MessageAttributes?.['relay.reason']?.StringValue).toBe('mapping_failed');
    expect(await queueCounts(local.sqs, pair.queueUrl)).toEqual({ visible: 0, inFlight: 0 });
  });

  it('names the ingest’s objection by its pointer when the new mapping yields an event it refuses', async () => {
    const { home, post, setSources } = await stack('refused');
    await post('evt_42');
    setSources({
      [STRIPE]: stripeSource({
        map: "{ 'entity': 'contacts', 'action': 'addPoints', 'match': { 'email': data.object.email } }",
      }),
    });

    const { code, err } = await cli(home, ['redrive', '--local']);

    expect(code).toBe(EXIT.failed);
    expect(err).toMatch(
      /^Dead letter stripe-customers:evt_42 stays: source "stripe-customers": the mapping still fails: map: yields an event the ingest refuses: .+ \(at \/0\/points\)\n$/,
    );
  });

  it('leaves a letter whose source is no longer configured, saying what to do', async () => {
    const { pair, home, sourcesFile, post, setSources } = await stack('removed');
    await post('evt_43');
    setSources({ other: stripeSource() });

    const { code, out, err } = await cli(home, ['redrive', '--local']);

    expect(code).toBe(EXIT.failed);
    expect(out).toBe('Moved 0 of 1 matching dead letter to the events queue; 1 left.');
    expect(err).toBe(
      `Dead letter ${STRIPE}:evt_43 stays: source "${STRIPE}" is not in the local stack (${sourcesFile}) any more: add it back and redrive again, or discard the letter (npx mautic-relay dead-letters discard)\n`,
    );
    expect(await queueCounts(local.sqs, pair.deadLetterQueueUrl)).toEqual({
      visible: 1,
      inFlight: 0,
    });
  });

  it('leaves every source letter, saying why, when SOURCES_FILE does not compile now', async () => {
    const { home, sourcesFile, post } = await stack('broken-file');
    await post('evt_44');
    writeFileSync(
      sourcesFile,
      JSON.stringify({ sources: { [STRIPE]: { ...BROKEN, map: '{ ,' } } }),
    );

    const { code, err } = await cli(home, ['redrive', '--local']);

    expect(code).toBe(EXIT.failed);
    expect(err).toContain(
      `Dead letter ${STRIPE}:evt_44 stays: source "${STRIPE}": the sources cannot be read: SOURCES_FILE ${sourcesFile}: Source "${STRIPE}": map does not compile`,
    );
  });

  it('deletes a letter its source now filters out, queueing nothing, and says so', async () => {
    const { pair, home, post, setSources } = await stack('filtered');
    await post('evt_45');
    setSources({ [STRIPE]: stripeSource({ filter: "type = 'customer.updated'" }) });

    const { code, out } = await cli(home, ['redrive', '--local']);

    expect(code).toBe(EXIT.ok);
    expect(out).toBe(
      "Moved 1 of 1 matching dead letter to the events queue (1 of them deleted with nothing to queue: their source's filter is false now, or its mapping yields no event); 0 left.",
    );
    expect(await queueCounts(local.sqs, pair.deadLetterQueueUrl)).toEqual({
      visible: 0,
      inFlight: 0,
    });
    expect(await queueCounts(local.sqs, pair.queueUrl)).toEqual({ visible: 0, inFlight: 0 });
  });

  it('loses nothing when killed between queueing the events and deleting the letter: a re-run finishes, the events queued once', async () => {
    const { pair, home, post, setSources } = await stack('interrupted');
    await post('evt_46');
    setSources({ [STRIPE]: stripeSource() });
    // A client that dies on its first delete from the dead-letter queue.
    const sqs = sqsClient(local.endpoint);
    const send = sqs.send.bind(sqs);
    let deletes = 0;
    sqs.send = ((command: Parameters<typeof send>[0], ...rest: []) => {
      if (command instanceof DeleteMessageBatchCommand && deletes++ === 0)
        return Promise.reject(new Error('killed'));
      return send(command, ...rest);
    }) as typeof sqs.send;
    const urls = { deadLetterQueueUrl: pair.deadLetterQueueUrl, eventsQueueUrl: pair.queueUrl };
    const redrive = () =>
      redriveDeadLetters(
        sqs,
        urls,
        { limit: 100 },
        {
          rate: 1000,
          dryRun: false,
          hideSeconds: 5,
          now: Date.now,
          sleep: (ms) => sleep(ms),
          shouldStop: () => false,
          progress: () => {},
          waiting: () => {},
          remap: sourceRemapper(() => localSources({ MAUTIC_RELAY_DIR: home })),
          kept: () => {
            throw new Error('nothing stays');
          },
        },
      );

    await expect(redrive()).rejects.toThrow('killed');
    const again = await redrive();
    sqs.destroy();

    expect(again).toMatchObject({ matched: 1, moved: 1, left: 0 });
    const events = await receiveUntil(local.sqs, pair.queueUrl, 2, { timeoutMs: 1_500 });
    expect(events.map((message) => JSON.parse(message.Body ?? '{}').eventId)).toEqual([
      `${STRIPE}:evt_46:0`,
    ]);
  });
});

describe('dead-letters discard', () => {
  it('deletes the matching letters for good (a source that is gone), after a dry run, and leaves the rest', async () => {
    const { pair, home, post } = await stack('discard');
    await post('evt_50');
    await post('evt_51');
    await local.sqs.send(
      new SendMessageCommand({
        QueueUrl: pair.deadLetterQueueUrl,
        MessageBody: JSON.stringify({ eventId: 'plain-2', entity: 'contacts', action: 'edit' }),
        MessageAttributes: {
          'relay.reason': { DataType: 'String', StringValue: 'no_match' },
        },
        MessageGroupId: 'record-2',
        MessageDeduplicationId: 'plain-2',
      }),
    );
    const argv = ['dead-letters', 'discard', '--reason', 'mapping_failed', '--local'];

    const dry = await cli(home, [...argv, '--dry-run']);
    const done = await cli(home, [...argv, '--json']);
    const after = await cli(home, ['dead-letters', '--local', '--json']);

    expect(dry).toMatchObject({
      code: EXIT.ok,
      out: '2 matching dead letters would be discarded (dry run: none discarded).',
    });
    expect(done.code).toBe(EXIT.ok);
    expect(JSON.parse(done.out)).toEqual({ matched: 2, discarded: 2, left: 0 });
    expect(JSON.parse(after.out)).toMatchObject({ count: 1, byReason: { no_match: 1 } });
  });

  it.each([
    [['dead-letters', 'purge', '--local'], 'dead-letters takes only "discard"'],
    [['dead-letters', '--dry-run', '--local'], '--dry-run is for dead-letters discard'],
    [['dead-letters', 'discard', '--show-data', '--local'], '--show-data is for the list'],
  ])('refuses %j as a usage mistake, exit 2', async (argv, message) => {
    const { code, err } = await cli(dir, argv);

    expect(code).toBe(EXIT.usage);
    expect(err).toContain(message);
  });
});

describe('the redrive’s mapper for a deployed environment', () => {
  it('maps with the document the deployed ingest runs with, which holds no secret', async () => {
    const { verify: _secret, ...definition } = stripeSource();
    const document = JSON.stringify({
      sources: { [STRIPE]: { ...definition, verify: { scheme: 'stripe' } } },
    });
    const clients = {
      cloudFormation: new CloudFormationClient({ region: 'eu-west-1' }),
      lambda: new LambdaClient({ region: 'eu-west-1' }),
    };
    mockClient(clients.cloudFormation)
      .on(DescribeStacksCommand)
      .resolves({
        Stacks: [
          {
            StackName: 'MauticRelay-dev',
            CreationTime: new Date(),
            StackStatus: 'UPDATE_COMPLETE',
            Outputs: [{ OutputKey: 'IngestFunctionName', OutputValue: 'MauticRelay-dev-Ingest' }],
          },
        ],
      });
    mockClient(clients.lambda)
      .on(GetFunctionConfigurationCommand)
      .resolves({
        Environment: {
          Variables: {
            EVENTS_QUEUE_URL: 'https://sqs.eu-west-1.amazonaws.com/1/events.fifo',
            DEAD_LETTER_QUEUE_URL: 'https://sqs.eu-west-1.amazonaws.com/1/dlq.fifo',
            INGEST_API_KEYS: 'k',
            DEDUP_WINDOW_SECONDS: '0',
            MAX_RECORD_EVENTS_PER_MINUTE: '0',
            SOURCES_DOCUMENT: document,
            SOURCES_SECRET_PREFIX: 'MauticRelay/dev/sources/',
          },
        },
      });
    // No cdk.json where it runs: nothing to compare with.
    const remap = sourceRemapper(() => environmentSources('dev', clients, dir));
    const letter = (type: string) =>
      JSON.stringify({
        v: 1,
        source: STRIPE,
        eventId: `${STRIPE}:evt_47`,
        receivedAt: new Date(NOW).toISOString(),
        headers: { 'content-type': 'application/json' },
        body: JSON.parse(stripeEvent('evt_47', type, 'ann@example.com')),
      });

    const created = await remap(letter('customer.created'));
    const ignored = await remap(letter('invoice.paid'));
    const unreadable = await remap('{"eventId":"x"}');

    expect(created.kind === 'events' && created.messages.map((m) => m.eventId)).toEqual([
      `${STRIPE}:evt_47:0`,
    ]);
    expect(ignored).toEqual({ kind: 'ignored' });
    expect(unreadable).toEqual({
      kind: 'kept',
      problem: 'it is not a source payload this version of the relay can read',
    });
  });
});
