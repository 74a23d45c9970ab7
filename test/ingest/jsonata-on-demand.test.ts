/**
 * JSONata is loaded when a sources document is compiled, not when the ingest function is
 * imported: most deployments have no sources, and evaluating its module would lengthen every
 * cold start (issue 38). This file imports nothing that loads it (test/support/sources.ts does).
 */
import { Logger } from '@aws-lambda-powertools/logger';
import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SQSClient } from '@aws-sdk/client-sqs';
import { mockClient } from 'aws-sdk-client-mock';
import { afterEach, expect, it, vi } from 'vitest';
import { compileSources, parseSourcesDocument } from '../../functions/core/sources/sources.ts';
import { buildIngestHandler } from '../../functions/ingest/compose.ts';
import { ENV, loadIngestConfig } from '../../functions/shared/config.ts';

// How many times the jsonata module was evaluated in this file's module graph.
const jsonata = vi.hoisted(() => ({ evaluations: 0 }));
vi.mock('jsonata', async (importOriginal) => {
  jsonata.evaluations += 1;
  return importOriginal();
});

const secretsManager = mockClient(SecretsManagerClient);
afterEach(() => secretsManager.reset());

function coldStart(environment: Record<string, string>) {
  return buildIngestHandler(
    loadIngestConfig({
      [ENV.EVENTS_QUEUE_URL]: 'https://sqs.eu-west-1.amazonaws.com/1/events.fifo',
      [ENV.DEAD_LETTER_QUEUE_URL]: 'https://sqs.eu-west-1.amazonaws.com/1/dlq.fifo',
      [ENV.INGEST_API_KEYS]: 'an-api-key-of-at-least-32-characters-0123',
      [ENV.DEDUP_WINDOW_SECONDS]: '0',
      [ENV.MAX_RECORD_EVENTS_PER_MINUTE]: '0',
      ...environment,
    }),
    {
      sqs: new SQSClient({ region: 'eu-west-1' }),
      secrets: new SecretsManagerClient({ region: 'eu-west-1' }),
      logger: new Logger({ serviceName: 'ingest-test', logLevel: 'SILENT' }),
    },
  );
}

const map = "{ 'entity': 'contacts', 'action': 'create', 'data': { 'email': email } }";
const document = { sources: { stars: { verify: { scheme: 'github' }, map } } };

it('evaluates JSONata at the first cold start with sources, not at import or one without', async () => {
  await coldStart({});
  expect(jsonata.evaluations).toBe(0);
  // Compiling before it is loaded is a mistake of the caller's, and says so.
  expect(() => compileSources(parseSourcesDocument(document), { requireSecrets: false })).toThrow(
    'await loadSourceCompiler() first',
  );

  secretsManager.on(GetSecretValueCommand).resolves({ SecretString: '{}' });
  await coldStart({
    [ENV.SOURCES_DOCUMENT]: JSON.stringify(document),
    [ENV.SOURCES_SECRET_PREFIX]: 'MauticRelay/dev/sources/',
  });
  expect(jsonata.evaluations).toBe(1);
});
