import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CloudFormationClient } from '@aws-sdk/client-cloudformation';
import { GetFunctionConfigurationCommand, LambdaClient } from '@aws-sdk/client-lambda';
import { SourceConfigError } from '../../functions/core/errors.ts';
import type { IngestLimits } from '../../functions/core/ingest/ingest-steps.ts';
import { compileSourcesText } from '../../functions/core/sources/source-registry.ts';
import {
  parseSourcesDocument,
  type SourceDefinition,
} from '../../functions/core/sources/sources.ts';
import { DEFAULT_ENTITIES, DEFAULTS, loadIngestConfig } from '../../functions/shared/config.ts';
import type { CliIo } from './command.ts';
import { clientConfig } from './environment-region.ts';
import { awsCall, SetupError, UsageError } from './errors.ts';
import { localEndpointsPath, readLocalEndpoints } from './local-endpoints.ts';
import { OUTPUTS, stackOutputs } from './target.ts';

/*
 * The sources (contract §6) the commands work on: a deployed environment's (the document its
 * ingest function runs with) or the running local stack's (its SOURCES_FILE, read now). The
 * `sources` command is sources-command.ts; the redrive maps mapping_failed letters with them.
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

/** A deployed environment's sources, as its ingest runs them; the notice, if any, on stderr. */
export async function deployedSources(environment: string, io: CliIo): Promise<SourcesInUse> {
  const aws = clientConfig(environment);
  const clients = { cloudFormation: new CloudFormationClient(aws), lambda: new LambdaClient(aws) };
  try {
    const sources = await awsCall(environment, io, () =>
      environmentSources(environment, clients, process.cwd()),
    );
    if (sources.notice !== undefined) io.stderr(`${sources.notice}\n`);
    return sources;
  } finally {
    clients.cloudFormation.destroy();
    clients.lambda.destroy();
  }
}

/** The source NAME of these sources; a usage error naming the others when there is none. */
export function definitionOf(sources: SourcesInUse, name: string): SourceDefinition {
  const definition = sources.definitions.find((candidate) => candidate.name === name);
  if (definition !== undefined) return definition;
  const names = sources.definitions.map((candidate) => candidate.name);
  throw new UsageError(
    `No source "${name}" in ${sources.label}; ${names.length === 0 ? 'it has none' : `its sources are: ${names.join(', ')}`}`,
  );
}
