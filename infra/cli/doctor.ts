/**
 * `mautic-relay doctor --env NAME`: what a deploy of environment NAME needs of the account, the
 * region and Mautic, checked from the operator's machine before anything is created (a first
 * deploy that fails after forty resources rolls all of them back); with `--after-deploy`, that
 * the deployed stack runs as it should. Every check runs and is reported, each failure with what
 * to do: when AWS does not answer, the checks that need it say so and the others still run.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DescribeStacksCommand, ListStackResourcesCommand } from '@aws-sdk/client-cloudformation';
import { GetCallerIdentityCommand } from '@aws-sdk/client-sts';
import {
  environmentSettings,
  PLACEHOLDER_ACCOUNT,
  type RelaySettings,
} from '../aws/environments.ts';
import { bootstrap, concurrency, secrets } from './doctor-account.ts';
import { alarmEmail, eventSource, queues, refresher, stackStatus } from './doctor-deployed.ts';
import { mautic } from './doctor-mautic.ts';
import type {
  CheckName,
  DoctorCheck,
  DoctorDeps,
  Reached,
  StackResource,
  StackState,
} from './doctor-types.ts';
import { explainAwsError, SetupError, UsageError } from './errors.ts';

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

/** Runs every check; none stops the others. */
export async function runDoctor(
  settings: RelaySettings,
  deps: DoctorDeps,
  options: { afterDeploy?: boolean } = {},
): Promise<DoctorCheck[]> {
  const reached = await reachAws(settings.name, deps);
  const aws = (check: CheckName, run: (found: Reached) => DoctorCheck | Promise<DoctorCheck>) =>
    typeof reached === 'string'
      ? {
          check,
          ok: false,
          detail: 'not checked: AWS did not answer (see binding).',
          unchecked: true as const,
        }
      : guarded(check, () => run(reached), settings.name, deps.env);
  const deployed = (check: CheckName, run: (found: Reached) => Promise<DoctorCheck>) =>
    aws(check, (found) =>
      found.stack?.deployed
        ? run(found)
        : { check, ok: false, detail: 'not checked: no deployed stack (see stack).' },
    );
  const checks = options.afterDeploy
    ? [
        aws('stack', (found) => stackStatus(settings, found)),
        aws('secrets', (found) => secrets(settings, found.stack, deps)),
        deployed('alarm-email', (found) => alarmEmail(settings, found, deps)),
        deployed('event-source', (found) => eventSource(settings, found, deps)),
        deployed('refresher', () => refresher(settings, deps)),
      ]
    : [
        aws('bootstrap', () => bootstrap(settings, deps)),
        aws('concurrency', (found) => concurrency(settings, found, deps)),
        aws('secrets', (found) => secrets(settings, found.stack, deps)),
        aws('queues', (found) => queues(settings, found, deps)),
      ];
  return [
    binding(settings, reached),
    ...(await Promise.all(checks)),
    await mautic(settings.mauticBaseUrl, deps.fetch),
  ];
}

/** A check whose AWS call failed: failed, with the error explained as the commands explain it. */
async function guarded(
  check: CheckName,
  run: () => DoctorCheck | Promise<DoctorCheck>,
  environment: string,
  env: DoctorDeps['env'],
): Promise<DoctorCheck> {
  try {
    return await run();
  } catch (error) {
    const why =
      explainAwsError(error, { environment, local: false, env }) ??
      (error instanceof Error ? `${error.name}: ${error.message}` : String(error));
    return { check, ok: false, detail: `could not be checked: ${why}` };
  }
}

/**
 * Whose credentials these are (STS needs no permission for it) and the environment's stack; or,
 * when AWS does not answer, why (as the commands explain it).
 */
async function reachAws(environment: string, deps: DoctorDeps): Promise<Reached | string> {
  try {
    const [identity, stack] = await Promise.all([
      deps.sts.send(new GetCallerIdentityCommand({})),
      stackState(environment, deps.cloudFormation),
    ]);
    let listed: Promise<StackResource[]> | undefined;
    return {
      caller: identity.Account ?? '',
      stack,
      resources: () => {
        listed ??= stack ? stackResources(stack.name, deps.cloudFormation) : Promise.resolve([]);
        return listed;
      },
    };
  } catch (error) {
    return (
      explainAwsError(error, { environment, local: false, env: deps.env }) ??
      (error instanceof Error ? `${error.name}: ${error.message}` : String(error))
    );
  }
}

/** The lines `doctor` prints: one a check, then what it concludes. */
export function doctorLines(
  checks: DoctorCheck[],
  settings: RelaySettings,
  options: { afterDeploy?: boolean } = {},
): string[] {
  const failed = checks.filter((check) => !check.ok).length;
  const deploy = `npx cdk deploy -c env=${settings.name}`;
  const them = failed === 1 ? 'it' : 'them';
  const conclusion = options.afterDeploy
    ? failed === 0
      ? `Deployed and running: send a first event (README, Deploy).`
      : `${failed} ${failed === 1 ? 'check' : 'checks'} failed: fix ${them}, then run this again.`
    : failed === 0
      ? `Ready: ${deploy}`
      : `${failed} ${failed === 1 ? 'check' : 'checks'} failed: fix ${them} before "${deploy}".`;
  return [
    `Environment ${settings.name}: account ${settings.account}, region ${settings.region}`,
    ...checks.map((check) => `  ${check.ok ? 'ok  ' : 'FAIL'}  ${check.check}: ${check.detail}`),
    conclusion,
  ];
}

/** cdk.json names a real account, and the credentials here are of it. */
function binding(settings: RelaySettings, reached: Reached | string): DoctorCheck {
  const caller = typeof reached === 'string' ? undefined : reached.caller;
  if (settings.account === PLACEHOLDER_ACCOUNT) {
    return {
      check: 'binding',
      ok: false,
      detail: `cdk.json binds ${settings.name} to the placeholder account ${PLACEHOLDER_ACCOUNT}: set "account" (and "region") to yours${caller ? ` (the credentials here are of ${caller})` : ''}; cdk deploy refuses credentials of another account.${typeof reached === 'string' ? ` And AWS did not answer: ${reached}` : ''}`,
    };
  }
  if (caller === undefined) {
    return {
      check: 'binding',
      ok: false,
      detail: `AWS did not answer, so whose credentials these are is not known: ${reached}`,
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

/** Pages of a stack's resources read at most: the relay's stack has fewer than one page. */
const MAX_RESOURCE_PAGES = 10;

async function stackResources(
  stackName: string,
  cloudFormation: DoctorDeps['cloudFormation'],
): Promise<StackResource[]> {
  const resources: StackResource[] = [];
  let NextToken: string | undefined;
  for (let page = 0; page < MAX_RESOURCE_PAGES; page++) {
    const listed = await cloudFormation.send(
      new ListStackResourcesCommand({ StackName: stackName, NextToken }),
    );
    for (const resource of listed.StackResourceSummaries ?? [])
      if (resource.PhysicalResourceId && resource.ResourceType)
        resources.push({
          type: resource.ResourceType,
          id: resource.PhysicalResourceId,
          logicalId: resource.LogicalResourceId ?? '',
        });
    NextToken = listed.NextToken;
    if (NextToken === undefined) break;
  }
  return resources;
}
