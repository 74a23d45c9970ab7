import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { CloudFormationClient } from '@aws-sdk/client-cloudformation';
import { GetFunctionConfigurationCommand, type LambdaClient } from '@aws-sdk/client-lambda';
import {
  GetSecretValueCommand,
  PutSecretValueCommand,
  type SecretsManagerClient,
} from '@aws-sdk/client-secrets-manager';
import { SourceConfigError } from '../../functions/core/errors.ts';
import type { IngestLimits } from '../../functions/core/ingest/ingest-steps.ts';
import {
  mappingFailureText,
  mapSourcePayload,
} from '../../functions/core/sources/source-endpoint.ts';
import {
  compileSourcesText,
  formatSourceSecret,
  MAX_SOURCE_SECRETS,
  parseSourceSecret,
} from '../../functions/core/sources/source-registry.ts';
import {
  type CompiledSource,
  compileSources,
  parseSourcesDocument,
  type SourceDefinition,
} from '../../functions/core/sources/sources.ts';
import {
  DEFAULT_ENTITIES,
  DEFAULTS,
  loadIngestConfig,
  sourceSecretName,
} from '../../functions/shared/config.ts';
import { SetupError } from './errors.ts';
import { localEndpointsPath, readLocalEndpoints } from './local-endpoints.ts';
import { UsageError } from './operator-commands.ts';
import { OUTPUTS, stackOutputs } from './target.ts';

/*
 * `sources list | test | set-secret` (contract §4, §6). The sources are a deployed environment's
 * (the document its ingest function runs with) or the running local stack's (its SOURCES_FILE,
 * read now). No output holds a secret.
 */

/** The sources a command works on, and the ingest's limits their events are checked against. */
export interface SourcesInUse {
  /** For messages: `dev (cdk.json)`, or `the local stack (/path/sources.json)`. */
  label: string;
  definitions: SourceDefinition[];
  limits: IngestLimits;
  /** What the operator should know first (printed on stderr): the document is not cdk.json's. */
  notice?: string;
}

/** The running local stack's SOURCES_FILE, as the file is now. */
export function localSources(env: Readonly<Record<string, string | undefined>>): SourcesInUse {
  const path = localEndpointsPath(env);
  const endpoints = readLocalEndpoints(path);
  if (!endpoints) {
    throw new SetupError(
      `No local stack is running (nothing live in ${path}): start one with "npm start" in the project directory, or set MAUTIC_RELAY_DIR to the directory it runs in.`,
    );
  }
  const limits = ingestLimits(endpoints.entities, endpoints.contactMatchFields);
  const file = endpoints.sourcesFile;
  if (file === undefined) {
    return { label: 'the local stack (no SOURCES_FILE)', definitions: [], limits };
  }
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new SetupError(
      `The local stack's SOURCES_FILE ${file} cannot be read (${(error as NodeJS.ErrnoException).code ?? String(error)}).`,
    );
  }
  // Compiled as the stack compiles it, so what the file says now is what a reload would say.
  try {
    compileSourcesText(text);
  } catch (error) {
    if (error instanceof SourceConfigError)
      throw new SetupError(`SOURCES_FILE ${file}: ${error.message}`);
    throw error;
  }
  return {
    label: `the local stack (${file})`,
    definitions: parseSourcesDocument(JSON.parse(text)),
    limits,
  };
}

/** The AWS clients a deployed environment's sources are read with. */
export interface DeployedClients {
  cloudFormation: CloudFormationClient;
  lambda: LambdaClient;
}

/**
 * A deployed environment's sources: the document its ingest function runs with (its
 * SOURCES_DOCUMENT, ENTITIES, CONTACT_MATCH_FIELDS and limits, read from the function's
 * configuration, which holds no secret), so a test or a redrive maps as the ingest does. When the
 * cdk.json of `dir` (the project's) says otherwise for the environment, `notice` says so: an
 * edit not deployed yet is tested with `--local`, or after `cdk deploy`.
 */
