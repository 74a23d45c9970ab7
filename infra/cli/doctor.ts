/**
 * `mautic-relay doctor --env NAME`: what a deploy of environment NAME needs of the account,
 * the region and Mautic, checked from the operator's machine before anything is created, each
 * check with what to do when it fails (issue 26: a first deploy that fails after forty resources
 * rolls all of them back).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { type CloudFormationClient, DescribeStacksCommand } from '@aws-sdk/client-cloudformation';
import {
  GetAccountSettingsCommand,
  GetFunctionConcurrencyCommand,
  type LambdaClient,
} from '@aws-sdk/client-lambda';
import { DescribeSecretCommand, type SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { secretNames, sourceSecretName } from '../../functions/shared/config.ts';
import {
  environmentSettings,
  PLACEHOLDER_ACCOUNT,
  type RelaySettings,
} from '../aws/environments.ts';
import { SetupError } from './errors.ts';
import { UsageError } from './operator-commands.ts';

/** Lambda keeps this much of an account's concurrency unreserved, whatever is asked. */
const MIN_UNRESERVED_CONCURRENCY = 100;

/** How long Mautic has to answer the reachability check. */
const MAUTIC_TIMEOUT_MS = 10_000;

/** What the checks talk to; the command passes clients of the environment's region. */
export interface DoctorDeps {
  lambda: Pick<LambdaClient, 'send'>;
  secrets: Pick<SecretsManagerClient, 'send'>;
  cloudFormation: Pick<CloudFormationClient, 'send'>;
  fetch: typeof fetch;
}

/** One check: what it looked at, whether it passed, and what it found or what to do. */
export interface DoctorCheck {
  check: 'binding' | 'concurrency' | 'secrets' | 'mautic';
  ok: boolean;
  detail: string;
}

