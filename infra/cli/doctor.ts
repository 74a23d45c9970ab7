/**
 * `mautic-relay doctor --env NAME`: what a deploy of environment NAME needs of the account,
 * the region and Mautic, checked from the operator's machine before anything is created, each
 * check with what to do when it fails (a first deploy that fails after forty resources
 * rolls all of them back).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  type CloudFormationClient,
  DescribeStacksCommand,
  ListStackResourcesCommand,
} from '@aws-sdk/client-cloudformation';
import {
  GetAccountSettingsCommand,
  GetFunctionConcurrencyCommand,
  type LambdaClient,
} from '@aws-sdk/client-lambda';
import { DescribeSecretCommand, type SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { GetCallerIdentityCommand, type STSClient } from '@aws-sdk/client-sts';
import { secretNames, sourceSecretName } from '../../functions/shared/config.ts';
import {
  environmentSettings,
  PLACEHOLDER_ACCOUNT,
  type RelaySettings,
} from '../aws/environments.ts';
import { SetupError, UsageError } from './errors.ts';

/** Lambda keeps this much of an account's concurrency unreserved, whatever is asked. */
const MIN_UNRESERVED_CONCURRENCY = 100;

/** How long Mautic has to answer the reachability check. */
const MAUTIC_TIMEOUT_MS = 10_000;

