import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CloudFormationClient, DescribeStacksCommand } from '@aws-sdk/client-cloudformation';
import { CloudWatchClient, GetMetricDataCommand } from '@aws-sdk/client-cloudwatch';
import { DynamoDBClient, GetItemCommand } from '@aws-sdk/client-dynamodb';
import {
  GetSecretValueCommand,
  PutSecretValueCommand,
  SecretsManagerClient,
} from '@aws-sdk/client-secrets-manager';
import {
  ChangeMessageVisibilityBatchCommand,
  DeleteMessageBatchCommand,
  GetQueueAttributesCommand,
  type Message,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import { mockClient } from 'aws-sdk-client-mock';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { DEAD_LETTER_REASONS } from '../../functions/core/dead-letter-reasons.ts';
import { type CliIo, runCli } from '../../infra/cli/cli.ts';
import { EXIT } from '../../infra/cli/errors.ts';

const cloudFormation = mockClient(CloudFormationClient);
const sqs = mockClient(SQSClient);
const secrets = mockClient(SecretsManagerClient);
const cloudwatch = mockClient(CloudWatchClient);
const dynamodb = mockClient(DynamoDBClient);
const NOW = Date.parse('2026-11-24T12:00:00.000Z');
const EVENTS = 'https://sqs.eu-west-1.amazonaws.com/123456789012/MauticRelay-dev-EventsQueue.fifo';
const DLQ = 'https://sqs.eu-west-1.amazonaws.com/123456789012/MauticRelay-dev-DeadLetterQueue.fifo';
const ACCESS_TOKEN = 'access-token-never-shown';
const REFRESH_TOKEN = 'refresh-token-never-shown';

const OUTPUTS = {
  IngestUrl: 'https://abc.execute-api.eu-west-1.amazonaws.com/events',
  EventsQueueUrl: EVENTS,
  DeadLetterQueueUrl: DLQ,
  TokenSecretName: 'MauticRelay/dev/token',
  WebhookSecretName: 'MauticRelay/dev/webhook',
  DashboardName: 'MauticRelay-dev',
  DedupTableName: 'MauticRelay-dev-DedupTable',
  RefreshFunctionName: 'MauticRelay-dev-Refresh',
};

function run(argv: string[], env: Record<string, string> = {}, extra: Partial<CliIo> = {}) {
  const out: string[] = [];
  let err = '';
  const io: CliIo = {
    stdout: (line) => out.push(line),
    stderr: (text) => {
      err += text;
    },
    env,
    progressBar: false,
    now: () => NOW,
    sleep: async () => {},
    interrupted: () => false,
    readStdin: async () => new Uint8Array(),
    readSecret: async () => '',
    ...extra,
  };
  return runCli(argv, io).then((code) => ({ code, out: out.join('\n'), err }));
}

function awsCalls(): number {
  return (
    cloudFormation.calls().length +
    sqs.calls().length +
    secrets.calls().length +
    cloudwatch.calls().length +
    dynamodb.calls().length
  );
}

function deployed() {
  cloudFormation.on(DescribeStacksCommand, { StackName: 'MauticRelay-dev' }).resolves({
    Stacks: [
      {
        StackName: 'MauticRelay-dev',
        CreationTime: new Date(),
        StackStatus: 'UPDATE_COMPLETE',
        Outputs: Object.entries(OUTPUTS).map(([OutputKey, OutputValue]) => ({
          OutputKey,
          OutputValue,
        })),
      },
    ],
  });
}

/** A dead letter as the batch function writes it. */
function deadLetter(n: number, extra: Partial<Record<string, string>> = {}): Message {
  const attributes: Record<string, { DataType: string; StringValue: string }> = {
    'relay.reason': { DataType: 'String', StringValue: extra.reason ?? 'mautic_rejected_item' },
    'relay.detail': { DataType: 'String', StringValue: 'Item was not found.' },
    'relay.status': { DataType: 'Number', StringValue: '404' },
    'relay.entity': { DataType: 'String', StringValue: extra.entity ?? 'contacts' },
    'relay.action': { DataType: 'String', StringValue: 'edit' },
    'relay.firstReceivedAt': { DataType: 'String', StringValue: '2026-11-24T10:00:00.000Z' },
    origin: { DataType: 'String', StringValue: 'crm' },
  };
  return {
    MessageId: `m${n}`,
    ReceiptHandle: `r${n}`,
    Body: JSON.stringify({
      eventId: `e${n}`,
      entity: extra.entity ?? 'contacts',
      action: 'edit',
      id: n,
      data: { firstname: `secret-name-${n}` },
      receivedAt: '2026-11-24T10:00:00.000Z',
    }),
    MessageAttributes: attributes,
    // Dead-lettered n minutes before NOW, in its record's message group.
    Attributes: {
      SentTimestamp: String(NOW - n * 60_000),
      ...(extra.group === undefined ? {} : { MessageGroupId: extra.group }),
    },
  };
}

function queue(url: string, visible: number, hidden = 0, delayed = 0) {
  sqs.on(GetQueueAttributesCommand, { QueueUrl: url }).resolves({
    Attributes: {
      ApproximateNumberOfMessages: String(visible),
      ApproximateNumberOfMessagesNotVisible: String(hidden),
      ApproximateNumberOfMessagesDelayed: String(delayed),
    },
  });
}

let dir: string;
beforeEach(() => {
  vi.stubEnv('AWS_REGION', 'eu-west-1');
  vi.stubEnv('AWS_CONFIG_FILE', '/nonexistent/config');
  vi.stubEnv('AWS_SHARED_CREDENTIALS_FILE', '/nonexistent/credentials');
  vi.stubEnv('AWS_PROFILE', undefined);
  vi.stubEnv('AWS_DEFAULT_REGION', undefined);
  dir = mkdtempSync(join(tmpdir(), 'relay-cli-'));
});

afterEach(() => {
  vi.unstubAllEnvs();
  vi.restoreAllMocks();
  cloudFormation.reset();
  sqs.reset();
  secrets.reset();
  cloudwatch.reset();
  dynamodb.reset();
  rmSync(dir, { recursive: true, force: true });
});

describe('the CLI itself', () => {
  it.each(['status', 'dead-letters', 'redrive', 'senders', 'credentials', 'authorize', 'send'])(
    '%s --help exits 0 with its options and the environment it needs',
    async (command) => {
      const { code, out } = await run([command, '--help', '--bogus']);
      expect(code).toBe(EXIT.ok);
      expect(out).toContain(`Usage: npx mautic-relay ${command}`);
      if (command !== 'send') expect(out).toMatch(/AWS_REGION or AWS_PROFILE/);
      expect(awsCalls()).toBe(0);
    },
  );

  it('lists the commands and exit codes on help, and on no command (exit 2)', async () => {
    const help = await run(['help']);
    expect(help.code).toBe(EXIT.ok);
    expect(help.out).toMatch(/status .*\n.*dead-letters/);
    expect(help.out).toContain('Exit codes: 0 done, 1 failed, 2 usage mistake, 3');
    const bare = await run([]);
    expect(bare.code).toBe(EXIT.usage);
    expect(bare.err).toContain('Usage: npx mautic-relay COMMAND');
  });

  it('lists every dead-letter reason under --reason, in the help of the commands that filter', async () => {
    for (const command of ['dead-letters', 'redrive']) {
      const { out } = await run([command, '--help']);
      for (const reason of DEAD_LETTER_REASONS) expect(out).toContain(reason);
    }
  });

  it('says so when the command is unknown', async () => {
    const { code, err } = await run(['statsu', '--env', 'dev']);
    expect(code).toBe(EXIT.usage);
    expect(err).toContain('Unknown command "statsu"');
    expect(awsCalls()).toBe(0);
  });

  it.each([
    [['status'], /--env NAME .*or --local/],
    [['status', '--env', 'dev', '--local'], /not both/],
    [['status', '--env', 'Dev'], /environment name must be lower-case/],
    [['status', '--env', 'dev', '--verbose'], /Unknown option '--verbose'/],
    [['dead-letters', '--env', 'dev', '--limit', 'ten'], /--limit must be a whole number/],
    [['dead-letters', '--env', 'dev', '--since', 'yesterday'], /--since must be like 90s/],
    [['dead-letters', '--env', 'dev', '--action', 'upsert'], /--action must be one of: create/],
    [['dead-letters', '--env', 'dev', '--entity', 'Contacts!'], /--entity must be/],
    [['dead-letters', '--env', 'dev', '--reason', 'Bad Reason'], /--reason must be/],
    // Our message, not node's parser's ("argument is ambiguous").
    [['dead-letters', '--env', 'dev', '--limit', '-5'], /^--limit must be a whole number from 1/],
    [['redrive', '--env', 'dev', '--limit', '-5'], /^--limit must be a whole number from 1/],
    [['redrive', '--env', 'dev', '--rate', '-1'], /^--rate must be a number of events a second/],
    // Only the documented reasons, named in the message.
    [
      ['dead-letters', '--env', 'dev', '--reason', 'mautic_rejected'],
      /--reason must be one of the dead-letter reasons: mautic_rejected_item, .*, invalid_event\n/,
    ],
    [['dead-letters', 'discard', '--env', 'dev', '--reason', 'timeout'], /retry_horizon_exceeded/],
    [['redrive', '--env', 'dev', '--reason', 'too-many-receives'], /too_many_receives/],
    [['redrive', '--env', 'dev', '--rate', '0'], /--rate must be/],
    [['redrive', '--env', 'dev', '--rate', 'fast'], /--rate must be/],
    [['senders', '--env', 'dev'], /senders needs one of/],
    [['senders', 'remove', '--env', 'dev'], /needs the ID/],
    [['senders', 'list', 'x', '--env', 'dev'], /takes no ID/],
    [['authorize', '--env', 'dev', '--port', 'abc'], /--port must be a whole number/],
    [['authorize', '--env', 'dev', '--timeout', '-1'], /timeout/],
    [['credentials', '--env', 'dev'], /--base-url and --client-id are required/],
    [['send', '--url', 'http://127.0.0.1:1/events', '--local'], /--url or --local/],
    [['send', 'a.json', 'b.json'], /Unexpected argument "b.json"/],
  ])('checks %j before any AWS call', async (argv, message) => {
    const { code, err } = await run(argv);
    expect(code).toBe(EXIT.usage);
    expect(err).toMatch(message);
    expect(err).toContain('--help');
    expect(awsCalls()).toBe(0);
  });
});

describe('AWS errors name the setting to fix', () => {
  it('no AWS_REGION in the project: the region cdk.json binds the environment to, as doctor reads it', async () => {
    vi.stubEnv('AWS_REGION', undefined);
    deployed();
    queue(EVENTS, 0);
    queue(DLQ, 0);
    secrets.on(GetSecretValueCommand).resolves({ SecretString: '{}' });
    cloudwatch.on(GetMetricDataCommand).resolves({ MetricDataResults: [] });
    const { code, out } = await run(['status', '--env', 'dev', '--json']);
    expect(code).toBe(EXIT.ok);
    // The shipped cdk.json binds dev to us-east-1.
    expect(JSON.parse(out).dashboardUrl).toMatch(
      /^https:\/\/us-east-1\.console\.aws\.amazon\.com\//,
    );
    expect(await cloudFormation.call(0).thisValue.config.region()).toBe('us-east-1');
  });

  it('an environment cdk.json does not name: unknown environment, before any AWS call', async () => {
    const { code, err } = await run(['status', '--env', 'nope']);
    expect(code).toBe(EXIT.usage);
    expect(err).toContain('Unknown environment "nope"; known environments: dev, prod');
    expect(awsCalls()).toBe(0);
  });

  it('outside the project (no cdk.json) and no region: AWS_REGION or AWS_PROFILE', async () => {
    vi.stubEnv('AWS_REGION', undefined);
    vi.spyOn(process, 'cwd').mockReturnValue(dir);
    deployed();
    const { code, err } = await run(['status', '--env', 'dev']);
    expect(code).toBe(EXIT.setup);
    expect(err).toContain('set AWS_REGION');
    expect(err).toContain('AWS_PROFILE');
  });

  it('no credentials: AWS_PROFILE or the access key variables', async () => {
    cloudFormation.on(DescribeStacksCommand).rejects(
      Object.assign(new Error('Could not load credentials from any providers'), {
        name: 'CredentialsProviderError',
      }),
    );
    const { code, err } = await run(['dead-letters', '--env', 'dev']);
    expect(code).toBe(EXIT.setup);
    expect(err).toMatch(/No AWS credentials.*AWS_PROFILE.*AWS_ACCESS_KEY_ID/);
  });

  it('expired credentials: log in again', async () => {
    cloudFormation.on(DescribeStacksCommand).rejects(
      Object.assign(new Error('The security token included in the request is expired'), {
        name: 'ExpiredToken',
      }),
    );
    const { code, err } = await run(['status', '--env', 'dev']);
    expect(code).toBe(EXIT.setup);
    expect(err).toContain('aws sso login');
  });

  it('stack not found: --env, AWS_REGION, and how to deploy it', async () => {
    cloudFormation.on(DescribeStacksCommand).rejects(
      Object.assign(new Error('Stack with id MauticRelay-dev does not exist'), {
        name: 'ValidationError',
      }),
    );
    const { code, err } = await run(['redrive', '--env', 'dev']);
    expect(code).toBe(EXIT.setup);
    expect(err).toContain('No stack MauticRelay-dev');
    expect(err).toContain('check --env');
    expect(err).toContain('npx cdk deploy -c env=dev');
  });

  it('a stack of an older version: redeploy', async () => {
    cloudFormation.on(DescribeStacksCommand).resolves({
      Stacks: [
        {
          StackName: 'MauticRelay-dev',
          CreationTime: new Date(),
          StackStatus: 'CREATE_COMPLETE',
          Outputs: [{ OutputKey: 'IngestUrl', OutputValue: OUTPUTS.IngestUrl }],
        },
      ],
    });
    const { code, err } = await run(['status', '--env', 'dev']);
    expect(code).toBe(EXIT.setup);
    expect(err).toContain('has no output EventsQueueUrl');
  });

  it('access denied: names the permission', async () => {
    deployed();
    sqs
      .on(GetQueueAttributesCommand)
      .rejects(
        Object.assign(
          new Error(
            'User: arn:aws:iam::1:user/ops is not authorized to perform: sqs:getqueueattributes',
          ),
          { name: 'AccessDenied' },
        ),
      );
    secrets.on(GetSecretValueCommand).resolves({ SecretString: '{}' });
    const { code, err } = await run(['status', '--env', 'dev']);
    expect(code).toBe(EXIT.setup);
    expect(err).toContain('sqs:getqueueattributes');
    expect(err).toContain('AWS_PROFILE');
  });

  it('no local stack: npm start or MAUTIC_RELAY_DIR', async () => {
    const { code, err } = await run(['status', '--local'], { MAUTIC_RELAY_DIR: dir });
    expect(code).toBe(EXIT.setup);
    expect(err).toContain('No local stack is running');
    expect(err).toContain('MAUTIC_RELAY_DIR');
  });

  it('a local stack whose process is gone counts as none', async () => {
    mkdirSync(join(dir, '.mautic-relay'));
    writeFileSync(
      join(dir, '.mautic-relay', 'local.json'),
      JSON.stringify({
        ingestUrl: 'http://127.0.0.1:1/events',
        sqsEndpoint: 'http://127.0.0.1:1',
        queueUrl: 'q',
        deadLetterQueueUrl: 'd',
        secretsEndpoint: 'http://127.0.0.1:1',
        tokenSecretId: 't',
        pid: 2 ** 22 + 7,
        startedAt: new Date().toISOString(),
      }),
    );
    const { code, err } = await run(['senders', 'list', '--local'], { MAUTIC_RELAY_DIR: dir });
    expect(code).toBe(EXIT.setup);
    expect(err).toContain('No local stack is running');
  });

  it('refresh --local: a refresh that needs a person names the authorize command with --local', async () => {
    // The running stack's control endpoint, answering as its refresher does.
    const control = createServer((_, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ action: 'failed', why: 'needs_authorize' }));
    });
    await new Promise<void>((resolve) => control.listen(0, '127.0.0.1', resolve));
    const { port } = control.address() as AddressInfo;
    mkdirSync(join(dir, '.mautic-relay'));
    writeFileSync(
      join(dir, '.mautic-relay', 'local.json'),
      JSON.stringify({
        ingestUrl: 'http://127.0.0.1:1/events',
        sqsEndpoint: 'http://127.0.0.1:1',
        queueUrl: 'q',
        deadLetterQueueUrl: 'd',
        secretsEndpoint: 'http://127.0.0.1:1',
        tokenSecretId: 't',
        controlUrl: `http://127.0.0.1:${port}`,
        pid: process.pid,
        startedAt: new Date().toISOString(),
      }),
    );
    try {
      const { code, out } = await run(['refresh', '--local'], { MAUTIC_RELAY_DIR: dir });
      expect(code).toBe(EXIT.failed);
      expect(out).toContain('(needs_authorize): run "npx mautic-relay authorize --local".');
    } finally {
      control.closeAllConnections();
      await new Promise((resolve) => control.close(resolve));
    }
  });

  it('an unexpected error exits 1 with the command named', async () => {
    deployed();
    sqs.on(GetQueueAttributesCommand).rejects(new Error('boom'));
    secrets.on(GetSecretValueCommand).resolves({ SecretString: '{}' });
    const { code, err } = await run(['status', '--env', 'dev']);
    expect(code).toBe(EXIT.failed);
    expect(err).toContain('status failed: Error: boom');
  });
});

