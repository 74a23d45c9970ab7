/**
 * The shipped examples of examples/sources/ through `sources test` (contract §4, §6), as an
 * operator runs it against a local stack whose SOURCES_FILE is the examples' document as
 * shipped: each provider's sample payload yields exactly the events examples/sources/README.md
 * shows. The same examples run end to end in test/e2e/source-examples.test.ts.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Template } from 'aws-cdk-lib/assertions';
import type { CfnFunction } from 'aws-cdk-lib/aws-lambda';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { EXIT } from '../../infra/cli/errors.ts';
import { endpointsPathIn, writeLocalEndpoints } from '../../infra/cli/local-endpoints.ts';
import { relayStack } from '../infra/synth.ts';
import { operatorCommand } from '../support/relay-process.ts';
import {
  EXAMPLES_DOCUMENT,
  examplesDocument,
  githubDeliveryHeaders,
  payloadPath,
  payloadText,
  SOURCE_EXAMPLES,
  STARGAZER_EMAIL,
  shopifyHeaders,
  stargazerWithEmail,
} from './source-examples.ts';

let dir: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'relay-source-examples-'));
  writeLocalEndpoints(endpointsPathIn(dir), {
    ingestUrl: 'http://127.0.0.1:3000/events',
    sqsEndpoint: 'http://127.0.0.1:1',
    queueUrl: 'http://127.0.0.1:1/q',
    deadLetterQueueUrl: 'http://127.0.0.1:1/dlq',
    secretsEndpoint: 'http://127.0.0.1:2',
    tokenSecretId: 'MauticRelay/local/token',
    sourcesFile: EXAMPLES_DOCUMENT,
    entities: ['contacts', 'companies'],
    contactMatchFields: ['email'],
    pid: process.pid,
    startedAt: new Date().toISOString(),
  });
});

afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

afterEach(() => {
  vi.restoreAllMocks();
});

/** `sources test SOURCE --payload FILE [--header …] --local --json`: exit code and JSON. */
async function sourcesTest(source: string, file: string, headers: Record<string, string>) {
  const argv = ['sources', 'test', source, '--payload', file, '--local', '--json'];
  for (const [name, value] of Object.entries(headers)) argv.push('--header', `${name}: ${value}`);
  const { code, out, err } = await operatorCommand(argv, { MAUTIC_RELAY_DIR: dir });
  return { code, err, result: code === EXIT.usage ? undefined : JSON.parse(out) };
}

/** A payload of the test's own, written beside the local stack's endpoints. */
function ownPayload(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

describe('sources test of a filter on a header not given', () => {
  it('says which header the filter reads and how to give it, not only that the filter is false', async () => {
    const argv = [
      'sources',
      'test',
      'shopify',
      '--payload',
      payloadPath('shopify/orders-create.json'),
    ];
    const bare = await operatorCommand([...argv, '--local'], { MAUTIC_RELAY_DIR: dir });
    const json = await operatorCommand([...argv, '--local', '--json'], { MAUTIC_RELAY_DIR: dir });

    expect(bare.code).toBe(EXIT.ok);
    expect(bare.out.split('\n')).toEqual([
      'Source "shopify": the filter is false: the ingest answers 202 "ignored", queues nothing.',
      "  The filter reads the header x-shopify-topic, not given: add --header 'x-shopify-topic: …' with the value the provider sends.",
    ]);
    // The JSON keeps its shape.
    expect(JSON.parse(json.out)).toEqual({ ignored: true, events: [] });
  });
});

describe('the shipped source examples through sources test', () => {
  it.each(SOURCE_EXAMPLES.map((example) => [example.source, example.payload, example] as const))(
    '%s: %s yields exactly its events',
    async (source, file, example) => {
      const { code, err, result } = await sourcesTest(source, payloadPath(file), example.headers);

      expect(err).toBe('');
      expect(code).toBe(EXIT.ok);
      expect(result).toEqual(
        example.expected === 'ignored'
          ? { ignored: true, events: [] }
          : { ignored: false, events: example.expected },
      );
    },
  );

  it('github-stars: a star by a sender who shows a public email becomes a contact', async () => {
    const file = ownPayload('star-with-email.json', stargazerWithEmail());

    const { code, result } = await sourcesTest('github-stars', file, githubDeliveryHeaders('d-1'));

    expect(code).toBe(EXIT.ok);
    expect(result).toEqual({
      ignored: false,
      events: [
        {
          entity: 'contacts',
          action: 'create',
          data: { email: STARGAZER_EMAIL, tags: ['github-stargazer'] },
        },
      ],
    });
  });

  it('shopify: an order under 1 in total adds no points (0 would be refused), only the contact', async () => {
    const order = JSON.parse(payloadText('shopify/orders-create.json'));
    const file = ownPayload('free-order.json', JSON.stringify({ ...order, total_price: '0.00' }));

    const { code, result } = await sourcesTest(
      'shopify',
      file,
      shopifyHeaders('orders/create', 'w'),
    );

    expect(code).toBe(EXIT.ok);
    expect(result.events.map((event: { action: string }) => event.action)).toEqual(['create']);
  });

  it('the examples fit a deployed environment: cdk.json takes them without their secrets, and the ingest’s environment holds them', () => {
    const { sources } = examplesDocument();
    for (const source of Object.values(sources)) delete source.verify.secret;

    const { stack } = relayStack('prod', { sources });
    const template = Template.fromStack(stack);

    const ingest =
      template.toJSON().Resources[
        stack.resolve((stack.ingest.function.node.defaultChild as CfnFunction).logicalId)
      ];
    expect(JSON.parse(ingest.Properties.Environment.Variables.SOURCES_DOCUMENT)).toEqual({
      sources,
    });
  });
});