/** The settings `cdk synth` would use for NAME, from the cdk.json in `directory`. */
export function doctorSettings(environment: string, directory: string): RelaySettings {
  let context: unknown;
  try {
    context = JSON.parse(readFileSync(join(directory, 'cdk.json'), 'utf8')).context;
  } catch {
    throw new SetupError(
      `No readable cdk.json in ${directory}: run doctor in the directory of the project's cdk.json.`,
    );
  }
  try {
    return environmentSettings(
      environment,
      (context as { environments?: unknown } | undefined)?.environments,
    );
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
}

/** Runs every check; none stops the others. */
export async function runDoctor(settings: RelaySettings, deps: DoctorDeps): Promise<DoctorCheck[]> {
  const stack = await deployedStack(settings.name, deps.cloudFormation);
  return [
    binding(settings),
    await concurrency(settings, stack, deps.lambda),
    await secrets(settings, stack !== undefined, deps.secrets),
    await mautic(settings.mauticBaseUrl, deps.fetch),
  ];
}

/** The lines `doctor` prints: one a check, then what it concludes. */
export function doctorLines(checks: DoctorCheck[], settings: RelaySettings): string[] {
  const failed = checks.filter((check) => !check.ok).length;
  return [
    `Environment ${settings.name}: account ${settings.account}, region ${settings.region}`,
    ...checks.map((check) => `  ${check.ok ? 'ok  ' : 'FAIL'}  ${check.check}: ${check.detail}`),
    failed === 0
      ? `Ready: npx cdk deploy -c env=${settings.name}`
      : `${failed} ${failed === 1 ? 'check' : 'checks'} failed: fix ${failed === 1 ? 'it' : 'them'} before "npx cdk deploy -c env=${settings.name}".`,
  ];
}

function binding(settings: RelaySettings): DoctorCheck {
  if (settings.account === PLACEHOLDER_ACCOUNT) {
    return {
      check: 'binding',
      ok: false,
      detail: `cdk.json binds ${settings.name} to the placeholder account ${PLACEHOLDER_ACCOUNT}: set "account" (and "region") to yours; cdk deploy refuses credentials of another account.`,
    };
  }
  return {
    check: 'binding',
    ok: true,
    detail: `cdk deploy goes to ${settings.account} in ${settings.region} and refuses credentials of another account; these checks ran in ${settings.region}.`,
  };
}

/** The environment's stack, by its outputs; undefined before its first deploy. */
async function deployedStack(
  environment: string,
  cloudFormation: DoctorDeps['cloudFormation'],
): Promise<Map<string, string> | undefined> {
  try {
    const { Stacks } = await cloudFormation.send(
      new DescribeStacksCommand({ StackName: `MauticRelay-${environment}` }),
    );
    return new Map(
      (Stacks?.[0]?.Outputs ?? []).map((output) => [
        output.OutputKey ?? '',
        output.OutputValue ?? '',
      ]),
    );
  } catch (error) {
    if ((error as Error).name === 'ValidationError' && /does not exist/.test(String(error)))
      return undefined;
    throw error;
  }
}

/**
 * Whether the account's concurrency quota leaves Lambda's 100 unreserved once the environment's
 * reservations are made (what it already reserves, on a redeploy, counted back), and at least
 * the event source's maximum concurrency for the batch function.
 */
async function concurrency(
  settings: RelaySettings,
  stack: Map<string, string> | undefined,
  lambda: DoctorDeps['lambda'],
): Promise<DoctorCheck> {
  const { AccountLimit } = await lambda.send(new GetAccountSettingsCommand({}));
  const limit = AccountLimit?.ConcurrentExecutions ?? 0;
  const unreserved = AccountLimit?.UnreservedConcurrentExecutions ?? limit;
  const needed = settings.reservedConcurrency ? 1 + settings.maxConcurrency : 0;
  const own = await reservedByStack(stack, lambda);
  const left = unreserved + own - needed;
  if (needed > 0 && left < MIN_UNRESERVED_CONCURRENCY) {
    return {
      check: 'concurrency',
      ok: false,
      detail: `reservedConcurrency reserves ${needed} (1 for the refresher, maxConcurrency ${settings.maxConcurrency} for the batch function), which would leave ${left} unreserved of the account's ${limit}; Lambda keeps ${MIN_UNRESERVED_CONCURRENCY}, so the deploy would fail and roll back. Set "reservedConcurrency": false for ${settings.name} in cdk.json, or ask AWS for a higher quota (Service Quotas, AWS Lambda, "Concurrent executions": at least ${limit - unreserved - own + needed + MIN_UNRESERVED_CONCURRENCY}).`,
    };
  }
  if (limit < settings.maxConcurrency + 1) {
    return {
      check: 'concurrency',
      ok: false,
      detail: `the account's quota of ${limit} concurrent executions is below maxConcurrency ${settings.maxConcurrency} and the refresher: lower maxConcurrency, or ask AWS for a higher quota.`,
    };
  }
  return {
    check: 'concurrency',
    ok: true,
    detail: settings.reservedConcurrency
      ? `reserves ${needed} of the account's ${limit}, leaving ${left} unreserved (Lambda keeps ${MIN_UNRESERVED_CONCURRENCY}).`
      : `reserves none (reservedConcurrency false); the account's ${limit} concurrent executions hold maxConcurrency ${settings.maxConcurrency}.`,
  };
}

/** What the stack's refresher and batch function reserve now (nothing before its first deploy). */
async function reservedByStack(
  stack: Map<string, string> | undefined,
  lambda: DoctorDeps['lambda'],
): Promise<number> {
  const names = ['RefreshFunctionName', 'BatchFunctionName']
    .map((key) => stack?.get(key))
    .filter((name): name is string => name !== undefined && name !== '');
  const reserved = await Promise.all(
    names.map(
      async (FunctionName) =>
        (await lambda.send(new GetFunctionConcurrencyCommand({ FunctionName })))
          .ReservedConcurrentExecutions ?? 0,
    ),
  );
  return reserved.reduce((sum, n) => sum + n, 0);
}

/**
 * The stack's secrets have fixed names: before its first deploy none may exist (one a teardown
 * kept makes the deploy fail "already exists"), and once deployed each must.
 */
async function secrets(
  settings: RelaySettings,
  deployed: boolean,
  client: DoctorDeps['secrets'],
): Promise<DoctorCheck> {
  const names = secretNames(settings.name);
  const all = [
    names.client,
    names.token,
    names.webhook,
    ...settings.sources.map((source) => sourceSecretName(settings.name, source.name)),
  ];
  const found = await Promise.all(all.map((name) => secretState(name, client)));
  const problems = all.flatMap((name, i) => {
    const state = found[i];
    if (state === 'scheduled for deletion')
      return [
        `${name} is scheduled for deletion, which keeps its name taken: restore it, or delete it for good (aws secretsmanager delete-secret --force-delete-without-recovery --secret-id ${name})`,
      ];
    if (!deployed && state === 'present')
      return [
        `${name} exists, kept from an earlier stack: the first deploy would fail "already exists". Keep its value elsewhere if it matters, then delete it for good (docs/operations.md, Teardown)`,
      ];
    if (deployed && state === 'absent')
      return [
        `${name} is missing though the stack exists: it was deleted outside CloudFormation; deploy again after restoring it`,
      ];
    return [];
  });
  if (problems.length > 0) return { check: 'secrets', ok: false, detail: problems.join('; ') };
  return {
    check: 'secrets',
    ok: true,
    detail: deployed
      ? `the stack's ${all.length} secrets are there.`
      : `none of the ${all.length} secrets the stack creates exists yet.`,
  };
}

async function secretState(
  name: string,
  client: DoctorDeps['secrets'],
): Promise<'present' | 'absent' | 'scheduled for deletion'> {
  try {
    const secret = await client.send(new DescribeSecretCommand({ SecretId: name }));
    return secret.DeletedDate === undefined ? 'present' : 'scheduled for deletion';
  } catch (error) {
    if ((error as Error).name === 'ResourceNotFoundException') return 'absent';
    throw error;
  }
}

/**
 * Whether Mautic's API answers from this machine: any HTTP answer but Mautic's "API disabled"
 * will do (401 without a token is the usual one). It says nothing of AWS's network, but a name
 * that does not resolve, a refused connection or a bad certificate here usually fails there too.
 */
async function mautic(baseUrl: string, fetcher: typeof fetch): Promise<DoctorCheck> {
  const url = `${baseUrl.replace(/\/+$/, '')}/api/contacts?limit=1`;
  const host = new URL(baseUrl).host;
  let response: Response;
  try {
    response = await fetcher(url, {
      redirect: 'manual',
      signal: AbortSignal.timeout(MAUTIC_TIMEOUT_MS),
    });
  } catch (error) {
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    const why =
      (error as Error).name === 'TimeoutError'
        ? `no answer within ${MAUTIC_TIMEOUT_MS / 1000} s`
        : (cause?.code ?? cause?.message ?? (error as Error).message);
    return {
      check: 'mautic',
      ok: false,
      detail: `${host} cannot be reached from here (${why}): check mauticBaseUrl in cdk.json, the name, the firewall and the certificate.`,
    };
  }
  const body = await response.text().catch(() => '');
  if (response.status === 403 && body.includes('api_disabled')) {
    return {
      check: 'mautic',
      ok: false,
      detail: `${host} answers, but its API is disabled: enable it in Mautic's Configuration, API Settings.`,
    };
  }
  return {
    check: 'mautic',
    ok: true,
    detail: `${host} answers (HTTP ${response.status} to an API call without a token).`,
  };
}