describe('status --env', () => {
  it('reads the stack outputs, the queues, the token secret and CloudWatch, and never shows a token', async () => {
    deployed();
    queue(EVENTS, 12, 3, 1);
    queue(DLQ, 2, 1, 0);
    secrets.on(GetSecretValueCommand, { SecretId: OUTPUTS.TokenSecretName }).resolves({
      SecretString: JSON.stringify({
        accessToken: ACCESS_TOKEN,
        accessTokenExpiresAt: new Date(NOW + 3_000_000).toISOString(),
        refreshToken: REFRESH_TOKEN,
        refreshTokenExpiresAt: new Date(NOW + 86_400_000).toISOString(),
        obtainedWith: 'refresh_token',
        updatedAt: new Date(NOW - 600_000).toISOString(),
        mauticVersion: '5.1.1',
      }),
    });
    cloudwatch.on(GetMetricDataCommand).resolves({
      MetricDataResults: [{ Id: 'oldest', Values: [42.4, 10] }],
    });
    // Mautic's shared health, as the batch function keeps it in the de-duplication table.
    const open = {
      circuit: 'open',
      since: NOW - 120_000,
      nextProbeAt: NOW + 15_000,
      probeIntervalMs: 20_000,
      failures: [],
      lastFailure: { status: 503, message: 'POST /api/contacts/batch/new failed with status 503' },
      msPerItem: 12.345,
      usualMsPerItem: 10.01,
      slots: {},
    };
    dynamodb
      .on(GetItemCommand, {
        TableName: OUTPUTS.DedupTableName,
        Key: { id: { S: 'mautic#health' } },
      })
      .resolves({ Item: { state: { S: JSON.stringify(open) }, version: { N: '9' } } });

    const json = await run(['status', '--env', 'dev', '--json']);
    expect(json.code).toBe(EXIT.ok);
    expect(JSON.parse(json.out)).toEqual({
      ingestUrl: OUTPUTS.IngestUrl,
      queue: { visible: 12, inFlight: 3, delayed: 1, oldestAgeSeconds: 42 },
      deadLetters: { count: 3 },
      token: {
        accessTokenSecondsLeft: 3000,
        refreshTokenSecondsLeft: 86_400,
        updatedAt: new Date(NOW - 600_000).toISOString(),
        mauticVersion: '5.1.1',
      },
      dashboardUrl:
        // The region cdk.json binds dev to, whatever AWS_REGION says (eu-west-1 here).
        'https://us-east-1.console.aws.amazon.com/cloudwatch/home?region=us-east-1#dashboards/dashboard/MauticRelay-dev',
      mautic: {
        circuit: 'open',
        since: new Date(NOW - 120_000).toISOString(),
        nextProbeAt: new Date(NOW + 15_000).toISOString(),
        recentMsPerItem: 12.3,
        usualMsPerItem: 10,
        callsInFlightAllowed: null,
        lastFailure: 'POST /api/contacts/batch/new failed with status 503',
      },
    });
    const metricQuery = cloudwatch.commandCalls(GetMetricDataCommand)[0]?.args[0].input;
    expect(metricQuery?.MetricDataQueries?.[0]?.MetricStat?.Metric?.Dimensions).toEqual([
      { Name: 'QueueName', Value: 'MauticRelay-dev-EventsQueue.fifo' },
    ]);

    const human = await run(['status', '--env', 'dev']);
    expect(human.out).toContain('12 waiting, 3 in flight, 1 delayed; oldest 42 s');
    expect(human.out).toContain('access token:   50 min 0 s left');
    expect(human.out).toContain('Mautic version: 5.1.1');
    expect(human.out).toContain(
      `Mautic health:  circuit OPEN since ${new Date(NOW - 120_000).toISOString()}, next probe ${new Date(NOW + 15_000).toISOString()} (last failure: POST /api/contacts/batch/new failed with status 503); 12.3 ms per item recently (usual 10)`,
    );
    expect(human.out).toContain('dashboard:      https://us-east-1.console.aws.amazon.com');
    for (const shown of [json.out, human.out, json.err, human.err]) {
      expect(shown).not.toContain(ACCESS_TOKEN);
      expect(shown).not.toContain(REFRESH_TOKEN);
    }
  });

  it('answers null for what is not known: no tokens yet, no metric data', async () => {
    deployed();
    queue(EVENTS, 0);
    queue(DLQ, 0);
    secrets.on(GetSecretValueCommand).resolves({ SecretString: '{}' });
    cloudwatch.on(GetMetricDataCommand).resolves({ MetricDataResults: [{ Id: 'oldest' }] });
    dynamodb.on(GetItemCommand).resolves({});
    const { out } = await run(['status', '--env', 'dev', '--json']);
    expect(JSON.parse(out)).toMatchObject({
      queue: { oldestAgeSeconds: null },
      // No item: no batch has found Mautic failing, nor timed a call, since the table was made.
      mautic: { circuit: 'closed', since: null, recentMsPerItem: null, callsInFlightAllowed: null },
      token: {
        accessTokenSecondsLeft: null,
        refreshTokenSecondsLeft: null,
        updatedAt: null,
        mauticVersion: null,
      },
    });
  });
});

