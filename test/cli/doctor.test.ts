import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  CloudFormationClient,
  CloudFormationServiceException,
  DescribeStacksCommand,
  ListStackResourcesCommand,
  type StackStatus,
} from '@aws-sdk/client-cloudformation';
import {
  GetAccountSettingsCommand,
  GetEventSourceMappingCommand,
  GetFunctionConcurrencyCommand,
  LambdaClient,
} from '@aws-sdk/client-lambda';
import {
  DescribeSecretCommand,
  GetSecretValueCommand,
  ResourceNotFoundException,
  SecretsManagerClient,
} from '@aws-sdk/client-secrets-manager';
import { ListSubscriptionsByTopicCommand, SNSClient } from '@aws-sdk/client-sns';
import { GetQueueAttributesCommand, SQSClient } from '@aws-sdk/client-sqs';
import { GetCallerIdentityCommand, STSClient } from '@aws-sdk/client-sts';
import { mockClient } from 'aws-sdk-client-mock';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { environmentSettings, type RelaySettings } from '../../infra/aws/environments.ts';
import { type CliIo, runCli } from '../../infra/cli/cli.ts';
import { runDoctor } from '../../infra/cli/doctor.ts';
import type { DoctorDeps } from '../../infra/cli/doctor-types.ts';
import { EXIT } from '../../infra/cli/errors.ts';
import { environments } from '../infra/synth.ts';

const cloudFormation = mockClient(CloudFormationClient);
const lambda = mockClient(LambdaClient);
const secrets = mockClient(SecretsManagerClient);
const sts = mockClient(STSClient);
const sqs = mockClient(SQSClient);
const sns = mockClient(SNSClient);

/** Mautic on 127.0.0.1: answers the API call as `answer` says. */
let answer: (response: import('node:http').ServerResponse) => void = () => {};
let mautic: Server;
let mauticUrl = '';
/** A port nothing listens on. */
let closedPort = 0;

beforeAll(async () => {
  mautic = createServer((request, response) => {
    if (!request.url?.startsWith('/api/contacts')) response.writeHead(404).end();
    else answer(response);
  });
  await new Promise<void>((resolve) => mautic.listen(0, '127.0.0.1', resolve));
  mauticUrl = `http://127.0.0.1:${(mautic.address() as AddressInfo).port}`;
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  closedPort = (probe.address() as AddressInfo).port;
  await new Promise((resolve) => probe.close(resolve));
});

afterAll(async () => {
  await new Promise((resolve) => mautic.close(resolve));
});

/** The account cdk.json binds the tests' environments to. */
const ACCOUNT = '111122223333';

beforeEach(() => {
  // Credentials of the bound account, unless a test says otherwise.
  sts.on(GetCallerIdentityCommand).resolves({ Account: ACCOUNT });
});

afterEach(() => {
  cloudFormation.reset();
  lambda.reset();
  secrets.reset();
  sts.reset();
  sqs.reset();
  sns.reset();
  vi.restoreAllMocks();
});

const unauthorized = (response: import('node:http').ServerResponse) =>
  response
    .writeHead(401, { 'content-type': 'application/json' })
    .end('{"errors":[{"message":"API authorization denied.","code":401,"type":"access_denied"}]}');

/** prod's settings, bound to a real account, with Mautic at `baseUrl`. */
function settings(overrides: Record<string, unknown> = {}, baseUrl = mauticUrl): RelaySettings {
  const checked = environmentSettings('prod', {
    prod: {
      ...environments.prod,
      account: ACCOUNT,
      region: 'eu-west-1',
      mauticBaseUrl: 'https://mautic.acme.test',
      alarmEmail: '',
      ...overrides,
    },
  });
  // The local Mautic speaks http; cdk.json takes only https.
  return { ...checked, mauticBaseUrl: baseUrl };
}

const deps = (): DoctorDeps => ({
  sts: new STSClient({ region: 'eu-west-1' }),
  lambda: new LambdaClient({ region: 'eu-west-1' }),
  secrets: new SecretsManagerClient({ region: 'eu-west-1' }),
  cloudFormation: new CloudFormationClient({ region: 'eu-west-1' }),
  sqs: new SQSClient({ region: 'eu-west-1' }),
  sns: new SNSClient({ region: 'eu-west-1' }),
  fetch,
  env: {},
  now: () => NOW,
});

