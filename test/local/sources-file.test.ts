import { createHmac } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { ConfigError } from '../../functions/core/errors.ts';
import { ENV, loadIngestConfig } from '../../functions/shared/config.ts';
import { startIngestThread } from '../../infra/local/ingest-thread.ts';
import { loadLocalConfig } from '../../infra/local/local-config.ts';
import { startLocalStack } from '../../infra/local/local-stack.ts';
import { createQueuePair } from '../../infra/local/queue-pair.ts';
import { type LocalSqs, startLocalSqs, uniqueQueueName } from '../support/local-sqs.ts';
import { expectNoSecrets, thrownBy } from '../support/secrets.ts';
import { until } from '../support/until.ts';

const SECRET = 'hmac-source-secret-4f1d2a9c8b7e6d5c';
const MAP = "{ 'entity': 'contacts', 'action': 'create', 'data': { 'email': email } }";

function source(map = MAP) {
  return {
    verify: { scheme: 'hmac', header: 'x-signature', encoding: 'hex', secret: SECRET },
    map,
  };
}

let dir: string;
let count = 0;

/** A new SOURCES_FILE holding `sources`, or the text as given. */
function sourcesFile(sources: Record<string, unknown> | string): string {
  const path = join(dir, `sources-${++count}.json`);
  writeFileSync(path, typeof sources === 'string' ? sources : JSON.stringify({ sources }));
  return path;
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'relay-sources-file-'));
});

afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe('npm start with SOURCES_FILE', () => {
  it('refuses to start on a document that does not compile, naming the file, the source and the problem, before starting anything', async () => {
    const path = sourcesFile({ good: source(), shop: source("{ 'entity': ") });
    const lines: string[] = [];

    const error = await thrownBy(() =>
      startLocalStack(loadLocalConfig({ SOURCES_FILE: path, PORT: '0' }), (line) =>
        lines.push(line),
      ),
    );

    expect(error).toBeInstanceOf(ConfigError);
    expect((error as Error).message).toMatch(
      new RegExp(`^SOURCES_FILE ${path}: Source "shop": map does not compile: `),
    );
    expectNoSecrets(error, [SECRET]);
    expect(lines).toEqual([]);
  });

  it.each([
    ['a file that is not there', () => join(dir, 'none.json'), /cannot be read \(ENOENT\)$/],
    [
      'JSON that does not parse, without quoting it',
      () => sourcesFile(`{"sources": {"shop": {"verify": {"scheme": "hmac", "secret": "${SECRET}"`),
      /: Sources document: is not JSON \(line 1, column \d+\)$/,
    ],
    [
      'an unknown scheme',
      () => sourcesFile({ shop: { ...source(), verify: { scheme: 'paypal', secret: SECRET } } }),
      /Source "shop": verify/,
    ],
  ])('refuses %s', async (_, file, message) => {
    const path = file();

    const error = await thrownBy(() =>
      startLocalStack(loadLocalConfig({ SOURCES_FILE: path, PORT: '0' }), () => {}),
    );

    expect((error as Error).message).toMatch(message);
    expect((error as Error).message).toContain(`SOURCES_FILE ${path}`);
    expectNoSecrets(error, [SECRET]);
  });
});

describe('npm start with the shipped examples as they are', () => {
  it('warns that their secrets are still placeholders, naming the sources; not once they are put in', async () => {
    const examples = join(import.meta.dirname, '..', '..', 'examples', 'sources', 'sources.json');
    const lines: string[] = [];
    const stack = await startLocalStack(
      loadLocalConfig({ SOURCES_FILE: examples, PORT: '0', REFRESH_INTERVAL_SECONDS: '3600' }),
      (line) => lines.push(line),
    );
    await stack.stop();
    const mine = sourcesFile({ good: source() });
    const clean: string[] = [];
    const other = await startLocalStack(
      loadLocalConfig({ SOURCES_FILE: mine, PORT: '0', REFRESH_INTERVAL_SECONDS: '3600' }),
      (line) => clean.push(line),
    );
    await other.stop();

    expect(lines).toContain(
      "  warning:       the secret of stripe-customers, shopify, typeform, github-stars is still the example's placeholder (REPLACE_…): the provider's webhooks are refused (401) until you put in the signing secret it shows",
    );
    expect(clean.filter((line) => line.includes('warning'))).toEqual([]);
  }, 60_000);
});