describe('dead-letters --env', () => {
  it('says the counts are partial when another read still hides some dead letters', async () => {
    deployed();
    queue(DLQ, 3, 10);
    sqs
      .on(ReceiveMessageCommand)
      .resolvesOnce({ Messages: [deadLetter(1), deadLetter(2), deadLetter(3)] })
      .resolves({ Messages: [] });
    sqs.on(ChangeMessageVisibilityBatchCommand).resolves({ Successful: [] });

    const { code, out, err } = await run(['dead-letters', '--env', 'dev', '--json']);

    expect(code).toBe(EXIT.ok);
    expect(JSON.parse(out).count).toBe(3);
    expect(err).toContain('The counts are partial');
    expect(err).toContain('still hides some dead letters');
  });

  it('counts past 10 per receive, lists newest first with reasons, hides contents, and makes every message visible again', async () => {
    deployed();
    queue(DLQ, 13);
    const letters = Array.from({ length: 13 }, (_, i) =>
      deadLetter(i + 1, i === 12 ? { reason: 'ambiguous_result', entity: 'companies' } : {}),
    );
    sqs
      .on(ReceiveMessageCommand)
      .resolvesOnce({ Messages: letters.slice(0, 10).reverse() })
      .resolvesOnce({ Messages: letters.slice(10) })
      .resolves({ Messages: [] });
    sqs.on(ChangeMessageVisibilityBatchCommand).resolves({ Successful: [] });

    const { code, out } = await run(['dead-letters', '--env', 'dev', '--json', '--limit', '5']);
    expect(code).toBe(EXIT.ok);
    const list = JSON.parse(out);
    expect(list.count).toBe(13);
    expect(list.byReason).toEqual({ mautic_rejected_item: 12, ambiguous_result: 1 });
    expect(list.items.map((item: { eventId: string }) => item.eventId)).toEqual([
      'e1',
      'e2',
      'e3',
      'e4',
      'e5',
    ]);
    expect(list.items[0]).toEqual({
      eventId: 'e1',
      entity: 'contacts',
      action: 'edit',
      reason: 'mautic_rejected_item',
      status: 404,
      detail: 'Item was not found.',
      firstReceivedAt: '2026-11-24T10:00:00.000Z',
      deadLetteredAt: new Date(NOW - 60_000).toISOString(),
    });
    expect(out).not.toContain('secret-name');

    const receive = sqs.commandCalls(ReceiveMessageCommand)[0]?.args[0].input;
    expect(receive?.VisibilityTimeout).toBeGreaterThan(0);
    const revealed = sqs
      .commandCalls(ChangeMessageVisibilityBatchCommand)
      .flatMap((call) => call.args[0].input.Entries ?? []);
    expect(revealed.map((entry) => entry.ReceiptHandle).sort()).toEqual(
      letters.map((letter) => letter.ReceiptHandle).sort(),
    );
    expect(revealed.every((entry) => entry.VisibilityTimeout === 0)).toBe(true);
    expect(sqs.commandCalls(DeleteMessageBatchCommand)).toHaveLength(0);
  });

  it('filters by reason, entity, action and age, and shows contents only with --show-data', async () => {
    deployed();
    queue(DLQ, 4);
    sqs
      .on(ReceiveMessageCommand)
      .resolvesOnce({
        Messages: [
          deadLetter(1),
          deadLetter(30, { entity: 'companies' }),
          deadLetter(200),
          deadLetter(2, { reason: 'ambiguous_result' }),
        ],
      })
      .resolves({ Messages: [] });
    sqs.on(ChangeMessageVisibilityBatchCommand).resolves({});

    const { out } = await run([
      'dead-letters',
      '--env',
      'dev',
      '--json',
      '--reason',
      'mautic_rejected_item',
      '--entity',
      'contacts',
      '--action',
      'edit',
      '--since',
      '2h',
      '--show-data',
    ]);
    const list = JSON.parse(out);
    expect(list.count).toBe(1);
    expect(list.items[0]).toMatchObject({
      eventId: 'e1',
      id: 1,
      data: { firstname: 'secret-name-1' },
    });
  });

  it("takes every action as --action, and shows an action's own fields and match only with --show-data", async () => {
    deployed();
    queue(DLQ, 2);
    const action = {
      ...deadLetter(1),
      Body: JSON.stringify({
        eventId: 'e-seg',
        entity: 'contacts',
        action: 'addToSegment',
        match: { email: 'secret-ann@example.com' },
        segmentId: 5,
        receivedAt: '2026-11-24T10:00:00.000Z',
      }),
      MessageAttributes: {
        'relay.reason': { DataType: 'String', StringValue: 'mautic_rejected_item' },
        'relay.detail': {
          DataType: 'String',
          StringValue: 'Mautic found no segment 5 (Item was not found.)',
        },
        'relay.status': { DataType: 'Number', StringValue: '404' },
        'relay.entity': { DataType: 'String', StringValue: 'contacts' },
        'relay.action': { DataType: 'String', StringValue: 'addToSegment' },
      },
    };
    sqs.on(ChangeMessageVisibilityBatchCommand).resolves({});
    const filtered = ['dead-letters', '--env', 'dev', '--action', 'addToSegment'];
    // Three reads of the queue, each finding the two letters, then nothing more.
    const letters = { Messages: [action, deadLetter(2)] };
    sqs
      .on(ReceiveMessageCommand)
      .resolvesOnce(letters)
      .resolvesOnce({ Messages: [] })
      .resolvesOnce(letters)
      .resolvesOnce({ Messages: [] })
      .resolvesOnce(letters)
      .resolves({ Messages: [] });

    const plain = await run([...filtered, '--json']);
    const shown = await run([...filtered, '--json', '--show-data']);
    const lines = await run([...filtered, '--show-data']);

    expect(JSON.parse(plain.out).items).toEqual([
      expect.objectContaining({ eventId: 'e-seg', action: 'addToSegment' }),
    ]);
    expect(plain.out).not.toContain('secret-ann');
    expect(plain.out).not.toContain('segmentId');
    expect(JSON.parse(shown.out).items[0]).toMatchObject({
      eventId: 'e-seg',
      id: null,
      match: { email: 'secret-ann@example.com' },
      segmentId: 5,
    });
    expect(lines.out).toContain(
      'id - match {"email":"secret-ann@example.com"} segmentId 5 data null',
    );
    expect(lines.out).toContain(
      'What became of each event: npx mautic-relay events show EVENT_ID --env dev',
    );
  });

  it('shows a message SQS moved itself as too_many_receives, and a body that is not an event', async () => {
    deployed();
    queue(DLQ, 2);
    sqs
      .on(ReceiveMessageCommand)
      .resolvesOnce({
        Messages: [
          {
            MessageId: 'bare',
            ReceiptHandle: 'rb',
            Body: JSON.stringify({ eventId: 'e9', entity: 'contacts', action: 'create' }),
            Attributes: { SentTimestamp: String(NOW) },
          },
          {
            MessageId: 'junk',
            ReceiptHandle: 'rj',
            Body: 'not json',
            MessageAttributes: {
              'relay.reason': { DataType: 'String', StringValue: 'invalid_event' },
              'relay.detail': { DataType: 'String', StringValue: '-' },
            },
            Attributes: { SentTimestamp: String(NOW - 1000) },
          },
        ],
      })
      .resolves({ Messages: [] });
    sqs.on(ChangeMessageVisibilityBatchCommand).resolves({});
    const { out } = await run(['dead-letters', '--env', 'dev']);
    expect(out).toContain('2 dead letters (too_many_receives 1, invalid_event 1):');
    expect(out).toContain('too_many_receives  contacts create  e9');
    expect(out).toContain('invalid_event  ? ?  (no event id)');
  });
});

