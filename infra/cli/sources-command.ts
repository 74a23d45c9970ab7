import {
  GetSecretValueCommand,
  PutSecretValueCommand,
  SecretsManagerClient,
} from '@aws-sdk/client-secrets-manager';
import { SourceConfigError } from '../../functions/core/errors.ts';
import {
  formatSourceSecret,
  MAX_SOURCE_SECRETS,
  parseSourceSecret,
} from '../../functions/core/sources/source-registry.ts';
import { compileSources } from '../../functions/core/sources/sources.ts';
import { DEFAULTS } from '../../functions/shared/config.ts';
import { sourceSecretName } from '../../functions/shared/secret-names.ts';
import type { CliIo, Command, Values } from './command.ts';
import { clientConfig } from './environment-region.ts';
import { awsCall, EXIT, UsageError } from './errors.ts';
import { checkEnvironment, TARGET_HELP, targetOptions } from './options.ts';
import { parseHeaders, readPayload, sourceTestLines, testSource } from './source-test.ts';
import { definitionOf, deployedSources, localSources, type SourcesInUse } from './sources.ts';

export const sourcesCommand: Command = {
  name: 'sources',
  usage:
    'sources (list | test NAME --payload FILE [--header "Name: value"]… | set-secret NAME [--add]) (--env NAME | --local) [--json]',
  summary: 'list the sources, test one on a payload, set one’s secret',
  details: `The sources (native webhooks, contract §6) of a deployed environment, as its ingest function
runs them (its document, ENTITIES and CONTACT_MATCH_FIELDS, read from the function's
configuration; stderr says when the sources in the cdk.json of this directory differ; the
caller needs cloudformation:DescribeStacks and lambda:GetFunctionConfiguration), or of the running
"npm start", as its SOURCES_FILE says now. Never prints a secret.
  list         each source's name, scheme, and whether it has a filter and an idempotencyKey
  test NAME    runs the source's filter, idempotencyKey and map on a payload, without signature
               or delivery, and checks the events as the ingest would; prints them, or the error
               a mapping_failed dead letter would hold (exit 1)
  set-secret NAME
               --env only: stores the source's secret (the provider's signing secret or API key)
               in Secrets Manager, read from SOURCE_SECRET or else stdin (typed without echo),
               never from the command line; the ingest uses it within 5 minutes. Locally the
               secret is in SOURCES_FILE.
${TARGET_HELP}
  --payload FILE  the webhook's body as the provider sends it (JSON)
  --header H      a request header the expressions read as $headers, 'Name: value' (repeatable)
  --add           set-secret: keep the secrets already there (rotation: the new one first)`,
  options: {
    ...targetOptions,
    payload: { type: 'string' },
    header: { type: 'string', multiple: true },
    add: { type: 'boolean', default: false },
  },
  positionals: 2,
  run: async (values, positionals, io) => {
    const { action, name } = checkSources(values, positionals);
    const sources = values.local
      ? localSources(io.env)
      : await deployedSources(checkEnvironment(values.env), io);
    if (action === 'list') return runList(values, sources, io);
    if (action === 'set-secret') return runSetSecret(values, name, sources, io);
    return runTest(values, name, sources, io);
  },
};

/** `sources list | test NAME | set-secret NAME`, checked before anything is read. */
function checkSources(
  values: Values,
  positionals: string[],
): { action: 'list'; name?: undefined } | { action: 'test' | 'set-secret'; name: string } {
  const [action, name] = positionals;
  if (action !== 'list' && action !== 'test' && action !== 'set-secret')
    throw new UsageError('sources needs one of: list, test NAME, set-secret NAME');
  if ((action === 'list') !== (name === undefined))
    throw new UsageError(
      action === 'list'
        ? 'sources list takes no NAME'
        : `sources ${action} needs the source's NAME`,
    );
  if (action !== 'test' && (values.payload !== undefined || values.header !== undefined))
    throw new UsageError('--payload and --header are for sources test');
  if (action === 'test' && typeof values.payload !== 'string')
    throw new UsageError('sources test needs --payload FILE');
  if (values.add && action !== 'set-secret')
    throw new UsageError('--add is for sources set-secret');
  if (values.env !== undefined && values.local)
    throw new UsageError('Give --env NAME or --local, not both');
  if (values.env === undefined && !values.local)
    throw new UsageError('Which relay? Give --env NAME (cdk.json) or --local (npm start)');
  if (action === 'set-secret' && values.local)
    throw new UsageError(
      "Locally a source's secret is in SOURCES_FILE (verify.secret): edit it there, npm start reads it again",
    );
  return action === 'list' ? { action } : { action, name: name as string };
}

function runList(values: Values, sources: SourcesInUse, io: CliIo): number {
  const list = listSources(sources);
  if (values.json) io.stdout(JSON.stringify(list));
  else for (const line of sourcesListLines(list, sources.label)) io.stdout(line);
  return EXIT.ok;
}

async function runTest(
  values: Values,
  name: string,
  sources: SourcesInUse,
  io: CliIo,
): Promise<number> {
  const headers = parseHeaders((values.header as string[] | undefined) ?? []);
  const { key, missingHeaders, ...result } = await testSource(
    sources,
    name,
    readPayload(values.payload as string),
    headers,
  );
  if (values.json) io.stdout(JSON.stringify(result));
  else
    for (const line of sourceTestLines(name, { ...result, key, missingHeaders })) io.stdout(line);
  return 'error' in result ? EXIT.failed : EXIT.ok;
}

async function runSetSecret(
  values: Values,
  name: string,
  sources: SourcesInUse,
  io: CliIo,
): Promise<number> {
  const environment = checkEnvironment(values.env);
  const secret = (
    io.env.SOURCE_SECRET ?? (await io.readSecret(`Secret of source "${name}": `))
  ).trim();
  if (secret === '')
    throw new UsageError('No secret given: set SOURCE_SECRET, or type it when asked');
  const secrets = new SecretsManagerClient(clientConfig(environment));
  try {
    const result = await awsCall(environment, io, () =>
      setSourceSecret({ environment, sources, secrets }, name, secret, values.add === true),
    );
    if (values.json) io.stdout(JSON.stringify(result));
    else
      io.stdout(
        `Stored ${result.secrets === 1 ? 'the secret' : `${result.secrets} secrets`} of source "${name}" in ${environment}; the ingest uses ${result.secrets === 1 ? 'it' : 'them'} within ${DEFAULTS.credentialsCacheSeconds / 60} minutes.`,
      );
    return EXIT.ok;
  } finally {
    secrets.destroy();
  }
}

/** What `sources list` shows of a source: never a secret. */
interface SourceSummary {
  name: string;
  scheme: string;
  filter: boolean;
  idempotencyKey: boolean;
}

function listSources(sources: SourcesInUse): { sources: SourceSummary[] } {
  return {
    sources: sources.definitions.map((definition) => ({
      name: definition.name,
      scheme: definition.verify.scheme,
      filter: definition.filter !== undefined,
      idempotencyKey: definition.idempotencyKey !== undefined,
    })),
  };
}

function sourcesListLines(list: { sources: SourceSummary[] }, label: string): string[] {
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

/**
 * `sources set-secret NAME --env ENV [--add]`: writes the source's secret in Secrets Manager,
 * checked against the source's scheme first (a bad one would refuse every webhook). `add` keeps
 * the secrets already there (rotation: the new one first, the old still accepted); otherwise
 * the new one replaces them. Resolves how many the source now has.
 */
async function setSourceSecret(
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