export async function environmentSources(
  environment: string,
  clients: DeployedClients,
  dir: string,
): Promise<SourcesInUse> {
  const functionName = (await stackOutputs(environment, clients.cloudFormation)).require(
    OUTPUTS.ingestFunctionName,
  );
  const { Environment } = await clients.lambda.send(
    new GetFunctionConfigurationCommand({ FunctionName: functionName }),
  );
  const variables = Environment?.Variables ?? {};
  let config: ReturnType<typeof loadIngestConfig>;
  try {
    config = loadIngestConfig(variables);
  } catch (error) {
    throw new SetupError(
      `The ingest function ${functionName} of ${environment} has a configuration this version cannot read (${error instanceof Error ? error.message : String(error)}): deploy this version (npx cdk deploy -c env=${environment}).`,
    );
  }
  const document = config.sources?.document;
  const configured = await configuredDocument(environment, dir);
  return {
    label: `${environment} (deployed)`,
    definitions: deployedDefinitions(document, functionName, environment),
    limits: {
      maxBodyBytes: config.maxBodyBytes,
      maxEvents: config.maxEvents,
      entities: new Set(config.entities),
      contactMatchFields: new Set(config.contactMatchFields),
    },
    ...(configured === undefined || configured === (document ?? EMPTY_DOCUMENT)
      ? {}
      : {
          notice: `The sources of ${environment} in ${join(dir, 'cdk.json')} differ from the deployed ones, which this uses: "npx cdk deploy -c env=${environment}" deploys them; "--local" tests a draft in SOURCES_FILE.`,
        }),
  };
}

/** The deployed document's sources; one this version cannot read says to deploy it. */
function deployedDefinitions(
  document: string | undefined,
  functionName: string,
  environment: string,
): SourceDefinition[] {
  if (document === undefined) return [];
  try {
    return parseSourcesDocument(JSON.parse(document));
  } catch (error) {
    throw new SetupError(
      `The sources document of ${functionName} (${environment}) cannot be read by this version (${error instanceof SourceConfigError ? error.message : 'not JSON'}): deploy this version (npx cdk deploy -c env=${environment}).`,
    );
  }
}

/** The document `cdk synth` would give the environment now, or undefined when it cannot tell. */
async function configuredDocument(environment: string, dir: string): Promise<string | undefined> {
  let environments: unknown;
  try {
    environments = JSON.parse(readFileSync(join(dir, 'cdk.json'), 'utf8')).context?.environments;
  } catch {
    return undefined;
  }
  // Loaded here only: the stack's settings bring the CDK library, which no other command needs.
  const { environmentSettings } = await import('../aws/environments.ts');
  try {
    const settings = environmentSettings(environment, environments);
    return settings.sources.length === 0 ? EMPTY_DOCUMENT : settings.sourcesDocument;
  } catch {
    return undefined;
  }
}

/** What a stack with no source holds: no SOURCES_DOCUMENT at all. */
const EMPTY_DOCUMENT = '';

function ingestLimits(
  entities: ReadonlyArray<string> | undefined,
  contactMatchFields: ReadonlyArray<string> | undefined,
): IngestLimits {
  return {
    maxBodyBytes: DEFAULTS.maxBodyBytes,
    maxEvents: DEFAULTS.maxEventsPerRequest,
    entities: new Set(entities ?? DEFAULT_ENTITIES),
    contactMatchFields: new Set(['email', ...(contactMatchFields ?? [])]),
  };
}

/** What `sources list` shows of a source: never a secret. */
interface SourceSummary {
  name: string;
  scheme: string;
  filter: boolean;
  idempotencyKey: boolean;
}

export function listSources(sources: SourcesInUse): { sources: SourceSummary[] } {
  return {
    sources: sources.definitions.map((definition) => ({
      name: definition.name,
      scheme: definition.verify.scheme,
      filter: definition.filter !== undefined,
      idempotencyKey: definition.idempotencyKey !== undefined,
    })),
  };
}

export function sourcesListLines(list: { sources: SourceSummary[] }, label: string): string[] {
  if (list.sources.length === 0) return [`No sources in ${label}.`];
  const width = Math.max(...list.sources.map((source) => source.name.length));
  return [
    `Sources of ${label}:`,
    ...list.sources.map(
      (source) =>
        `  ${source.name.padEnd(width)}  ${source.scheme.padEnd(17)}  filter ${source.filter ? 'yes' : 'no '}  idempotencyKey ${source.idempotencyKey ? 'yes' : 'no (the scheme’s default)'}`,
    ),
  ];
}

/** What `sources test` found, as `--json` prints it (contract §4). */
export type SourceTestResult = { ignored: boolean; events: unknown[] } | { error: string };

/**
 * Runs a source's filter, idempotency key and mapping on a payload, and checks the events as
 * the ingest would (§1, §5, the environment's ENTITIES and CONTACT_MATCH_FIELDS), with the
 * endpoint's own code (`mapSourcePayload`): what the endpoint would queue, or the error a
 * `mapping_failed` dead letter would hold. No signature is checked and nothing is sent.
 */