describe('redrive --env', () => {
  function dlq(count: number) {
    deployed();
    queue(DLQ, count);
    // Three records; the first letter is from before the queues were FIFO, without a group.
    const letters = Array.from({ length: count }, (_, i) =>
      deadLetter(i + 1, i === 0 ? {} : { group: `record-${i % 3}` }),
    );
    const receive = sqs.on(ReceiveMessageCommand);
    for (let i = 0; i < count; i += 10)
      receive.resolvesOnce({ Messages: letters.slice(i, i + 10) });
    receive.resolves({ Messages: [] });
    sqs.on(ChangeMessageVisibilityBatchCommand).resolves({});
    return letters;
  }

  it('sends each to the events queue before deleting it, without the relay attributes', async () => {
    const letters = dlq(12);
    const order: string[] = [];
    sqs.on(SendMessageBatchCommand).callsFake((input) => {
      order.push(`send ${input.Entries.length}`);
      return { Successful: input.Entries.map((e: { Id: string }) => ({ Id: e.Id })) };
    });
    sqs.on(DeleteMessageBatchCommand).callsFake((input) => {
      order.push(`delete ${input.Entries.length}`);
      return { Successful: input.Entries.map((e: { Id: string }) => ({ Id: e.Id })) };
    });

    const { code, out } = await run(['redrive', '--env', 'dev', '--json']);
    expect(code).toBe(EXIT.ok);
    expect(JSON.parse(out)).toEqual({ matched: 12, moved: 12, left: 0 });
    // One letter of a record per call (three records here, and one letter without a group), each
    // call's letters deleted once sent.
    expect(order).toEqual([
      'send 4',
      'delete 4',
      'send 3',
      'delete 3',
      'send 3',
      'delete 3',
      'send 2',
      'delete 2',
    ]);
    const sent = sqs
      .commandCalls(SendMessageBatchCommand)
      .flatMap((c) => c.args[0].input.Entries ?? []);
    expect(sqs.commandCalls(SendMessageBatchCommand)[0]?.args[0].input.QueueUrl).toBe(EVENTS);
    expect(sent.map((e) => e.MessageBody)).toEqual(letters.map((l) => l.Body));
    expect(sent[0]?.MessageAttributes).toEqual({
      origin: { DataType: 'String', StringValue: 'crm' },
    });
    // Each back in its record's group, in the order read; one without a group gets its own.
    // Its deduplication id is its own message id: unique per dead letter.
    expect(sent.map((e) => [e.MessageGroupId, e.MessageDeduplicationId])).toEqual(
      letters.map((l) => [l.Attributes?.MessageGroupId ?? l.MessageId, l.MessageId]),
    );
    expect(sent[0]?.MessageGroupId).toBe('m1');
    expect(
      sqs.commandCalls(ReceiveMessageCommand)[0]?.args[0].input.MessageSystemAttributeNames,
    ).toContain('MessageGroupId');
    const deleted = sqs
      .commandCalls(DeleteMessageBatchCommand)
      .flatMap((c) => c.args[0].input.Entries ?? []);
    expect(sqs.commandCalls(DeleteMessageBatchCommand)[0]?.args[0].input.QueueUrl).toBe(DLQ);
    expect(deleted.map((e) => e.ReceiptHandle)).toEqual(letters.map((l) => l.ReceiptHandle));
  });

  it("moves none of a record's later letters past one SQS did not take", async () => {
    const letters = dlq(12);
    // The letter at index 2 (record-2) is refused; record-2's later letters are at 5, 8 and 11.
    const refused = letters[2]?.MessageId;
    sqs.on(SendMessageBatchCommand).callsFake((input) => {
      const entries = input.Entries as Array<{ Id: string; MessageDeduplicationId: string }>;
      return {
        Successful: entries
          .filter((e) => e.MessageDeduplicationId !== refused)
          .map((e) => ({ Id: e.Id })),
        Failed: entries
          .filter((e) => e.MessageDeduplicationId === refused)
          .map((e) => ({ Id: e.Id, Code: 'InternalError', SenderFault: false })),
      };
    });
    sqs.on(DeleteMessageBatchCommand).callsFake((input) => ({
      Successful: input.Entries.map((e: { Id: string }) => ({ Id: e.Id })),
    }));

    const { code, out } = await run(['redrive', '--env', 'dev', '--json']);

    // Letters left: the command ran and did not finish the job.
    expect(code).not.toBe(EXIT.ok);
    expect(JSON.parse(out)).toMatchObject({ matched: 12, moved: 8, left: 4 });
    const sent = sqs
      .commandCalls(SendMessageBatchCommand)
      .flatMap((c) => c.args[0].input.Entries ?? [])
      .map((e) => e.MessageDeduplicationId);
    for (const later of [5, 8, 11]) expect(sent).not.toContain(letters[later]?.MessageId);
  });

  it('on Ctrl-C stops after the batch in hand, says how to finish, and draws progress on a terminal', async () => {
    dlq(25);
    let sends = 0;
    sqs.on(SendMessageBatchCommand).callsFake((input) => {
      sends++;
      return { Successful: input.Entries.map((e: { Id: string }) => ({ Id: e.Id })) };
    });
    sqs.on(DeleteMessageBatchCommand).callsFake((input) => ({
      Successful: input.Entries.map((e: { Id: string }) => ({ Id: e.Id })),
    }));
    const { code, out, err } = await run(
      ['redrive', '--env', 'dev'],
      {},
      {
        progressBar: true,
        interrupted: () => sends >= 1,
      },
    );
    // The batch in hand, 10 letters of 3 records and one without a group: 3 calls, one letter
    // of a record each.
    expect(sends).toBe(3);
    expect(out).toContain('Moved 10 of 10 matching dead letters to the events queue; 0 left.');
    expect(out).toContain('Interrupted: run the same command again to finish.');
    expect(err).toContain('\r[########............] read 10/25, moved 10 of 10 matching');
    expect(code).toBe(EXIT.ok);
    // It read no further than the batch it moved, so it holds nothing back.
    expect(sqs.commandCalls(ChangeMessageVisibilityBatchCommand)).toHaveLength(0);
  });

  it('waits for dead letters an interrupted read still hides before it starts', async () => {
    deployed();
    let hidden = 3;
    sqs.on(GetQueueAttributesCommand).callsFake(() => ({
      Attributes: {
        ApproximateNumberOfMessages: String(3 - hidden),
        ApproximateNumberOfMessagesNotVisible: String(hidden),
        ApproximateNumberOfMessagesDelayed: '0',
      },
    }));
    sqs.on(ReceiveMessageCommand).resolves({ Messages: [] });
    const sleeps: number[] = [];
    const { err } = await run(
      ['redrive', '--env', 'dev', '--json'],
      {},
      {
        sleep: async (ms) => {
          sleeps.push(ms);
          hidden = Math.max(0, hidden - 1);
        },
      },
    );
    expect(err).toContain('3 dead letters are hidden by an earlier read that did not finish');
    expect(sleeps).toEqual([1000, 1000, 1000]);
  });

  it('keeps what it could not send, says how many are left and exits 1', async () => {
    dlq(3);
    sqs.on(SendMessageBatchCommand).resolves({
      Successful: [{ Id: '0', MessageId: 'x', MD5OfMessageBody: '' }],
      Failed: [
        { Id: '1', SenderFault: false, Code: 'InternalError' },
        { Id: '2', SenderFault: false, Code: 'InternalError' },
      ],
    });
    sqs.on(DeleteMessageBatchCommand).resolves({ Successful: [{ Id: '0' }] });
    const { code, out } = await run(['redrive', '--env', 'dev']);
    expect(code).toBe(EXIT.failed);
    expect(out).toContain('Moved 1 of 3 matching dead letters to the events queue; 2 left.');
    const deleted = sqs
      .commandCalls(DeleteMessageBatchCommand)
      .flatMap((c) => c.args[0].input.Entries ?? []);
    expect(deleted.map((e) => e.ReceiptHandle)).toEqual(['r1']);
  });

  it('says when dead letters were out of its reach, unless the limit was reached anyway', async () => {
    dlq(3);
    // The queue holds 5: two wait behind their records' earlier dead letters.
    queue(DLQ, 5);
    sqs.on(SendMessageBatchCommand).callsFake((input) => ({
      Successful: input.Entries.map((e: { Id: string }) => ({ Id: e.Id })),
    }));
    sqs.on(DeleteMessageBatchCommand).callsFake((input) => ({
      Successful: input.Entries.map((e: { Id: string }) => ({ Id: e.Id })),
    }));
    const some = await run(['redrive', '--env', 'dev', '--json']);
    expect(JSON.parse(some.out)).toEqual({ matched: 3, moved: 3, left: 0 });
    expect(some.code).toBe(EXIT.ok);
    expect(some.err).toContain('Not every dead letter could be read');

    sqs.reset();
    cloudFormation.reset();
    const letters = dlq(3);
    queue(DLQ, 5);
    // Another round reads again what the first left.
    sqs
      .on(ReceiveMessageCommand)
      .resolvesOnce({ Messages: letters })
      .resolvesOnce({ Messages: [] })
      .resolvesOnce({ Messages: letters.slice(2) })
      .resolves({ Messages: [] });
    sqs.on(SendMessageBatchCommand).callsFake((input) => ({
      Successful: input.Entries.map((e: { Id: string }) => ({ Id: e.Id })),
    }));
    sqs.on(DeleteMessageBatchCommand).callsFake((input) => ({
      Successful: input.Entries.map((e: { Id: string }) => ({ Id: e.Id })),
    }));
    const limited = await run(['redrive', '--env', 'dev', '--limit', '2', '--json']);
    expect(JSON.parse(limited.out)).toEqual({ matched: 3, moved: 2, left: 1 });
    expect(limited.err).toBe('');
  });

  it('redrives into a standard events queue (a stack not yet upgraded, drained before the upgrade) without FIFO ids', async () => {
    const standard = 'https://sqs.eu-west-1.amazonaws.com/123456789012/MauticRelay-dev-EventsQueue';
    dlq(2);
    cloudFormation.on(DescribeStacksCommand, { StackName: 'MauticRelay-dev' }).resolves({
      Stacks: [
        {
          StackName: 'MauticRelay-dev',
          CreationTime: new Date(),
          StackStatus: 'UPDATE_COMPLETE',
          Outputs: Object.entries({ ...OUTPUTS, EventsQueueUrl: standard }).map(
            ([OutputKey, OutputValue]) => ({ OutputKey, OutputValue }),
          ),
        },
      ],
    });
    sqs.on(SendMessageBatchCommand).callsFake((input) => ({
      Successful: input.Entries.map((e: { Id: string }) => ({ Id: e.Id })),
    }));
    sqs.on(DeleteMessageBatchCommand).callsFake((input) => ({
      Successful: input.Entries.map((e: { Id: string }) => ({ Id: e.Id })),
    }));
    const { code } = await run(['redrive', '--env', 'dev', '--json']);
    expect(code).toBe(EXIT.ok);
    const send = sqs.commandCalls(SendMessageBatchCommand)[0]?.args[0].input;
    expect(send?.QueueUrl).toBe(standard);
    for (const entry of send?.Entries ?? []) {
      expect(entry.MessageGroupId).toBeUndefined();
      expect(entry.MessageDeduplicationId).toBeUndefined();
    }
    expect(send?.Entries).toHaveLength(2);
  });

  it('--from moves from another queue (one an upgrade kept aside), but not from the events queue', async () => {
    const old = 'https://sqs.eu-west-1.amazonaws.com/123456789012/MauticRelay-dev-DeadLetterQueue';
    deployed();
    queue(old, 1);
    sqs
      .on(ReceiveMessageCommand, { QueueUrl: old })
      .resolvesOnce({ Messages: [deadLetter(1)] })
      .resolves({ Messages: [] });
    sqs.on(SendMessageBatchCommand).callsFake((input) => ({
      Successful: input.Entries.map((e: { Id: string }) => ({ Id: e.Id })),
    }));
    sqs.on(DeleteMessageBatchCommand).callsFake((input) => ({
      Successful: input.Entries.map((e: { Id: string }) => ({ Id: e.Id })),
    }));
    const moved = await run(['redrive', '--env', 'dev', '--from', old, '--json']);
    expect(moved.code).toBe(EXIT.ok);
    expect(JSON.parse(moved.out)).toEqual({ matched: 1, moved: 1, left: 0 });
    expect(sqs.commandCalls(SendMessageBatchCommand)[0]?.args[0].input).toMatchObject({
      QueueUrl: EVENTS,
      Entries: [{ MessageGroupId: 'm1', MessageDeduplicationId: 'm1' }],
    });
    expect(sqs.commandCalls(DeleteMessageBatchCommand)[0]?.args[0].input.QueueUrl).toBe(old);

    const itself = await run(['redrive', '--env', 'dev', '--from', EVENTS]);
    expect(itself.code).toBe(EXIT.usage);
    expect(itself.err).toContain('--from names the events queue itself');
    const calls = awsCalls();
    const junk = await run(['redrive', '--env', 'dev', '--from', 'MauticRelay-dev-Old']);
    expect(junk.code).toBe(EXIT.usage);
    expect(junk.err).toContain('--from must be a queue URL');
    expect(awsCalls()).toBe(calls);
  });

  it('leaves a letter written after it started (on SQS’s clock; a mock has none: the operator’s), counts it in left, says why, and exits 0', async () => {
    const setUp = () => {
      deployed();
      queue(DLQ, 3);
      // The third was sent a minute after NOW: while the redrive ran, say.
      const letters = [deadLetter(1, { group: 'a' }), deadLetter(2, { group: 'b' })];
      letters.push(deadLetter(-1, { group: 'c' }));
      sqs.on(ReceiveMessageCommand).resolvesOnce({ Messages: letters }).resolves({ Messages: [] });
      sqs.on(ChangeMessageVisibilityBatchCommand).resolves({});
      for (const command of [SendMessageBatchCommand, DeleteMessageBatchCommand] as const)
        sqs.on(command as typeof SendMessageBatchCommand).callsFake((input) => ({
          Successful: input.Entries.map((e: { Id: string }) => ({ Id: e.Id })),
        }));
    };
    setUp();
    const json = await run(['redrive', '--env', 'dev', '--json']);
    expect(json.code).toBe(EXIT.ok);
    expect(JSON.parse(json.out)).toEqual({ matched: 3, moved: 2, left: 1 });
    const sent = sqs
      .commandCalls(SendMessageBatchCommand)
      .flatMap((c) => c.args[0].input.Entries ?? [])
      .map((e) => e.MessageDeduplicationId);
    expect(sent.sort()).toEqual(['m1', 'm2']);

    sqs.reset();
    cloudFormation.reset();
    setUp();
    const human = await run(['redrive', '--env', 'dev']);
    expect(human.code).toBe(EXIT.ok);
    expect(human.out).toBe(
      'Moved 2 of 3 matching dead letters to the events queue; 1 left. 1 of them was written after the redrive started, or is a copy of an event it moved (it moves each event once): run it again for those.',
    );
  });

  it('--dry-run only counts, and --limit moves at most N', async () => {
    dlq(5);
    const dry = await run(['redrive', '--env', 'dev', '--dry-run', '--json']);
    expect(JSON.parse(dry.out)).toEqual({ matched: 5, moved: 0, left: 5 });
    expect(sqs.commandCalls(SendMessageBatchCommand)).toHaveLength(0);
    expect(sqs.commandCalls(DeleteMessageBatchCommand)).toHaveLength(0);

    sqs.reset();
    cloudFormation.reset();
    dlq(5);
    sqs.on(SendMessageBatchCommand).callsFake((input) => ({
      Successful: input.Entries.map((e: { Id: string }) => ({ Id: e.Id })),
    }));
    sqs.on(DeleteMessageBatchCommand).callsFake((input) => ({
      Successful: input.Entries.map((e: { Id: string }) => ({ Id: e.Id })),
    }));
    const limited = await run(['redrive', '--env', 'dev', '--limit', '2', '--json']);
    expect(limited.code).toBe(EXIT.ok);
    expect(JSON.parse(limited.out)).toEqual({ matched: 5, moved: 2, left: 3 });
  });
});

