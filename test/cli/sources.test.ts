import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CloudFormationClient, DescribeStacksCommand } from '@aws-sdk/client-cloudformation';
import { GetFunctionConfigurationCommand, LambdaClient } from '@aws-sdk/client-lambda';
import {
  GetSecretValueCommand,
  PutSecretValueCommand,
  SecretsManagerClient,
} from '@aws-sdk/client-secrets-manager';
import { mockClient } from 'aws-sdk-client-mock';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { type CliIo, runCli } from '../../infra/cli/cli.ts';
import { EXIT } from '../../infra/cli/errors.ts';
import { endpointsPathIn, writeLocalEndpoints } from '../../infra/cli/local-endpoints.ts';

const secretsManager = mockClient(SecretsManagerClient);
const cloudFormation = mockClient(CloudFormationClient);
const lambda = mockClient(LambdaClient);
const STRIPE_SECRET = 'whsec_test_9f8e7d6c5b4a39281706f5e4d3c2b1a0';
const SHOP_SECRET = 'shpss_0123456789abcdef0123456789abcdef';
const NEW_SECRET = 'whsec_test_rotated_00112233445566778899aabb';

const SOURCES = {
  'stripe-customers': {
    verify: { scheme: 'stripe' },
    filter: "type in ['customer.created', 'customer.updated']",
    map: "{ 'entity': 'contacts', 'action': 'create', 'data': { 'email': data.object.email, 'firstname': data.object.name } }",
    idempotencyKey: 'id',
  },
  shop: {
    verify: { scheme: 'shopify' },
    map: "$headers.'x-shopify-topic' = 'customers/delete' ? { 'entity': 'contacts', 'action': 'delete', 'match': { 'email': email } } : $error('unexpected topic ' & $headers.'x-shopify-topic')",
  },
};

/** The same sources with their secrets, as a local SOURCES_FILE holds them. */
const LOCAL_DOCUMENT = {
  sources: {
    'stripe-customers': {
      ...SOURCES['stripe-customers'],
      verify: { scheme: 'stripe', secret: STRIPE_SECRET },
    },
    shop: { ...SOURCES.shop, verify: { scheme: 'shopify', secret: SHOP_SECRET } },
  },
};

const CREATED = {
  id: 'evt_1NG8Du2eZvKYlo2CUI79vXWy',
  type: 'customer.created',
  data: { object: { email: 'ann@example.com', name: 'Ann' } },
};

/**
 * Environment NAME deployed: its stack names the ingest function, whose configuration holds
 * `variables` over what the stack gives it with SOURCES (the cdk.json document, no secret).
 */
function deployed(variables: Record<string, string | undefined> = {}) {
  cloudFormation.on(DescribeStacksCommand).callsFake((input: { StackName: string }) => ({
    Stacks: [
      {
        StackName: input.StackName,
        CreationTime: new Date(),
        StackStatus: 'UPDATE_COMPLETE',
        Outputs: [{ OutputKey: 'IngestFunctionName', OutputValue: `${input.StackName}-Ingest` }],
      },
    ],
  }));
  const all: Record<string, string | undefined> = {
    EVENTS_QUEUE_URL: 'https://sqs.eu-west-1.amazonaws.com/1/events.fifo',
    DEAD_LETTER_QUEUE_URL: 'https://sqs.eu-west-1.amazonaws.com/1/dlq.fifo',
    WEBHOOK_SECRET_ID: 'arn:aws:secretsmanager:eu-west-1:1:secret:MauticRelay/dev/webhook-AbCdEf',
    DEDUP_TABLE_NAME: 'MauticRelay-dev-DedupTable-1A2B3C',
    DEDUP_WINDOW_SECONDS: '86400',
    CONTACT_MATCH_FIELDS: 'email',
    SOURCES_DOCUMENT: JSON.stringify({ sources: SOURCES }),
    SOURCES_SECRET_PREFIX: 'MauticRelay/dev/sources/',
    ...variables,
  };
  lambda.on(GetFunctionConfigurationCommand).resolves({
    Environment: {
      Variables: Object.fromEntries(Object.entries(all).filter(([, value]) => value !== undefined)),
    } as { Variables: Record<string, string> },
  });
}

