import { Logger } from '@aws-lambda-powertools/logger';
import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SendMessageBatchCommand, SQSClient } from '@aws-sdk/client-sqs';
import type { APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { mockClient } from 'aws-sdk-client-mock';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { buildIngestHandler } from '../../functions/ingest/compose.ts';
import { ENV, loadIngestConfig } from '../../functions/shared/config.ts';
import { lambdaContext } from '../../infra/local/lambda-context.ts';
import { API_KEY, contact, httpApiEvent, NOW } from '../support/ingest.ts';
import {
  GITHUB_SECRET,
  githubHeaders,
  githubSource,
  STRIPE_SECRET,
  sourceEvent,
  stripeEvent,
  stripeHeaders,
  stripeSource,
} from '../support/sources.ts';

const secretsManager = mockClient(SecretsManagerClient);
const sqs = mockClient(SQSClient);
const PREFIX = 'MauticRelay/dev/sources/';

afterEach(() => {
  secretsManager.reset();
  sqs.reset();
  vi.restoreAllMocks();
});

/** The document as the stack gives it: cdk.json's, without secrets. */
function cloudDocument(sources: Record<string, unknown>): string {
  const withoutSecrets = Object.fromEntries(
    Object.entries(sources).map(([name, source]) => {
      const { verify, ...rest } = source as { verify: Record<string, unknown> };
      const { secret: _secret, ...settings } = verify;
      return [name, { ...rest, verify: settings }];
    }),
  );
  return JSON.stringify({ sources: withoutSecrets });
}

/** The stored secret of each source, by name: what `sources set-secret` writes. */
function stored(values: Record<string, string[] | undefined>) {
  for (const [name, secrets] of Object.entries(values)) {
    secretsManager
      .on(GetSecretValueCommand, { SecretId: `${PREFIX}${name}` })
      .resolves({ SecretString: secrets === undefined ? '{}' : JSON.stringify({ secrets }) });
  }
}

/** The events queue takes every entry. */
function queueTakesAll() {
  sqs.on(SendMessageBatchCommand).callsFake((input: { Entries: Array<{ Id: string }> }) => ({
    Successful: input.Entries.map((entry) => ({
      Id: entry.Id,
      MessageId: `m-${entry.Id}`,
      MD5OfMessageBody: '',
    })),
  }));
}

/** Every line the function's logger writes. */
function capturedLines(): string[] {
  const lines: string[] = [];
  const keep = (chunk: string | Uint8Array) => {
    lines.push(String(chunk).trim());
    return true;
  };
  vi.spyOn(process.stdout, 'write').mockImplementation(keep);
  vi.spyOn(process.stderr, 'write').mockImplementation(keep);
  return lines;
}

async function coldStart(document: string, clock = { now: () => NOW }) {
  return buildIngestHandler(
    loadIngestConfig({
      [ENV.EVENTS_QUEUE_URL]: 'https://sqs.eu-west-1.amazonaws.com/1/events.fifo',
      [ENV.DEAD_LETTER_QUEUE_URL]: 'https://sqs.eu-west-1.amazonaws.com/1/dlq.fifo',
      [ENV.INGEST_API_KEYS]: API_KEY,
      [ENV.DEDUP_WINDOW_SECONDS]: '0',
      [ENV.MAX_RECORD_EVENTS_PER_MINUTE]: '0',
      [ENV.SOURCES_DOCUMENT]: document,
      [ENV.SOURCES_SECRET_PREFIX]: PREFIX,
    }),
    {
      sqs: new SQSClient({ region: 'eu-west-1' }),
      secrets: new SecretsManagerClient({ region: 'eu-west-1' }),
      logger: new Logger({ serviceName: 'ingest-test' }),
      clock,
    },
  );
}

async function status(
  handler: Awaited<ReturnType<typeof coldStart>>,
  event: ReturnType<typeof sourceEvent>,
): Promise<number> {
  const answer = (await handler(
    event,
    lambdaContext('ingest', 10_000),
  )) as APIGatewayProxyStructuredResultV2;
  return answer.statusCode ?? 0;
}

describe('the cloud’s sources, at cold start', () => {
  const document = cloudDocument({ 'stripe-customers': stripeSource(), stars: githubSource() });
  const created = stripeEvent('evt_1', 'customer.created', 'ann@example.com');
  const star = JSON.stringify({ action: 'created', sender: { email: 'bob@example.com' } });

  it('verifies each source with its own stored secret; one not set yet is refused (401) and named', async () => {
    queueTakesAll();
    stored({ 'stripe-customers': [STRIPE_SECRET], stars: undefined });
    const lines = capturedLines();

    const handler = await coldStart(document);
    const stripe = await status(
      handler,
      sourceEvent('stripe-customers', created, stripeHeaders(created)),
    );
    const github = await status(
      handler,
      sourceEvent('stars', star, await githubHeaders(star, 'delivery-1')),
    );

    expect([stripe, github]).toEqual([202, 401]);
    expect(
      secretsManager
        .commandCalls(GetSecretValueCommand)
        .map((c) => c.args[0].input.SecretId)
        .sort(),
    ).toEqual([`${PREFIX}stars`, `${PREFIX}stripe-customers`]);
    expect(lines.map((line) => JSON.parse(line))).toContainEqual(
      expect.objectContaining({
        level: 'WARN',
        message: expect.stringMatching(/^Source "stars" has no secret yet: .*set-secret stars/),
      }),
    );
    expect(lines.join('\n')).not.toContain(STRIPE_SECRET);
  });

  it('uses a secret set later once the cache period has passed, with no deploy', async () => {
    queueTakesAll();
    stored({ 'stripe-customers': [STRIPE_SECRET], stars: undefined });
    capturedLines();
    let now = NOW;
    const handler = await coldStart(document, { now: () => now });
    const starEvent = async (id: string) =>
      sourceEvent('stars', star, await githubHeaders(star, id));
    const before = await status(handler, await starEvent('delivery-1'));

    stored({ stars: [GITHUB_SECRET] });
    now += 299_000;
    const cached = await status(handler, await starEvent('delivery-2'));
    now += 1_000;
    const after = await status(handler, await starEvent('delivery-3'));

    expect([before, cached, after]).toEqual([401, 401, 202]);
  });

  it('stops on a document that does not compile, naming the source and the problem', async () => {
    const bad = cloudDocument({ 'stripe-customers': { ...stripeSource(), map: '{ ,' } });

    await expect(coldStart(bad)).rejects.toThrow(
      /^Source "stripe-customers": map does not compile/,
    );
    expect(secretsManager.calls()).toHaveLength(0);
  });

  it('starts when a source’s secret cannot be read: that source answers 503, the others and /events go on', async () => {
    queueTakesAll();
    stored({ 'stripe-customers': [STRIPE_SECRET] });
    secretsManager
      .on(GetSecretValueCommand, { SecretId: `${PREFIX}stars` })
      .rejects(Object.assign(new Error('not allowed'), { name: 'AccessDeniedException' }));
    const lines = capturedLines();

    const handler = await coldStart(document);
    const github = (await handler(
      sourceEvent('stars', star, await githubHeaders(star, 'delivery-1')),
      lambdaContext('ingest', 10_000),
    )) as APIGatewayProxyStructuredResultV2;
    const stripe = await status(
      handler,
      sourceEvent('stripe-customers', created, stripeHeaders(created)),
    );
    const events = await status(
      handler,
      httpApiEvent({
        body: JSON.stringify([{ ...contact(1), eventId: 'evt-plain-1' }]),
        headers: { 'content-type': 'application/json', authorization: `Bearer ${API_KEY}` },
      }),
    );

    expect([github.statusCode, stripe, events]).toEqual([503, 202, 202]);
    expect(JSON.parse(github.body as string)).toMatchObject({
      error: { code: 'source_unavailable' },
    });
    expect(lines.map((line) => JSON.parse(line))).toContainEqual(
      expect.objectContaining({
        level: 'ERROR',
        message: expect.stringMatching(/^Source "stars": its secret could not be read; .*503/),
        source: 'stars',
      }),
    );
    expect(lines.join('\n')).not.toContain(STRIPE_SECRET);
  });
});