const NOW = Date.parse('2026-11-28T12:00:00.000Z');

const noStack = () =>
  cloudFormation.on(DescribeStacksCommand).rejects(
    new CloudFormationServiceException({
      name: 'ValidationError',
      message: 'Stack with id MauticRelay-prod does not exist',
      $fault: 'client',
      $metadata: {},
    }),
  );
/** The stack, deployed (`status`) with the functions of `functions` among its resources. */
const deployedStack = (
  status: StackStatus = 'UPDATE_COMPLETE',
  functions = ['MauticRelay-prod-Refresh', 'MauticRelay-prod-Batch'],
) => {
  cloudFormation.on(DescribeStacksCommand).resolves({
    Stacks: [{ StackName: 'MauticRelay-prod', CreationTime: new Date(), StackStatus: status }],
  });
  cloudFormation.on(ListStackResourcesCommand).resolves({
    StackResourceSummaries: [
      ...functions.map((name, i) => ({
        LogicalResourceId: `Function${i}`,
        PhysicalResourceId: name,
        ResourceType: 'AWS::Lambda::Function',
        ResourceStatus: 'UPDATE_COMPLETE' as const,
        LastUpdatedTimestamp: new Date(),
      })),
      {
        LogicalResourceId: 'EventsQueue',
        PhysicalResourceId: 'https://sqs.eu-west-1.amazonaws.com/111122223333/events.fifo',
        ResourceType: 'AWS::SQS::Queue',
        ResourceStatus: 'CREATE_COMPLETE' as const,
        LastUpdatedTimestamp: new Date(),
      },
    ],
  });
};
/** The account and region bootstrapped for the CDK, at `version`. */
const bootstrapped = (version = '30', status: StackStatus = 'UPDATE_COMPLETE') =>
  cloudFormation.on(DescribeStacksCommand, { StackName: 'CDKToolkit' }).resolves({
    Stacks: [
      {
        StackName: 'CDKToolkit',
        CreationTime: new Date(),
        StackStatus: status,
        Outputs: [{ OutputKey: 'BootstrapVersion', OutputValue: version }],
      },
    ],
  });
const quota = (limit: number, unreserved = limit) =>
  lambda.on(GetAccountSettingsCommand).resolves({
    AccountLimit: { ConcurrentExecutions: limit, UnreservedConcurrentExecutions: unreserved },
  });
const noSecrets = () =>
  secrets
    .on(DescribeSecretCommand)
    .rejects(new ResourceNotFoundException({ message: 'not found', $metadata: {} }));

const byCheck = (checks: Awaited<ReturnType<typeof runDoctor>>) =>
  Object.fromEntries(checks.map((check) => [check.check, check]));