let dir: string;
let localDir: string;
let sourcesFile: string;
let projectDir: string;

function payload(name: string, body: unknown): string {
  const path = join(dir, name);
  writeFileSync(path, JSON.stringify(body));
  return path;
}

async function run(argv: string[], env: Record<string, string> = {}, extra: Partial<CliIo> = {}) {
  const out: string[] = [];
  let err = '';
  const io: CliIo = {
    stdout: (line) => out.push(line),
    stderr: (text) => {
      err += text;
    },
    env: { MAUTIC_RELAY_DIR: localDir, ...env },
    progressBar: false,
    now: () => Date.parse('2026-11-24T12:00:00.000Z'),
    sleep: async () => {},
    interrupted: () => false,
    readStdin: async () => new Uint8Array(),
    readSecret: async () => {
      throw new Error('no prompt expected');
    },
    ...extra,
  };
  const code = await runCli(argv, io);
  const output = `${out.join('\n')}\n${err}`;
  // Whatever a command does, it never shows a source's secret.
  for (const secret of [STRIPE_SECRET, SHOP_SECRET, NEW_SECRET])
    expect(output).not.toContain(secret);
  return { code, out: out.join('\n'), err };
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'relay-sources-cli-'));
  localDir = join(dir, 'local');
  sourcesFile = join(dir, 'sources.json');
  writeFileSync(sourcesFile, JSON.stringify(LOCAL_DOCUMENT));
  writeLocalEndpoints(endpointsPathIn(localDir), {
    ingestUrl: 'http://127.0.0.1:3000/events',
    sqsEndpoint: 'http://127.0.0.1:1',
    queueUrl: 'http://127.0.0.1:1/q',
    deadLetterQueueUrl: 'http://127.0.0.1:1/dlq',
    secretsEndpoint: 'http://127.0.0.1:2',
    tokenSecretId: 'MauticRelay/local/token',
    sourcesFile,
    entities: ['contacts'],
    contactMatchFields: ['email'],
    pid: process.pid,
    startedAt: new Date().toISOString(),
  });
  // A project whose cdk.json has the sources, without secrets, for --env.
  projectDir = join(dir, 'project');
  mkdirSync(projectDir);
  const cdk = JSON.parse(readFileSync('cdk.json', 'utf8'));
  cdk.context.environments.dev.sources = SOURCES;
  writeFileSync(join(projectDir, 'cdk.json'), JSON.stringify(cdk));
});

afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

afterEach(() => {
  secretsManager.reset();
  cloudFormation.reset();
  lambda.reset();
  vi.restoreAllMocks();
});