/** What the checks talk to; the command passes clients of the environment's region. */
export interface DoctorDeps {
  sts: Pick<STSClient, 'send'>;
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

/**
 * A stack that CloudFormation has but that was never deployed: a change set never executed, or a
 * first deploy that failed and rolled back (the next deploy deletes it and starts again). Its
 * functions are gone; the secrets it made are deleted by this version's rollback
 * (RetainExceptOnCreate), but kept by an earlier version's, their names fixed.
 */
const NEVER_DEPLOYED = new Set([
  'REVIEW_IN_PROGRESS',
  'CREATE_FAILED',
  'ROLLBACK_IN_PROGRESS',
  'ROLLBACK_FAILED',
  'ROLLBACK_COMPLETE',
]);

/** The environment's stack, if CloudFormation has one: its name, status, and whether it is up. */
interface StackState {
  name: string;
  status: string;
  deployed: boolean;
}

/** Runs every check; none stops the others. */
export async function runDoctor(settings: RelaySettings, deps: DoctorDeps): Promise<DoctorCheck[]> {
  const [caller, stack] = await Promise.all([
    callerAccount(deps.sts),
    stackState(settings.name, deps.cloudFormation),
  ]);
  return [
    binding(settings, caller),
    await concurrency(settings, stack, deps),
    await secrets(settings, stack, deps.secrets),
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

/** The account of the credentials the SDK finds here (STS needs no permission for it). */
async function callerAccount(sts: DoctorDeps['sts']): Promise<string> {
  return (await sts.send(new GetCallerIdentityCommand({}))).Account ?? '';
}

/** cdk.json names a real account, and the credentials here are of it. */
function binding(settings: RelaySettings, caller: string): DoctorCheck {
  if (settings.account === PLACEHOLDER_ACCOUNT) {
    return {
      check: 'binding',
      ok: false,
      detail: `cdk.json binds ${settings.name} to the placeholder account ${PLACEHOLDER_ACCOUNT}: set "account" (and "region") to yours (the credentials here are of ${caller}); cdk deploy refuses credentials of another account.`,
    };
  }
  if (caller !== settings.account) {
    return {
      check: 'binding',
      ok: false,
      detail: `the credentials here are of account ${caller}, but cdk.json binds ${settings.name} to ${settings.account}: cdk deploy would refuse them, and the other checks looked at ${caller}. Use credentials of ${settings.account} (AWS_PROFILE), or correct "account" in cdk.json.`,
    };
  }
  return {
    check: 'binding',
    ok: true,
    detail: `the credentials here are of ${settings.account}, the account cdk.json binds ${settings.name} to; cdk deploy goes to ${settings.region} there, and these checks ran there.`,
  };
}

/** The environment's stack; undefined when CloudFormation has none. */
async function stackState(
  environment: string,
  cloudFormation: DoctorDeps['cloudFormation'],
): Promise<StackState | undefined> {
  const name = `MauticRelay-${environment}`;
  try {
    const { Stacks } = await cloudFormation.send(new DescribeStacksCommand({ StackName: name }));
    const status = Stacks?.[0]?.StackStatus ?? '';
    return { name, status, deployed: !NEVER_DEPLOYED.has(status) };
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
  stack: StackState | undefined,
  { lambda, cloudFormation }: Pick<DoctorDeps, 'lambda' | 'cloudFormation'>,
): Promise<DoctorCheck> {
  const { AccountLimit } = await lambda.send(new GetAccountSettingsCommand({}));
  const limit = AccountLimit?.ConcurrentExecutions ?? 0;
  const unreserved = AccountLimit?.UnreservedConcurrentExecutions ?? limit;
  const needed = settings.reservedConcurrency ? 1 + settings.maxConcurrency : 0;
  const own = stack?.deployed ? await reservedByStack(stack.name, { lambda, cloudFormation }) : 0;
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

/** Pages of a stack's resources read at most: the relay's stack has fewer than one page. */
const MAX_RESOURCE_PAGES = 10;

/**
 * What the stack's functions reserve now, found among its resources (not its outputs, which an
 * earlier version's stack may lack).
 */
async function reservedByStack(
  stackName: string,
  { lambda, cloudFormation }: Pick<DoctorDeps, 'lambda' | 'cloudFormation'>,
): Promise<number> {
  const names: string[] = [];
  let NextToken: string | undefined;
  for (let page = 0; page < MAX_RESOURCE_PAGES; page++) {
    const listed = await cloudFormation.send(
      new ListStackResourcesCommand({ StackName: stackName, NextToken }),
    );
    for (const resource of listed.StackResourceSummaries ?? [])
      if (resource.ResourceType === 'AWS::Lambda::Function' && resource.PhysicalResourceId)
        names.push(resource.PhysicalResourceId);
    NextToken = listed.NextToken;
    if (NextToken === undefined) break;
  }
  const reserved = await Promise.all(
    names.map(async (FunctionName) => {
      try {
        const found = await lambda.send(new GetFunctionConcurrencyCommand({ FunctionName }));
        return found.ReservedConcurrentExecutions ?? 0;
      } catch (error) {
        // Deleted by an update in progress: it reserves nothing.
        if ((error as Error).name === 'ResourceNotFoundException') return 0;
        throw error;
      }
    }),
  );
  return reserved.reduce((sum, n) => sum + n, 0);
}

/**
 * The stack's secrets have fixed names: before its first deploy none may exist (one a teardown
 * or a failed first deploy kept makes the deploy fail "already exists"), and once deployed each
 * must.
 */
async function secrets(
  settings: RelaySettings,
  stack: StackState | undefined,
  client: DoctorDeps['secrets'],
): Promise<DoctorCheck> {
  const names = secretNames(settings.name);
  const all = [
    names.client,
    names.token,
    names.webhook,
    ...settings.sources.map((source) => sourceSecretName(settings.name, source.name)),
  ];
  const deployed = stack?.deployed === true;
  const found = await Promise.all(all.map((name) => secretState(name, client)));
  const problems = all.flatMap((name, i) => {
    const state = found[i];
    if (state === 'scheduled for deletion')
      return [
        `${name} is scheduled for deletion, which keeps its name taken: restore it, or delete it for good (aws secretsmanager delete-secret --force-delete-without-recovery --secret-id ${name})`,
      ];
    if (!deployed && state === 'present') return [keptSecret(name, settings.name, stack)];
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

/** What to do about a secret that exists before the stack was ever deployed. */
function keptSecret(name: string, environment: string, stack: StackState | undefined): string {
  const forGood = `aws secretsmanager delete-secret --force-delete-without-recovery --secret-id ${name}`;
  if (stack === undefined || stack.status === 'REVIEW_IN_PROGRESS')
    return `${name} exists, kept from an earlier stack: the first deploy would fail "already exists". Keep its value elsewhere if it matters, then delete it for good (${forGood}; docs/operations.md, Teardown)`;
  return `${name} exists, kept by ${stack.name}, whose first deploy failed (${stack.status}): the next deploy would fail "already exists". Remove the stack (npx cdk destroy -c env=${environment}) and delete the secret for good (${forGood}) first: it holds only what that deploy generated`;
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
 * Whether Mautic's API answers from this machine as Mautic does to a call without a token: 401
 * (or 403) with a JSON body. A redirect, a 404, a 5xx or a page of something else in front of
 * Mautic fails, with what to fix. It says nothing of AWS's network, but a name that does not
 * resolve, a refused connection or a bad certificate here usually fails there too.
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
  const problem = mauticProblem(host, response, body);
  if (problem !== undefined) return { check: 'mautic', ok: false, detail: problem };
  return {
    check: 'mautic',
    ok: true,
    detail: `${host} answers as Mautic's API does (HTTP ${response.status} to an API call without a token).`,
  };
}

/** What is wrong with Mautic's answer to a call without a token; undefined when nothing is. */
function mauticProblem(host: string, response: Response, body: string): string | undefined {
  const { status } = response;
  const json = isJson(body);
  if (status === 403 && json && body.includes('api_disabled'))
    return `${host} answers, but its API is disabled: enable it in Mautic's Configuration, API Settings.`;
  if ((status === 401 || status === 403) && json) return undefined;
  if (status >= 300 && status < 400)
    return `${host} redirects the API call (HTTP ${status} to ${response.headers.get('location') ?? 'no location'}): set mauticBaseUrl to the https URL Mautic answers at itself, without a redirect.`;
  if (status === 404)
    return `${host} has no Mautic API at /api/ (HTTP 404): set mauticBaseUrl to Mautic's root URL (where /api/contacts answers), and check that the API is enabled.`;
  if (status >= 500)
    return `${host} answers HTTP ${status}: Mautic, or a proxy in front of it, is failing; read its logs.`;
  if (status === 401 || status === 403)
    return `${host} answers HTTP ${status} without Mautic's JSON: something in front of Mautic (a proxy, basic authentication, a firewall) refuses the call; let /api/ through to Mautic.`;
  return `${host} answers HTTP ${status} to an API call without a token, which Mautic's API never does: check that mauticBaseUrl is Mautic's.`;
}

function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}