describe('doctor: the concurrency quota', () => {
  it('fails a first deploy that would reserve past what a new account allows, saying what to do', async () => {
    noStack();
    quota(50);
    noSecrets();
    answer = unauthorized;

    const checks = byCheck(await runDoctor(settings({ reservedConcurrency: true }), deps()));

    expect(checks.concurrency).toEqual({
      check: 'concurrency',
      ok: false,
      detail: expect.stringContaining(
        'would leave 47 unreserved of the account\'s 50; Lambda keeps 100, so the deploy would fail and roll back. Set "reservedConcurrency": false for prod in cdk.json, or ask AWS for a higher quota (Service Quotas, AWS Lambda, "Concurrent executions": at least 103)',
      ),
    });
    expect(checks.binding?.ok).toBe(true);
    expect(checks.secrets?.ok).toBe(true);
  });

  it('passes the same account without reservations, and an account with room for them', async () => {
    noStack();
    noSecrets();
    answer = unauthorized;
    quota(50);
    const unreserved = byCheck(await runDoctor(settings({ reservedConcurrency: false }), deps()));
    lambda.reset();
    quota(1000);
    const roomy = byCheck(await runDoctor(settings({ reservedConcurrency: true }), deps()));

    expect(unreserved.concurrency).toMatchObject({ ok: true, detail: /reserves none/ });
    expect(roomy.concurrency).toMatchObject({
      ok: true,
      detail: "reserves 3 of the account's 1000, leaving 997 unreserved (Lambda keeps 100).",
    });
  });

  it('counts back what a deployed stack’s functions already reserve, found among its resources', async () => {
    // A stack of an earlier version: no BatchFunctionName output, its functions all the same.
    deployedStack();
    // 103 in all, 3 reserved by this stack's functions: exactly enough.
    quota(103, 100);
    lambda
      .on(GetFunctionConcurrencyCommand, { FunctionName: 'MauticRelay-prod-Refresh' })
      .resolves({ ReservedConcurrentExecutions: 1 })
      .on(GetFunctionConcurrencyCommand, { FunctionName: 'MauticRelay-prod-Batch' })
      .resolves({ ReservedConcurrentExecutions: 2 });
    secrets.on(DescribeSecretCommand).resolves({ Name: 'x' });
    answer = unauthorized;

    const checks = byCheck(await runDoctor(settings({ reservedConcurrency: true }), deps()));

    expect(checks.concurrency).toMatchObject({ ok: true, detail: /leaving 100 unreserved/ });
    expect(checks.secrets).toMatchObject({ ok: true, detail: "the stack's 3 secrets are there." });
    expect(cloudFormation.commandCalls(ListStackResourcesCommand)[0]?.args[0].input).toEqual({
      StackName: 'MauticRelay-prod',
    });
  });

  it('counts back nothing for a stack whose first deploy rolled back: its functions are gone', async () => {
    deployedStack('ROLLBACK_COMPLETE');
    quota(103, 100);
    noSecrets();
    answer = unauthorized;

    const checks = byCheck(await runDoctor(settings({ reservedConcurrency: true }), deps()));

    expect(checks.concurrency).toMatchObject({ ok: false, detail: /would leave 97 unreserved/ });
    expect(lambda.commandCalls(GetFunctionConcurrencyCommand)).toHaveLength(0);
  });

  it('fails an account whose whole quota is below maxConcurrency and the refresher', async () => {
    noStack();
    quota(2);
    noSecrets();
    answer = unauthorized;

    const checks = byCheck(await runDoctor(settings({ reservedConcurrency: false }), deps()));

    expect(checks.concurrency).toMatchObject({ ok: false, detail: /quota of 2 .*below/ });
  });
});

describe('doctor: the secrets', () => {
  it('fails a first deploy whose fixed secret names are taken, or scheduled for deletion', async () => {
    noStack();
    quota(1000);
    answer = unauthorized;
    noSecrets();
    secrets
      .on(DescribeSecretCommand, { SecretId: 'MauticRelay/prod/webhook' })
      .resolves({ Name: 'MauticRelay/prod/webhook' })
      .on(DescribeSecretCommand, { SecretId: 'MauticRelay/prod/client' })
      .resolves({ Name: 'MauticRelay/prod/client', DeletedDate: new Date() });

    const { detail, ok } = byCheck(await runDoctor(settings(), deps())).secrets ?? {};

    expect(ok).toBe(false);
    expect(detail).toContain(
      'MauticRelay/prod/client is scheduled for deletion, which keeps its name taken: restore it, or delete it for good (aws secretsmanager delete-secret --force-delete-without-recovery --secret-id MauticRelay/prod/client)',
    );
    expect(detail).toContain(
      'MauticRelay/prod/webhook exists, kept from an earlier stack: the first deploy would fail "already exists"',
    );
    expect(detail).not.toContain('MauticRelay/prod/token');
  });

  it('checks the sources’ secrets too, and fails a deployed stack whose secret is gone', async () => {
    deployedStack();
    quota(1000);
    lambda.on(GetFunctionConcurrencyCommand).resolves({});
    answer = unauthorized;
    secrets.on(DescribeSecretCommand).resolves({ Name: 'x' });
    secrets
      .on(DescribeSecretCommand, { SecretId: 'MauticRelay/prod/sources/shop' })
      .rejects(new ResourceNotFoundException({ message: 'not found', $metadata: {} }));
    const withSource = settings({
      sources: {
        shop: {
          verify: { scheme: 'shopify' },
          map: "{ 'entity': 'contacts', 'action': 'create', 'data': { 'email': email } }",
        },
      },
    });

    const checks = byCheck(await runDoctor(withSource, deps()));

    expect(checks.secrets).toMatchObject({
      ok: false,
      detail: /^MauticRelay\/prod\/sources\/shop is missing though the stack exists/,
    });
    expect(secrets.commandCalls(DescribeSecretCommand)).toHaveLength(4);
  });

  it('treats a stack whose first deploy failed as not deployed: the secrets it kept must go first', async () => {
    deployedStack('ROLLBACK_COMPLETE');
    quota(1000);
    answer = unauthorized;
    secrets.on(DescribeSecretCommand).resolves({ Name: 'x' });

    const { detail, ok } = byCheck(await runDoctor(settings(), deps())).secrets ?? {};

    expect(ok).toBe(false);
    expect(detail).toContain(
      'MauticRelay/prod/webhook exists, kept by MauticRelay-prod, whose first deploy failed (ROLLBACK_COMPLETE): the next deploy would fail "already exists". Remove the stack (npx cdk destroy -c env=prod) and delete the secret for good (aws secretsmanager delete-secret --force-delete-without-recovery --secret-id MauticRelay/prod/webhook) first',
    );
    expect(detail?.split('; ')).toHaveLength(3);
  });

  it('treats a stack still in review (a change set never executed) as not deployed', async () => {
    deployedStack('REVIEW_IN_PROGRESS', []);
    quota(1000);
    answer = unauthorized;
    noSecrets();
    const clean = byCheck(await runDoctor(settings(), deps())).secrets;
    secrets
      .on(DescribeSecretCommand, { SecretId: 'MauticRelay/prod/token' })
      .resolves({ Name: 'MauticRelay/prod/token' });
    const kept = byCheck(await runDoctor(settings(), deps())).secrets;

    expect(clean).toMatchObject({ ok: true, detail: /^none of the 3 secrets/ });
    expect(kept).toMatchObject({
      ok: false,
      detail: /^MauticRelay\/prod\/token exists, kept from an earlier stack/,
    });
  });
});