describe('the ingest thread with SOURCES_FILE', () => {
  let local: LocalSqs;
  let queueUrl: string;
  let deadLetterQueueUrl: string;

  beforeAll(async () => {
    local = await startLocalSqs();
    ({ queueUrl, deadLetterQueueUrl } = await createQueuePair(local.sqs, {
      name: uniqueQueueName('sources-file'),
      maxReceiveCount: 5,
      visibilityTimeoutSeconds: 30,
    }));
  });

  afterAll(async () => {
    await local.stop();
  });

  /** POSTs a contact to source `name`, signed as the `hmac` sources above check: its status. */
  async function post(url: string, name: string): Promise<number> {
    const body = JSON.stringify({ email: `${name}@example.com` });
    const response = await fetch(`${url}/sources/${name}`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-signature': createHmac('sha256', SECRET).update(body).digest('hex'),
      },
      body,
      signal: AbortSignal.timeout(5_000),
    });
    await response.arrayBuffer();
    return response.status;
  }

  async function start(path: string, lines: string[]) {
    const thread = await startIngestThread(
      {
        config: loadIngestConfig({
          [ENV.EVENTS_QUEUE_URL]: queueUrl,
          [ENV.INGEST_API_KEYS]: 'an-api-key-of-sixteen-chars',
          [ENV.DEDUP_WINDOW_SECONDS]: '0',
          [ENV.MAX_RECORD_EVENTS_PER_MINUTE]: '0',
          [ENV.DEAD_LETTER_QUEUE_URL]: deadLetterQueueUrl,
        }),
        sqsEndpoint: local.endpoint,
        debug: false,
        sourcesFile: path,
      },
      (line) => lines.push(line),
    );
    onTestFinished(() => thread.close());
    return thread;
  }

  it('reads the file again when it changes: a valid version takes effect, an invalid one is refused with a line and the previous stays', async () => {
    const path = sourcesFile({ first: source() });
    const printed: string[] = [];
    // What the reloads say: the thread also prints a line per refused request.
    const reloads = () => printed.filter((line) => !line.startsWith('refused request'));
    const reloadsAtLeast = (count: number) =>
      until(
        () => reloads().length >= count,
        5_000,
        () => printed.join('\n'),
      );
    const { url } = await start(path, printed);
    const before = [await post(url, 'first'), await post(url, 'second')];

    writeFileSync(path, JSON.stringify({ sources: { first: source(), second: source() } }));
    await reloadsAtLeast(1);
    const reloaded = await post(url, 'second');
    writeFileSync(path, JSON.stringify({ sources: { first: source(), second: source('{ ,') } }));
    await reloadsAtLeast(2);
    const refused = [await post(url, 'first'), await post(url, 'second')];
    writeFileSync(path, JSON.stringify({ sources: { third: source() } }));
    await reloadsAtLeast(3);
    const replaced = [await post(url, 'first'), await post(url, 'third')];

    expect(before).toEqual([202, 404]);
    expect(reloaded).toBe(202);
    // The invalid version is refused: both sources of the previous one still answer.
    expect(refused).toEqual([202, 202]);
    expect(replaced).toEqual([404, 202]);
    expect(reloads()).toEqual([
      `sources: reloaded ${path}: first, second`,
      expect.stringMatching(
        /^error: SOURCES_FILE \S+: Source "second": map does not compile: .*; the previous version of the sources stays$/,
      ),
      `sources: reloaded ${path}: third`,
    ]);
    expect(printed.join('\n')).not.toContain(SECRET);
  });

  it('refuses a file that is removed, keeping the previous version', async () => {
    const path = sourcesFile({ first: source() });
    const lines: string[] = [];
    await start(path, lines);

    rmSync(path);
    await until(() => lines.length > 0, 5_000, 'a line about the removed file');

    expect(lines).toEqual([
      `error: SOURCES_FILE ${path} cannot be read (ENOENT); the previous version of the sources stays`,
    ]);
  });

  it('does not start on a file that cannot work', async () => {
    const path = sourcesFile({ shop: source('{ ,') });

    await expect(start(path, [])).rejects.toThrow(
      new RegExp(`^SOURCES_FILE ${path}: Source "shop": map does not compile`),
    );
  });
});