describe('dead-letters discard --env', () => {
  function dlq(letters: Message[]) {
    deployed();
    queue(DLQ, letters.length);
    sqs.on(ReceiveMessageCommand).resolvesOnce({ Messages: letters }).resolves({ Messages: [] });
    sqs.on(ChangeMessageVisibilityBatchCommand).resolves({});
    sqs.on(DeleteMessageBatchCommand).callsFake((input) => ({
      Successful: input.Entries.map((e: { Id: string }) => ({ Id: e.Id })),
    }));
  }

  it('--dry-run says how many --limit would discard, and deletes none', async () => {
    dlq([1, 2, 3, 4, 5].map((n) => deadLetter(n, { group: `r${n}` })));
    const { code, out } = await run([
      'dead-letters',
      'discard',
      '--env',
      'dev',
      '--dry-run',
      '--limit',
      '2',
    ]);
    expect(code).toBe(EXIT.ok);
    expect(out).toBe('2 of 5 matching dead letters would be discarded (dry run: none discarded).');
    expect(sqs.commandCalls(DeleteMessageBatchCommand)).toHaveLength(0);
  });

  it('leaves a letter written after it started, counted in left, and exits 0', async () => {
    dlq([deadLetter(1, { group: 'a' }), deadLetter(-1, { group: 'b' })]);
    const { code, out } = await run(['dead-letters', 'discard', '--env', 'dev']);
    expect(code).toBe(EXIT.ok);
    expect(out).toBe(
      'Discarded 1 of 2 matching dead letters; 1 left. 1 of them was written after it started (not looked at), and stays.',
    );
    const deleted = sqs
      .commandCalls(DeleteMessageBatchCommand)
      .flatMap((c) => c.args[0].input.Entries ?? []);
    expect(deleted.map((e) => e.ReceiptHandle)).toEqual(['r1']);
  });
});