export async function testSource(
  sources: SourcesInUse,
  name: string,
  payload: unknown,
  headers: Readonly<Record<string, string>>,
): Promise<SourceTestResult & { key?: string | undefined }> {
  const mapping = await mapSourcePayload(compiled(sources, name), payload, headers, {
    limits: sources.limits,
    receivedAt: Date.now(),
    newId: randomUUID,
  });
  if (mapping.kind === 'ignored') return { ignored: true, events: [] };
  if (mapping.kind === 'failed') return { error: mappingFailureText(mapping.failure) };
  return { ignored: false, events: mapping.events, key: mapping.key };
}

function definitionOf(sources: SourcesInUse, name: string): SourceDefinition {
  const definition = sources.definitions.find((candidate) => candidate.name === name);
  if (definition !== undefined) return definition;
  const names = sources.definitions.map((candidate) => candidate.name);
  throw new UsageError(
    `No source "${name}" in ${sources.label}; ${names.length === 0 ? 'it has none' : `its sources are: ${names.join(', ')}`}`,
  );
}

function compiled(sources: SourcesInUse, name: string): CompiledSource {
  // Without secrets: the test checks no signature.
  const source = compileSources([definitionOf(sources, name)], {
    secretsFor: () => [],
    requireSecrets: false,
  });
  return source.get(name) as CompiledSource;
}

export function sourceTestLines(
  name: string,
  result: SourceTestResult & { key?: string | undefined },
): string[] {
  if ('error' in result) return [`Source "${name}": the mapping fails: ${result.error}`];
  if (result.ignored) {
    return [
      `Source "${name}": the filter is false: the ingest answers 202 "ignored", queues nothing.`,
    ];
  }
  const id =
    result.key === undefined ? 'no request id' : `request id ${JSON.stringify(result.key)}`;
  if (result.events.length === 0)
    return [
      `Source "${name}": no event (nothing to do; ${id}): the ingest answers 202, queues nothing.`,
    ];
  return [
    `Source "${name}": ${result.events.length} ${result.events.length === 1 ? 'event' : 'events'} (${id}):`,
    ...result.events.map((event) => `  ${JSON.stringify(event)}`),
  ];
}

/** `--payload FILE`: the webhook's body, JSON. Where it does not parse is named, not quoted. */
export function readPayload(path: string): unknown {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new UsageError(
      `--payload ${path} cannot be read (${(error as NodeJS.ErrnoException).code ?? String(error)})`,
    );
  }
  try {
    return JSON.parse(text);
  } catch {
    throw new UsageError(`--payload ${path} is not JSON; the ingest would answer 400 invalid_json`);
  }
}

const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$/;

/** `--header 'Name: value'`…, names lower-cased as the ingest has them. */
export function parseHeaders(texts: ReadonlyArray<string>): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const text of texts) {
    const colon = text.indexOf(':');
    const name = text.slice(0, colon).trim();
    if (colon < 0 || !HEADER_NAME.test(name))
      throw new UsageError(`--header must be 'Name: value', e.g. 'X-Shopify-Topic: orders/create'`);
    headers[name.toLowerCase()] = text.slice(colon + 1).trim();
  }
  return headers;
}

/**
 * `sources set-secret NAME --env ENV [--add]`: writes the source's secret in Secrets Manager,
 * checked against the source's scheme first (a bad one would refuse every webhook). `add` keeps
 * the secrets already there (rotation: the new one first, the old still accepted); otherwise
 * the new one replaces them. Resolves how many the source now has.
 */
export async function setSourceSecret(
  target: { environment: string; sources: SourcesInUse; secrets: SecretsManagerClient },
  name: string,
  secret: string,
  add: boolean,
): Promise<{ source: string; secrets: number }> {
  const definition = definitionOf(target.sources, name);
  const secretId = sourceSecretName(target.environment, name);
  let next = [secret];
  try {
    if (add) {
      const { SecretString } = await target.secrets.send(
        new GetSecretValueCommand({ SecretId: secretId }),
      );
      next = [secret, ...parseSourceSecret(name, SecretString).filter((old) => old !== secret)];
    }
    if (next.length > MAX_SOURCE_SECRETS)
      throw new UsageError(
        `Source "${name}" would hold more than ${MAX_SOURCE_SECRETS} secrets: set one without --add first`,
      );
    compileSources([definition], { secretsFor: () => next });
  } catch (error) {
    // Names a secret by position, never by value.
    if (error instanceof SourceConfigError) throw new UsageError(error.message);
    throw error;
  }
  await target.secrets.send(
    new PutSecretValueCommand({ SecretId: secretId, SecretString: formatSourceSecret(next) }),
  );
  return { source: name, secrets: next.length };
}