describe('sources list', () => {
  it('lists the local stack’s sources: name, scheme, filter and idempotencyKey, no secret', async () => {
    const json = await run(['sources', 'list', '--local', '--json']);
    const human = await run(['sources', 'list', '--local']);

    expect(json.code).toBe(EXIT.ok);
    expect(JSON.parse(json.out)).toEqual({
      sources: [
        { name: 'stripe-customers', scheme: 'stripe', filter: true, idempotencyKey: true },
        { name: 'shop', scheme: 'shopify', filter: false, idempotencyKey: false },
      ],
    });
    expect(human.out).toContain(`Sources of the local stack (${sourcesFile}):`);
    expect(human.out).toMatch(/stripe-customers +stripe +filter yes +idempotencyKey yes/);
    expect(human.out).toMatch(/shop +shopify +filter no +idempotencyKey no/);
  });

  it('lists the sources the deployed ingest runs with, from its configuration', async () => {
    vi.spyOn(process, 'cwd').mockReturnValue(projectDir);
    deployed();

    const { code, out, err } = await run(['sources', 'list', '--env', 'dev', '--json']);

    expect(code).toBe(EXIT.ok);
    expect(JSON.parse(out).sources.map((s: { name: string }) => s.name)).toEqual([
      'stripe-customers',
      'shop',
    ]);
    expect(cloudFormation.commandCalls(DescribeStacksCommand)[0]?.args[0].input).toEqual({
      StackName: 'MauticRelay-dev',
    });
    expect(lambda.commandCalls(GetFunctionConfigurationCommand)[0]?.args[0].input).toEqual({
      FunctionName: 'MauticRelay-dev-Ingest',
    });
    // cdk.json says the same: nothing to say.
    expect(err).toBe('');
    expect(secretsManager.calls()).toHaveLength(0);
  });

  it('says when the cdk.json here differs from what is deployed, and uses what is deployed', async () => {
    vi.spyOn(process, 'cwd').mockReturnValue(projectDir);
    deployed({
      SOURCES_DOCUMENT: JSON.stringify({ sources: { shop: SOURCES.shop } }),
    });

    const { code, out, err } = await run(['sources', 'list', '--env', 'dev', '--json']);

    expect(code).toBe(EXIT.ok);
    expect(JSON.parse(out).sources.map((s: { name: string }) => s.name)).toEqual(['shop']);
    expect(err).toBe(
      `The sources of dev in ${join(projectDir, 'cdk.json')} differ from the deployed ones, which this uses: "npx cdk deploy -c env=dev" deploys them; "--local" tests a draft in SOURCES_FILE.\n`,
    );
  });

  it('says when there are none, works without a cdk.json, and names a stack of an older version', async () => {
    deployed({ SOURCES_DOCUMENT: undefined, SOURCES_SECRET_PREFIX: undefined });
    const none = await run(['sources', 'list', '--env', 'prod']);
    vi.spyOn(process, 'cwd').mockReturnValue(dir);
    const noCdkJson = await run(['sources', 'list', '--env', 'dev']);
    cloudFormation.on(DescribeStacksCommand).resolves({
      Stacks: [
        {
          StackName: 'MauticRelay-dev',
          CreationTime: new Date(),
          StackStatus: 'UPDATE_COMPLETE',
          Outputs: [],
        },
      ],
    });
    const older = await run(['sources', 'list', '--env', 'dev']);

    expect(none).toMatchObject({ code: EXIT.ok, out: 'No sources in prod (deployed).', err: '' });
    expect(noCdkJson).toMatchObject({
      code: EXIT.ok,
      out: 'No sources in dev (deployed).',
      err: '',
    });
    deployed({
      SOURCES_DOCUMENT: '{"sources": {"shop": {"verify": {"scheme": "carrier-pigeon"}}}}',
    });
    const unreadable = await run(['sources', 'list', '--env', 'dev']);

    expect(unreadable.code).toBe(EXIT.setup);
    expect(unreadable.err).toContain(
      'The sources document of MauticRelay-dev-Ingest (dev) cannot be read by this version (Source "shop":',
    );
    expect(older.code).toBe(EXIT.setup);
    expect(older.err).toContain(
      'The stack MauticRelay-dev has no output IngestFunctionName: deploy this version of the relay (npx cdk deploy -c env=dev)',
    );
  });
});