describe('doctor: Mautic from the caller', () => {
  it('passes a Mautic whose API answers, fails one whose API is disabled or that cannot be reached', async () => {
    noStack();
    quota(1000);
    noSecrets();

    answer = unauthorized;
    const up = byCheck(await runDoctor(settings(), deps())).mautic;
    answer = (response) =>
      response
        .writeHead(403, { 'content-type': 'application/json' })
        .end(
          '{"errors":[{"message":"API disabled. You need to enable the API in the API settings of Mautic\'s Configuration.","code":403,"type":"api_disabled"}]}',
        );
    const disabled = byCheck(await runDoctor(settings(), deps())).mautic;
    const down = byCheck(
      await runDoctor(settings({}, `http://127.0.0.1:${closedPort}`), deps()),
    ).mautic;

    expect(up).toEqual({
      check: 'mautic',
      ok: true,
      detail: `${new URL(mauticUrl).host} answers as Mautic's API does (HTTP 401 to an API call without a token).`,
    });
    expect(disabled).toMatchObject({ ok: false, detail: /its API is disabled: enable it/ });
    expect(down).toEqual({
      check: 'mautic',
      ok: false,
      detail: `127.0.0.1:${closedPort} cannot be reached from here (ECONNREFUSED): check mauticBaseUrl in cdk.json, the name, the firewall and the certificate.`,
    });
  });

  it('fails an answer that is not Mautic’s API refusing a call without a token, saying what to fix', async () => {
    noStack();
    quota(1000);
    noSecrets();
    const host = new URL(mauticUrl).host;
    const detailFor = async (respond: typeof answer) => {
      answer = respond;
      const check = byCheck(await runDoctor(settings(), deps())).mautic;
      expect(check?.ok).toBe(false);
      return check?.detail;
    };

    expect(
      await detailFor((response) =>
        response.writeHead(302, { location: 'https://www.acme.test/login' }).end(),
      ),
    ).toBe(
      `${host} redirects the API call (HTTP 302 to https://www.acme.test/login): set mauticBaseUrl to the https URL Mautic answers at itself, without a redirect.`,
    );
    expect(
      await detailFor((response) =>
        response.writeHead(404, { 'content-type': 'text/html' }).end('<h1>Not found</h1>'),
      ),
    ).toMatch(/has no Mautic API at \/api\/ \(HTTP 404\): set mauticBaseUrl to Mautic's root URL/);
    expect(
      await detailFor((response) =>
        response.writeHead(503, { 'content-type': 'application/json' }).end('{"error":"down"}'),
      ),
    ).toBe(
      `${host} answers HTTP 503: Mautic, or a proxy in front of it, is failing; read its logs.`,
    );
    expect(
      await detailFor((response) =>
        response.writeHead(401, { 'www-authenticate': 'Basic' }).end('<html>Login</html>'),
      ),
    ).toMatch(/answers HTTP 401 without Mautic's JSON: something in front of Mautic/);
    expect(
      await detailFor((response) =>
        response.writeHead(200, { 'content-type': 'text/html' }).end('<html>Welcome</html>'),
      ),
    ).toMatch(/answers HTTP 200 to an API call without a token, which Mautic's API never does/);
  });
});

describe('doctor: the account of the credentials', () => {
  it('fails when the credentials here are of another account than the one cdk.json names', async () => {
    sts.reset();
    sts.on(GetCallerIdentityCommand).resolves({ Account: '444455556666' });
    noStack();
    quota(1000);
    noSecrets();
    answer = unauthorized;

    const checks = byCheck(await runDoctor(settings(), deps()));

    expect(checks.binding).toEqual({
      check: 'binding',
      ok: false,
      detail:
        'the credentials here are of account 444455556666, but cdk.json binds prod to 111122223333: cdk deploy would refuse them, and the other checks looked at 444455556666. Use credentials of 111122223333 (AWS_PROFILE), or correct "account" in cdk.json.',
    });
    expect(sts.commandCalls(GetCallerIdentityCommand)).toHaveLength(1);
  });
});

describe('doctor: the CDK bootstrap', () => {
  it('fails an account and region never bootstrapped, or bootstrapped too long ago, naming the command', async () => {
    noStack();
    quota(1000);
    noSecrets();
    answer = unauthorized;
    const never = byCheck(await runDoctor(settings(), deps())).bootstrap;
    bootstrapped('5');
    const old = byCheck(await runDoctor(settings(), deps())).bootstrap;
    cloudFormation.reset();
    noStack();
    bootstrapped('30');
    const current = byCheck(await runDoctor(settings(), deps())).bootstrap;

    expect(never).toEqual({
      check: 'bootstrap',
      ok: false,
      detail: expect.stringContaining(
        '111122223333 is not bootstrapped for the CDK in eu-west-1 (no CDKToolkit stack): run "npx cdk bootstrap -c env=prod" once',
      ),
    });
    expect(old).toMatchObject({ ok: false, detail: /version 5; this CDK needs 6 or later/ });
    expect(current).toMatchObject({ ok: true });
  });
});

describe('doctor: the queues an upgrade to the FIFO queues replaces', () => {
  /** A stack of the version before the FIFO queues: standard queues holding `held` each. */
  function standardQueues(held: [number, number]) {
    cloudFormation.on(DescribeStacksCommand, { StackName: 'MauticRelay-prod' }).resolves({
      Stacks: [
        { StackName: 'MauticRelay-prod', CreationTime: new Date(), StackStatus: 'UPDATE_COMPLETE' },
      ],
    });
    const queueUrl = (name: string) => `https://sqs.eu-west-1.amazonaws.com/111122223333/${name}`;
    cloudFormation.on(ListStackResourcesCommand).resolves({
      StackResourceSummaries: ['EventsQueue', 'DeadLetterQueue'].map((name) => ({
        LogicalResourceId: name,
        PhysicalResourceId: queueUrl(`MauticRelay-prod-${name}-AbC`),
        ResourceType: 'AWS::SQS::Queue',
        ResourceStatus: 'UPDATE_COMPLETE' as const,
        LastUpdatedTimestamp: new Date(),
      })),
    });
    for (const [i, name] of ['EventsQueue', 'DeadLetterQueue'].entries()) {
      sqs
        .on(GetQueueAttributesCommand, { QueueUrl: queueUrl(`MauticRelay-prod-${name}-AbC`) })
        .resolves({
          Attributes: {
            ApproximateNumberOfMessages: String(held[i]),
            ApproximateNumberOfMessagesNotVisible: '0',
            ApproximateNumberOfMessagesDelayed: '0',
          },
        });
    }
  }

  it('fails standard queues that still hold events, saying what the upgrade would do with them', async () => {
    bootstrapped();
    quota(1000);
    secrets.on(DescribeSecretCommand).resolves({ Name: 'x' });
    answer = unauthorized;
    standardQueues([12, 3]);

    const dev = byCheck(await runDoctor(settings({ retainData: false }), deps())).queues;
    const kept = byCheck(await runDoctor(settings({ retainData: true }), deps())).queues;

    expect(dev).toEqual({
      check: 'queues',
      ok: false,
      detail:
        "the stack's queues are the standard queues of an earlier version, and EventsQueue holds 12, DeadLetterQueue holds 3: this version's deploy replaces them with FIFO queues and deletes the old ones with what they hold (retainData is off). Drain them first (docs/operations.md, Upgrading to the FIFO queues).",
    });
    expect(kept?.detail).toContain('keeps the old ones aside (retainData) with what they hold');
  });

  it('passes drained standard queues, and FIFO queues', async () => {
    bootstrapped();
    quota(1000);
    secrets.on(DescribeSecretCommand).resolves({ Name: 'x' });
    answer = unauthorized;
    standardQueues([0, 0]);
    const drained = byCheck(await runDoctor(settings(), deps())).queues;
    cloudFormation.reset();
    bootstrapped();
    deployedStack();
    lambda.on(GetFunctionConcurrencyCommand).resolves({});
    const fifo = byCheck(await runDoctor(settings(), deps())).queues;

    expect(drained).toMatchObject({ ok: true, detail: /standard queues are empty/ });
    expect(fifo).toMatchObject({ ok: true, detail: "the stack's queues are FIFO queues already." });
  });
});

describe('doctor --after-deploy: the deployed stack runs', () => {
  const TOPIC = 'arn:aws:sns:eu-west-1:111122223333:MauticRelay-prod-Alarms';
  const MAPPING = '6d9bfe8a-0000-4000-8000-1234567890ab';

  /** A deployed stack with its topic and event source, the mapping in `state`. */
  function running(state = 'Enabled') {
    cloudFormation.on(DescribeStacksCommand).resolves({
      Stacks: [
        { StackName: 'MauticRelay-prod', CreationTime: new Date(), StackStatus: 'UPDATE_COMPLETE' },
      ],
    });
    cloudFormation.on(ListStackResourcesCommand).resolves({
      StackResourceSummaries: [
        ['Alarms', TOPIC, 'AWS::SNS::Topic'],
        ['BatchEventSource', MAPPING, 'AWS::Lambda::EventSourceMapping'],
      ].map(([LogicalResourceId, PhysicalResourceId, ResourceType]) => ({
        LogicalResourceId,
        PhysicalResourceId,
        ResourceType,
        ResourceStatus: 'UPDATE_COMPLETE' as const,
        LastUpdatedTimestamp: new Date(),
      })),
    });
    lambda
      .on(GetEventSourceMappingCommand, { UUID: MAPPING })
      .resolves({ UUID: MAPPING, State: state });
    secrets.on(DescribeSecretCommand).resolves({ Name: 'x' });
    answer = unauthorized;
  }
  const subscribed = (arn: string) =>
    sns.on(ListSubscriptionsByTopicCommand, { TopicArn: TOPIC }).resolves({
      Subscriptions: [
        { Protocol: 'email', Endpoint: 'Ops@Acme.test', SubscriptionArn: arn, TopicArn: TOPIC },
      ],
    });
  const tokens = (value: Record<string, unknown>) =>
    secrets
      .on(GetSecretValueCommand, { SecretId: 'MauticRelay/prod/token' })
      .resolves({ SecretString: JSON.stringify(value) });

  it('passes a stack whose alarm e-mail is confirmed, event source enabled and tokens fresh, and never shows a token', async () => {
    running();
    subscribed(`${TOPIC}:1b2c`);
    tokens({
      accessToken: 'an-access-token-never-shown',
      accessTokenExpiresAt: new Date(NOW + 45 * 60_000).toISOString(),
      updatedAt: new Date(NOW - 15 * 60_000).toISOString(),
      obtainedWith: 'client_credentials',
    });

    const checks = await runDoctor(settings({ alarmEmail: 'ops@acme.test' }), deps(), {
      afterDeploy: true,
    });

    expect(checks.map(({ check, ok }) => [check, ok])).toEqual([
      ['binding', true],
      ['stack', true],
      ['secrets', true],
      ['alarm-email', true],
      ['event-source', true],
      ['refresher', true],
      ['mautic', true],
    ]);
    expect(byCheck(checks).refresher?.detail).toBe(
      'the refresher stored tokens at 2026-11-28T11:45:00.000Z; the access token is good for 45 more minutes.',
    );
    expect(JSON.stringify(checks)).not.toContain('an-access-token-never-shown');
  });

  it('fails an unconfirmed alarm e-mail, a disabled event source and a refresher with no tokens, each with what to do', async () => {
    running('Disabled');
    subscribed('PendingConfirmation');
    tokens({});

    const checks = byCheck(
      await runDoctor(settings({ alarmEmail: 'ops@acme.test' }), deps(), { afterDeploy: true }),
    );

    expect(checks['alarm-email']).toMatchObject({
      ok: false,
      detail: expect.stringContaining(
        'ops@acme.test has not confirmed the alarms\' subscription (PendingConfirmation): nothing is e-mailed until someone clicks "Confirm subscription"',
      ),
    });
    expect(checks['event-source']).toMatchObject({
      ok: false,
      detail: `event source ${MAPPING} is Disabled: nothing delivers the queued events. Enable it (aws lambda update-event-source-mapping --uuid ${MAPPING} --enabled), or deploy again.`,
    });
    expect(checks.refresher).toMatchObject({
      ok: false,
      detail: expect.stringContaining('no Mautic tokens stored yet'),
    });
  });

  it('reports the post-deploy checks as not checked while no stack is deployed', async () => {
    noStack();
    noSecrets();
    answer = unauthorized;

    const checks = byCheck(await runDoctor(settings(), deps(), { afterDeploy: true }));

    expect(checks.stack).toMatchObject({
      ok: false,
      detail: 'no deployed stack MauticRelay-prod in eu-west-1: run "npx cdk deploy -c env=prod".',
    });
    expect(checks.refresher).toMatchObject({
      ok: false,
      detail: /^not checked: no deployed stack/,
    });
    expect(sns.calls()).toHaveLength(0);
  });
});

describe('doctor --env on the command line', () => {
  let dir = '';
  const run = async (argv: string[]) => {
    const out: string[] = [];
    let err = '';
    const io: CliIo = {
      stdout: (line) => out.push(line),
      stderr: (text) => {
        err += text;
      },
      env: {},
      progressBar: false,
      now: () => 0,
      sleep: async () => {},
      interrupted: () => false,
      readStdin: async () => new Uint8Array(),
      readSecret: async () => '',
    };
    const code = await runCli(argv, io);
    return { code, out: out.join('\n'), err };
  };

  afterEach(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
    dir = '';
  });

  /** A project directory whose cdk.json has environment `acme`. */
  function project(acme: Record<string, unknown>) {
    dir = mkdtempSync(join(tmpdir(), 'relay-doctor-'));
    writeFileSync(
      join(dir, 'cdk.json'),
      JSON.stringify({ context: { environments: { acme: { ...environments.prod, ...acme } } } }),
    );
    vi.spyOn(process, 'cwd').mockReturnValue(dir);
  }

  it('prints each check and exits 1 when one fails', async () => {
    project({
      account: '111122223333',
      region: 'eu-west-1',
      alarmEmail: '',
      reservedConcurrency: true,
      // Nothing listens there: no call leaves this machine.
      mauticBaseUrl: `https://127.0.0.1:${closedPort}`,
    });
    noStack();
    bootstrapped();
    quota(10);
    noSecrets();

    const { code, out } = await run(['doctor', '--env', 'acme']);

    expect(code).toBe(EXIT.failed);
    expect(out.split('\n')).toEqual([
      'Environment acme: account 111122223333, region eu-west-1',
      '  ok    binding: the credentials here are of 111122223333, the account cdk.json binds acme to; cdk deploy goes to eu-west-1 there, and these checks ran there.',
      '  ok    bootstrap: bootstrapped for the CDK in eu-west-1 (CDKToolkit, version 30).',
      expect.stringMatching(
        /^ {2}FAIL {2}concurrency: reservedConcurrency reserves 3 .* of the account's 10;/,
      ),
      '  ok    secrets: none of the 3 secrets the stack creates exists yet.',
      '  ok    queues: no queues yet: the deploy creates them.',
      expect.stringMatching(
        /^ {2}FAIL {2}mautic: 127\.0\.0\.1:\d+ cannot be reached from here \(ECONNREFUSED\)/,
      ),
      '2 checks failed: fix them before "npx cdk deploy -c env=acme".',
    ]);
    // The checks ran in the region cdk.json names, whatever AWS_REGION says.
    expect(await lambda.call(0).thisValue.config.region()).toBe('eu-west-1');
  });

  it('prints one JSON document with --json', async () => {
    project({
      account: '111122223333',
      region: 'eu-west-1',
      alarmEmail: '',
      reservedConcurrency: false,
      mauticBaseUrl: `https://127.0.0.1:${closedPort}`,
    });
    noStack();
    quota(1000);
    noSecrets();

    const { code, out } = await run(['doctor', '--env', 'acme', '--json']);

    expect(code).toBe(EXIT.failed);
    expect(JSON.parse(out)).toEqual({
      environment: 'acme',
      afterDeploy: false,
      checks: [
        expect.objectContaining({ check: 'binding', ok: true }),
        expect.objectContaining({ check: 'bootstrap', ok: false }),
        expect.objectContaining({ check: 'concurrency', ok: true }),
        expect.objectContaining({ check: 'secrets', ok: true }),
        expect.objectContaining({ check: 'queues', ok: true }),
        expect.objectContaining({ check: 'mautic', ok: false }),
      ],
    });
  });

  it('says an environment cdk.json lacks, or bound to the placeholder account, before any AWS call', async () => {
    project({});

    const unknown = await run(['doctor', '--env', 'staging']);
    const missing = await run(['doctor']);

    expect(unknown).toMatchObject({ code: EXIT.usage });
    expect(unknown.err).toContain('Unknown environment "staging"; known environments: acme');
    expect(missing).toMatchObject({ code: EXIT.usage });
    expect(missing.err).toContain('--env NAME is required');
    expect(lambda.calls()).toHaveLength(0);
  });

  it('fails the binding check of an environment still bound to the placeholder account', async () => {
    project({ mauticBaseUrl: `https://127.0.0.1:${closedPort}` });
    noStack();
    quota(1000);
    noSecrets();

    const { code, out } = await run(['doctor', '--env', 'acme']);

    expect(code).toBe(EXIT.failed);
    expect(out).toContain(
      '  FAIL  binding: cdk.json binds acme to the placeholder account 123456789012: set "account" (and "region") to yours',
    );
  });
  it('reports every check when AWS does not answer: the placeholder account, Mautic, and what it could not check (exit 3)', async () => {
    // The shipped dev environment, its Mautic on this machine, where nothing answers.
    project({ ...environments.dev, mauticBaseUrl: `https://127.0.0.1:${closedPort}` });
    sts.reset();
    const unreachable = Object.assign(
      new Error('getaddrinfo ENOTFOUND sts.us-east-1.amazonaws.com'),
      {
        code: 'ENOTFOUND',
        hostname: 'sts.us-east-1.amazonaws.com',
      },
    );
    sts.on(GetCallerIdentityCommand).rejects(unreachable);
    cloudFormation.on(DescribeStacksCommand).rejects(unreachable);

    const { code, out } = await run(['doctor', '--env', 'acme']);

    expect(code).toBe(EXIT.setup);
    const lines = out.split('\n');
    expect(lines[1]).toBe(
      '  FAIL  binding: cdk.json binds acme to the placeholder account 123456789012: set "account" (and "region") to yours; cdk deploy refuses credentials of another account. And AWS did not answer: AWS cannot be reached from here (sts.us-east-1.amazonaws.com: ENOTFOUND): check the network connection, a proxy (HTTPS_PROXY), and AWS_REGION.',
    );
    expect(lines.slice(2, 6)).toEqual(
      ['bootstrap', 'concurrency', 'secrets', 'queues'].map(
        (check) => `  FAIL  ${check}: not checked: AWS did not answer (see binding).`,
      ),
    );
    expect(lines[6]).toMatch(/^ {2}FAIL {2}mautic: 127\.0\.0\.1:\d+ cannot be reached from here/);
    expect(lambda.calls()).toHaveLength(0);
  });
});
