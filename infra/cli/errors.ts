import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

/**
 * Exit codes of `npx mautic-relay` (contract §4 lists them):
 * 0 done; 1 the command ran and failed (a non-2xx answer to `send`, dead letters that could not
 * be moved); 2 a usage mistake (unknown command or option, bad value); 3 what the command needs
 * cannot be reached (AWS settings, AWS itself from this network, a stack or local stack that is
 * not there).
 */
export const EXIT = { ok: 0, failed: 1, usage: 2, setup: 3 } as const;

/** A mistake the operator can fix; the bin prints its message without a stack. */
export class UsageError extends Error {
  override name = 'UsageError';
}

/** Something to fix in the environment the command runs in; the message names the setting. */
export class SetupError extends Error {
  override name = 'SetupError';
}

/** Runs AWS calls; an error the operator can fix becomes a SetupError naming the setting. */
export async function awsCall<T>(
  environment: string,
  io: { env: Readonly<Record<string, string | undefined>> },
  call: () => Promise<T>,
): Promise<T> {
  try {
    return await call();
  } catch (error) {
    const explained = explainAwsError(error, {
      environment,
      local: environment === 'local',
      env: io.env,
    });
    if (explained) throw new SetupError(explained);
    throw error;
  }
}

/** Where the failed call was made: the command's target and its environment. */
interface CallSite {
  environment: string;
  local: boolean;
  /** The command's environment: AWS_PROFILE, and where the AWS config files are. */
  env: Readonly<Record<string, string | undefined>>;
}

/**
 * An AWS SDK error as a sentence that names what to set or fix, or undefined when it is not
 * one the operator can fix from here. Never quotes a request (which could hold a secret).
 */
export function explainAwsError(error: unknown, where: CallSite): string | undefined {
  if (!(error instanceof Error)) return undefined;
  return (
    noAnswer(error, where) ?? environmentProblem(error, where) ?? resourceProblem(error, where)
  );
}

/** A call that got no answer: the local stack is gone, or AWS cannot be reached. */
function noAnswer(error: Error, where: CallSite): string | undefined {
  const code = (error as { code?: string }).code;
  if (
    where.local &&
    (code === 'ECONNREFUSED' || /ECONNREFUSED|socket hang up/.test(error.message))
  ) {
    return 'The local stack does not answer: is "npm start" still running? Start it again.';
  }
  const unreachable = unreachableHost(error);
  if (unreachable !== undefined && where.local)
    return `The local stack does not answer (${unreachable}): is "npm start" still running? Start it again.`;
  if (unreachable !== undefined) {
    return `AWS cannot be reached from here (${unreachable}): check the network connection, a proxy (HTTPS_PROXY), and AWS_REGION${where.env.AWS_ENDPOINT_URL === undefined ? '' : ' and AWS_ENDPOINT_URL'}.`;
  }
  return undefined;
}

/** What the AWS environment lacks: a profile, a region, credentials that AWS accepts. */
function environmentProblem(error: Error, where: CallSite): string | undefined {
  const { name, message } = error;
  const profile = where.env.AWS_PROFILE;
  const needsProfile =
    /Region is missing/i.test(message) ||
    name === 'CredentialsProviderError' ||
    /Could not load credentials|credential.*not (found|loaded)|Profile .* could not be found/i.test(
      message,
    );
  if (profile !== undefined && needsProfile && !awsProfiles(where.env).has(profile)) {
    return `AWS_PROFILE is "${profile}", but no profile of that name is in the AWS config files (${configFiles(where.env).join(', ')}): check the name ("aws configure list-profiles"), or set it up ("aws configure sso --profile ${profile}" or "aws configure --profile ${profile}").`;
  }
  if (/Region is missing/i.test(message)) {
    return 'No AWS region is set: set AWS_REGION (e.g. AWS_REGION=eu-west-1), or AWS_PROFILE to a profile that has a region.';
  }
  if (
    name === 'CredentialsProviderError' ||
    /Could not load credentials|credential.*not (found|loaded)/i.test(message)
  ) {
    return 'No AWS credentials were found: set AWS_PROFILE (after "aws sso login" or "aws configure"), or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.';
  }
  if (/ExpiredToken|token.*expired/i.test(name) || /security token.*expired/i.test(message)) {
    return 'The AWS credentials have expired: log in again (e.g. "aws sso login --profile $AWS_PROFILE").';
  }
  if (
    name === 'InvalidClientTokenId' ||
    name === 'UnrecognizedClientException' ||
    name === 'SignatureDoesNotMatch'
  ) {
    return 'AWS does not accept these credentials: check AWS_PROFILE or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.';
  }
  return undefined;
}