describe('sources test', () => {
  it('prints the events the mapping yields, checked as the ingest checks them', async () => {
    const file = payload('created.json', CREATED);

    const json = await run([
      'sources',
      'test',
      'stripe-customers',
      '--payload',
      file,
      '--local',
      '--json',
    ]);
    const human = await run(['sources', 'test', 'stripe-customers', '--payload', file, '--local']);

    expect(json.code).toBe(EXIT.ok);
    expect(JSON.parse(json.out)).toEqual({
      ignored: false,
      events: [
        {
          entity: 'contacts',
          action: 'create',
          data: { email: 'ann@example.com', firstname: 'Ann' },
        },
      ],
    });
    expect(human.code).toBe(EXIT.ok);
    expect(human.out).toContain(
      'Source "stripe-customers": 1 event (request id "evt_1NG8Du2eZvKYlo2CUI79vXWy"):',
    );
  });

  it('says a filtered-out payload is ignored, exit 0', async () => {
    const file = payload('deleted.json', { ...CREATED, type: 'customer.deleted' });

    const json = await run([
      'sources',
      'test',
      'stripe-customers',
      '--payload',
      file,
      '--local',
      '--json',
    ]);
    const human = await run(['sources', 'test', 'stripe-customers', '--payload', file, '--local']);

    expect(json).toMatchObject({ code: EXIT.ok });
    expect(JSON.parse(json.out)).toEqual({ ignored: true, events: [] });
    expect(human.out).toContain('the filter is false');
  });

  it('prints the mapping error and exits 1 when the mapping throws or yields an event the ingest refuses', async () => {
    const thrown = await run([
      'sources',
      'test',
      'shop',
      '--payload',
      payload('customer.json', { email: 'ann@example.com' }),
      '--header',
      'X-Shopify-Topic: customers/create',
      '--local',
      '--json',
    ]);
    const refused = await run([
      'sources',
      'test',
      'stripe-customers',
      '--payload',
      payload('bad-email.json', { ...CREATED, data: { object: { email: 'not an address' } } }),
      '--local',
    ]);

    expect(thrown.code).toBe(EXIT.failed);
    expect(JSON.parse(thrown.out)).toEqual({
      error: expect.stringMatching(/^map: unexpected topic customers\/create/),
    });
    expect(refused.code).toBe(EXIT.failed);
    expect(refused.out).toBe(
      'Source "stripe-customers": the mapping fails: map: yields an event the ingest refuses: must be a valid email address (at /0/data/email)',
    );
  });

  it('gives the mapping the headers of --header as $headers, names lower-cased', async () => {
    const { code, out } = await run([
      'sources',
      'test',
      'shop',
      '--payload',
      payload('delete.json', { email: 'ann@example.com' }),
      '--header',
      'X-Shopify-Topic: customers/delete',
      '--header',
      'X-Shopify-Shop-Domain:shop.example.com',
      '--local',
      '--json',
    ]);

    expect(code).toBe(EXIT.ok);
    expect(JSON.parse(out)).toEqual({
      ignored: false,
      events: [{ entity: 'contacts', action: 'delete', match: { email: 'ann@example.com' } }],
    });
  });

  it('checks events against the deployed ingest’s ENTITIES', async () => {
    vi.spyOn(process, 'cwd').mockReturnValue(projectDir);
    deployed({ ENTITIES: 'companies' });
    const file = payload('created.json', CREATED);

    const { code, out } = await run([
      'sources',
      'test',
      'stripe-customers',
      '--payload',
      file,
      '--env',
      'dev',
      '--json',
    ]);

    expect(code).toBe(EXIT.failed);
    expect(JSON.parse(out).error).toBe(
      'map: yields an event the ingest refuses: is not one of the entities this relay accepts (ENTITIES) (at /0/entity)',
    );
  });

  it.each([
    [['sources', 'test', 'shop', '--local'], 'sources test needs --payload FILE'],
    [['sources', 'test', '--payload', 'x', '--local'], "sources test needs the source's NAME"],
    [['sources', 'test', 'nope', '--payload', 'x', '--local'], 'cannot be read'],
    [
      ['sources', 'list', '--payload', 'x', '--local'],
      '--payload and --header are for sources test',
    ],
    [['sources', 'list'], 'Which relay?'],
    [['sources', 'remove', 'shop', '--local'], 'sources needs one of'],
    [
      ['sources', 'test', 'shop', '--payload', 'x', '--header', 'no colon', '--local'],
      "--header must be 'Name: value'",
    ],
  ])('refuses %j as a usage mistake, exit 2', async (argv, message) => {
    const { code, err } = await run(argv);

    expect(code).toBe(EXIT.usage);
    expect(err).toContain(message);
  });

  it('names the sources there are when the name is not one, and refuses a payload that is not JSON', async () => {
    const unknown = await run([
      'sources',
      'test',
      'stripe',
      '--payload',
      payload('ok.json', CREATED),
      '--local',
    ]);
    writeFileSync(join(dir, 'not.json'), '{"id": ');
    const bad = await run([
      'sources',
      'test',
      'shop',
      '--payload',
      join(dir, 'not.json'),
      '--local',
    ]);

    expect(unknown.code).toBe(EXIT.usage);
    expect(unknown.err).toContain(
      `No source "stripe" in the local stack (${sourcesFile}); its sources are: stripe-customers, shop`,
    );
    expect(bad.code).toBe(EXIT.usage);
    expect(bad.err).toContain('is not JSON; the ingest would answer 400 invalid_json');
  });

  it('reports a SOURCES_FILE that no longer compiles, naming the source', async () => {
    const original = readFileSync(sourcesFile, 'utf8');
    writeFileSync(
      sourcesFile,
      JSON.stringify({ sources: { shop: { ...LOCAL_DOCUMENT.sources.shop, map: '{ ,' } } }),
    );
    try {
      const { code, err } = await run(['sources', 'list', '--local']);

      expect(code).toBe(EXIT.setup);
      expect(err).toContain(`SOURCES_FILE ${sourcesFile}: Source "shop": map does not compile`);
    } finally {
      writeFileSync(sourcesFile, original);
    }
  });
});

