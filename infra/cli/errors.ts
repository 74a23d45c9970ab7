/**
 * Exit codes of `npx mautic-relay` (contract §4 lists them):
 * 0 done; 1 the command ran and failed (a non-2xx answer to `send`, dead letters that could not
 * be moved); 2 a usage mistake (unknown command or option, bad value); 3 what the command needs
 * cannot be reached (AWS settings, a stack or local stack that is not there).
 */
export const EXIT = { ok: 0, failed: 1, usage: 2, setup: 3 } as const;

/** Something to fix in the environment the command runs in; the message names the setting. */
export class SetupError extends Error {
  override name = 'SetupError';
}

/**
 * An AWS SDK error as a sentence that names what to set or fix, or undefined when it is not
 * one the operator can fix from here. Never quotes a request (which could hold a secret).
 */
export function explainAwsError(
  error: unknown,
  where: { environment: string; local: boolean },
): string | undefined {
  if (!(error instanceof Error)) return undefined;
  const name = error.name;
  const message = error.message;
  const code = (error as { code?: string }).code;
  if (where.local && (code === 'ECONNREFUSED' || /ECONNREFUSED|socket hang up/.test(message))) {
    return 'The local stack does not answer: is "npm start" still running? Start it again.';
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
  if (name === 'ValidationError' && /does not exist/.test(message)) {
    return `No stack MauticRelay-${where.environment} in this region: check --env and AWS_REGION (or AWS_PROFILE), or deploy it with "npx cdk deploy -c env=${where.environment}".`;
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