/** What the relay's stack lacks: the stack itself, a permission, a queue, a secret. */
function resourceProblem(error: Error, where: CallSite): string | undefined {
  const { name, message } = error;
  if (name === 'ValidationError' && /does not exist/.test(message)) {
    return `No stack MauticRelay-${where.environment} in this region (the one cdk.json binds the environment to; outside the project, AWS_REGION or AWS_PROFILE's): check --env, or deploy it with "npx cdk deploy -c env=${where.environment}".`;
  }
  if (/AccessDenied|UnauthorizedOperation|NotAuthorized/.test(name)) {
    const action = message.match(/perform: ([\w:-]+)/)?.[1];
    return `AWS refused the call${action ? ` (${action})` : ''}: the identity of AWS_PROFILE (or the credentials in the environment) needs that permission on the relay's resources.`;
  }
  if (name === 'QueueDoesNotExist' || /NonExistentQueue/.test(name)) {
    return where.local
      ? 'The local stack\'s queues are gone: is "npm start" still running? Start it again.'
      : `A queue of MauticRelay-${where.environment} does not exist: redeploy the stack (npx cdk deploy -c env=${where.environment}).`;
  }
  if (name === 'ResourceNotFoundException') {
    return `A secret of the relay does not exist: redeploy the stack${where.local ? ' (restart "npm start")' : ` (npx cdk deploy -c env=${where.environment})`}.`;
  }
  return undefined;
}

/** Network error codes of a call that got no answer: AWS is not reachable from here. */
const UNREACHABLE = new Set([
  'ENOTFOUND',
  'EAI_AGAIN',
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
]);

/**
 * The host and code of a call that could not reach AWS (`sqs.eu-west-1.amazonaws.com: ENOTFOUND`),
 * or the SDK's timeout; undefined for any other error. Node's network errors name the host or
 * address and port, never the request.
 */
function unreachableHost(error: Error): string | undefined {
  const { code, hostname, address, port } = error as {
    code?: string;
    hostname?: string;
    address?: string;
    port?: number;
  };
  if (error.name === 'TimeoutError') return 'no answer in time';
  if (code === undefined || !UNREACHABLE.has(code)) return undefined;
  const host =
    hostname ?? (address === undefined ? undefined : `${address}${port ? `:${port}` : ''}`);
  return host === undefined ? code : `${host}: ${code}`;
}

/** The AWS config and credentials files, where the SDK looks for them. */
function configFiles(env: Readonly<Record<string, string | undefined>>): string[] {
  const home = homedir();
  return [
    env.AWS_CONFIG_FILE ?? join(home, '.aws', 'config'),
    env.AWS_SHARED_CREDENTIALS_FILE ?? join(home, '.aws', 'credentials'),
  ];
}

/**
 * The profiles the AWS config files name: `[default]` and `[profile NAME]` in the config file,
 * `[NAME]` in the credentials file. A file that cannot be read names none.
 */
function awsProfiles(env: Readonly<Record<string, string | undefined>>): Set<string> {
  const [config, credentials] = configFiles(env);
  const names = new Set<string>();
  for (const [file, isConfig] of [
    [config, true],
    [credentials, false],
  ] as const) {
    let text: string;
    try {
      text = readFileSync(file ?? '', 'utf8');
    } catch {
      continue;
    }
    for (const [, section = ''] of text.matchAll(/^\s*\[([^\]\n]+)\]/gm)) {
      const header = section.trim();
      const name =
        isConfig && header !== 'default' ? header.match(/^profile\s+(.+)$/)?.[1] : header;
      if (name !== undefined) names.add(name.trim());
    }
  }
  return names;
}