describe('sources set-secret', () => {
  it('stores the secret from SOURCE_SECRET in the source’s own secret, never echoing it', async () => {
    vi.spyOn(process, 'cwd').mockReturnValue(projectDir);
    deployed();
    secretsManager.on(PutSecretValueCommand).resolves({});

    const { code, out } = await run(['sources', 'set-secret', 'stripe-customers', '--env', 'dev'], {
      SOURCE_SECRET: NEW_SECRET,
    });

    expect(code).toBe(EXIT.ok);
    expect(out).toBe(
      'Stored the secret of source "stripe-customers" in dev; the ingest uses it within 5 minutes.',
    );
    expect(secretsManager.commandCalls(PutSecretValueCommand)[0]?.args[0].input).toEqual({
      SecretId: 'MauticRelay/dev/sources/stripe-customers',
      SecretString: JSON.stringify({ secrets: [NEW_SECRET] }),
    });
  });

  it('adds a secret beside the current ones with --add (rotation), reading it without echo from stdin', async () => {
    vi.spyOn(process, 'cwd').mockReturnValue(projectDir);
    deployed();
    secretsManager
      .on(GetSecretValueCommand, { SecretId: 'MauticRelay/dev/sources/stripe-customers' })
      .resolves({ SecretString: JSON.stringify({ secrets: [STRIPE_SECRET] }) })
      .on(PutSecretValueCommand)
      .resolves({});
    const prompts: string[] = [];

    const { code, out } = await run(
      ['sources', 'set-secret', 'stripe-customers', '--add', '--env', 'dev', '--json'],
      {},
      {
        readSecret: async (prompt) => {
          prompts.push(prompt);
          return `${NEW_SECRET}\n`;
        },
      },
    );

    expect(code).toBe(EXIT.ok);
    expect(prompts).toEqual(['Secret of source "stripe-customers": ']);
    expect(JSON.parse(out)).toEqual({ source: 'stripe-customers', secrets: 2 });
    expect(secretsManager.commandCalls(PutSecretValueCommand)[0]?.args[0].input.SecretString).toBe(
      JSON.stringify({ secrets: [NEW_SECRET, STRIPE_SECRET] }),
    );
  });

  it('refuses a secret the source’s scheme cannot use, by position only, before writing anything', async () => {
    vi.spyOn(process, 'cwd').mockReturnValue(projectDir);
    deployed();

    const { code, err } = await run(['sources', 'set-secret', 'stripe-customers', '--env', 'dev'], {
      SOURCE_SECRET: SHOP_SECRET,
    });

    expect(code).toBe(EXIT.usage);
    expect(err).toContain(
      'Source "stripe-customers": The secret #1 must be a Stripe signing secret ("whsec_…")',
    );
    expect(secretsManager.calls()).toHaveLength(0);
  });

  it('is for deployed environments: locally the secret is in SOURCES_FILE', async () => {
    const { code, err } = await run(['sources', 'set-secret', 'shop', '--local']);

    expect(code).toBe(EXIT.usage);
    expect(err).toContain("Locally a source's secret is in SOURCES_FILE");
  });
});