describe('senders --env', () => {
  const SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
  const GENERATED = 'abcdefghijklmnopqrstuvwxyz012345';

  beforeEach(() => {
    deployed();
    let stored = JSON.stringify({ generatedSecret: GENERATED, webhookSecrets: [SECRET] });
    secrets
      .on(GetSecretValueCommand, { SecretId: OUTPUTS.WebhookSecretName })
      .callsFake(() => ({ SecretString: stored }));
    secrets.on(PutSecretValueCommand).callsFake((input) => {
      stored = input.SecretString;
      return {};
    });
  });

  it('lists ids, kinds and creation times only', async () => {
    const { code, out } = await run(['senders', 'list', '--env', 'dev', '--json']);
    expect(code).toBe(EXIT.ok);
    expect(JSON.parse(out)).toEqual({
      senders: [
        { id: 'generated', kind: 'webhook_secret', createdAt: null },
        { id: 'webhook-secret-1', kind: 'webhook_secret', createdAt: null },
      ],
    });
    expect(out).not.toContain(GENERATED);
    expect(out).not.toContain(SECRET);
  });

  it('adds a secret and a key, printing each once, then removes the old ones but not the last', async () => {
    const added = await run(['senders', 'add-secret', '--env', 'dev']);
    expect(added.code).toBe(EXIT.ok);
    const secret = added.out.match(/whsec_\S+/)?.[0] ?? '';
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(added.out).toContain('It is shown only now');
    const list = await run(['senders', 'list', '--env', 'dev']);
    expect(list.out).not.toContain(secret);
    expect(list.out).toContain(`created ${new Date(NOW).toISOString()}`);

    const key = JSON.parse((await run(['senders', 'add-key', '--env', 'dev', '--json'])).out);
    expect(key.added).toMatchObject({ kind: 'api_key', createdAt: new Date(NOW).toISOString() });
    expect(key.added.secret).toMatch(/^[A-Za-z0-9_-]{43}$/);

    expect((await run(['senders', 'remove', 'generated', '--env', 'dev'])).code).toBe(EXIT.ok);
    expect((await run(['senders', 'remove', 'webhook-secret-1', '--env', 'dev'])).code).toBe(
      EXIT.ok,
    );
    const stored = JSON.parse(
      String(secrets.commandCalls(PutSecretValueCommand).at(-1)?.args[0].input.SecretString),
    );
    expect(stored.generatedSecret).toBeUndefined();
    expect(stored.senders.map((s: { secret: string }) => s.secret)).toEqual([
      secret,
      key.added.secret,
    ]);

    const unknown = await run(['senders', 'remove', 'nope', '--env', 'dev']);
    expect(unknown.code).toBe(EXIT.usage);
    expect(unknown.err).toContain('No sender "nope"');
    await run(['senders', 'remove', key.added.id, '--env', 'dev']);
    const ids = JSON.parse((await run(['senders', 'list', '--env', 'dev', '--json'])).out).senders;
    const last = await run(['senders', 'remove', ids[0].id, '--env', 'dev']);
    expect(last.code).toBe(EXIT.usage);
    expect(last.err).toContain('last sender credential');
  });

  it('names the secret when it cannot be read, without quoting it', async () => {
    secrets.reset();
    secrets.on(GetSecretValueCommand).resolves({ SecretString: `{"webhookSecrets":"${SECRET}"}` });
    const { code, err } = await run(['senders', 'list', '--env', 'dev']);
    expect(code).toBe(EXIT.setup);
    expect(err).toContain('MauticRelay/dev/webhook');
    expect(err).not.toContain(SECRET);
  });
});
