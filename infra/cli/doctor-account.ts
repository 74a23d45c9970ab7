import { DescribeStacksCommand, type Stack } from '@aws-sdk/client-cloudformation';
import { GetAccountSettingsCommand, GetFunctionConcurrencyCommand } from '@aws-sdk/client-lambda';
import { DescribeSecretCommand } from '@aws-sdk/client-secrets-manager';
import { secretNames, sourceSecretName } from '../../functions/shared/secret-names.ts';
import type { RelaySettings } from '../aws/environments.ts';
import type { DoctorCheck, DoctorDeps, Reached, StackState } from './doctor-types.ts';

/* The checks of what the account and region must hold before a deploy. */

/** Lambda keeps this much of an account's concurrency unreserved, whatever is asked. */
const MIN_UNRESERVED_CONCURRENCY = 100;

/** The bootstrap stack `cdk bootstrap` makes, and the version this aws-cdk-lib's deploy needs. */
const BOOTSTRAP_STACK = 'CDKToolkit';
const MIN_BOOTSTRAP_VERSION = 6;

/**
 * The account and region are bootstrapped for the CDK (the `CDKToolkit` stack, with the assets
 * bucket and the deploy roles), at a version this CDK deploys with: without it `cdk deploy`
 * stops at once, asking for `cdk bootstrap`.
 */
export async function bootstrap(
  settings: RelaySettings,
  { cloudFormation }: Pick<DoctorDeps, 'cloudFormation'>,
): Promise<DoctorCheck> {
  const run = `npx cdk bootstrap -c env=${settings.name}`;
  let stack: Stack | undefined;
  try {
    stack = (await cloudFormation.send(new DescribeStacksCommand({ StackName: BOOTSTRAP_STACK })))
      .Stacks?.[0];
  } catch (error) {
    if ((error as Error).name !== 'ValidationError' || !/does not exist/.test(String(error)))
      throw error;
    return {
      check: 'bootstrap',
      ok: false,
      detail: `${settings.account} is not bootstrapped for the CDK in ${settings.region} (no ${BOOTSTRAP_STACK} stack): run "${run}" once (a bootstrap with another toolkit stack name or qualifier is not seen here).`,
    };
  }
  const version = Number(
    stack?.Outputs?.find((output) => output.OutputKey === 'BootstrapVersion')?.OutputValue,
  );
  const status = stack?.StackStatus ?? '';
  if (!/_COMPLETE$/.test(status) || /ROLLBACK_COMPLETE$/.test(status))
    return {
      check: 'bootstrap',
      ok: false,
      detail: `the ${BOOTSTRAP_STACK} stack is ${status}: let it finish, or fix it in the CloudFormation console and run "${run}" again.`,
    };
  if (!(version >= MIN_BOOTSTRAP_VERSION))
    return {
      check: 'bootstrap',
      ok: false,
      detail: `the ${BOOTSTRAP_STACK} stack is of bootstrap version ${Number.isNaN(version) ? 'unknown' : version}; this CDK needs ${MIN_BOOTSTRAP_VERSION} or later: run "${run}" to update it.`,
    };
  return {
    check: 'bootstrap',
    ok: true,
    detail: `bootstrapped for the CDK in ${settings.region} (${BOOTSTRAP_STACK}, version ${version}).`,
  };
}

/**
 * Whether the account's concurrency quota leaves Lambda's 100 unreserved once the environment's
 * reservations are made (what it already reserves, on a redeploy, counted back), and at least
 * the event source's maximum concurrency for the batch function.
 */
export async function concurrency(
  settings: RelaySettings,
  reached: Reached,
  { lambda }: Pick<DoctorDeps, 'lambda'>,
): Promise<DoctorCheck> {
  const { AccountLimit } = await lambda.send(new GetAccountSettingsCommand({}));
  const limit = AccountLimit?.ConcurrentExecutions ?? 0;
  const unreserved = AccountLimit?.UnreservedConcurrentExecutions ?? limit;
  const needed = settings.reservedConcurrency ? 1 + settings.maxConcurrency : 0;
  const own = reached.stack?.deployed ? await reservedByStack(reached, lambda) : 0;
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

/**
 * What the stack's functions reserve now, found among its resources (not its outputs, which an
 * earlier version's stack may lack).
 */
async function reservedByStack(reached: Reached, lambda: DoctorDeps['lambda']): Promise<number> {
  const names = (await reached.resources())
    .filter((resource) => resource.type === 'AWS::Lambda::Function')
    .map((resource) => resource.id);
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
export async function secrets(
  settings: RelaySettings,
  stack: StackState | undefined,
  { secrets: client }: Pick<DoctorDeps, 'secrets'>,
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
