import { CloudFormationClient, DescribeStacksCommand } from '@aws-sdk/client-cloudformation';
import { InvokeCommand, LambdaClient } from '@aws-sdk/client-lambda';
import * as z from 'zod';
import type { FetchLike } from '../../functions/core/ports.ts';
import type { Command } from './command.ts';
import { clientConfig } from './environment-region.ts';
import { awsCall, EXIT, SetupError, UsageError } from './errors.ts';
import { endpointsDir, endpointsPathIn, readLocalEndpoints } from './local-endpoints.ts';
import { checkEnvironment, TARGET_HELP, targetOptions } from './options.ts';

export const refreshCommand: Command = {
  name: 'refresh',
  usage: 'refresh (--env NAME | --local) [--json]',
  summary: 'run the token refresher now and wait for its result',
  details: `Asks the environment's token refresher for a refresh now (a synchronous invoke of the
stack's refresher, or the running "npm start"'s), waits for it and prints the result: whether it
refreshed and how long the access token is good for (never a token). Exits 1 if it failed.
${TARGET_HELP}`,
  options: targetOptions,
  positionals: 0,
  run: async (values, _, io) => {
    if (values.env !== undefined && values.local)
      throw new UsageError('Give --env NAME or --local, not both');
    if (values.env === undefined && !values.local)
      throw new UsageError('Which relay? Give --env NAME or --local');
    const result = values.local
      ? await refreshLocal(endpointsDir(io.env), fetch)
      : await awsCall(checkEnvironment(values.env), io, () =>
          refreshEnvironment(checkEnvironment(values.env), {
            cloudFormation: new CloudFormationClient(clientConfig(String(values.env))),
            lambda: new LambdaClient(clientConfig(String(values.env))),
          }),
        );
    const ok = printRefresh(result, {
      json: values.json === true,
      now: io.now(),
      print: io.stdout,
      relay: values.local ? { local: true } : { env: String(values.env) },
    });
    return ok ? EXIT.ok : EXIT.failed;
  },
};

/** The refresher's answer, as much of it as the command reports (never a token). */
const outcomeSchema = z.object({
  action: z.enum(['none', 'refreshed', 'failed']),
  why: z.string().optional(),
  detail: z.string().optional(),
  grant: z.string().optional(),
  stored: z.object({ updatedAt: z.string(), accessTokenExpiresAt: z.string() }).optional(),
});
export type RefreshResult = z.infer<typeof outcomeSchema>;

/** The stack output that names the refresher function (see infra/aws/relay-stack.ts). */
const REFRESH_FUNCTION_OUTPUT = 'RefreshFunctionName';

/**
 * `refresh --env NAME`: finds the refresher of the stack `MauticRelay-<env>` from its outputs and
 * invokes it synchronously, as the batch function does, with a forced run that always refreshes.
 */
export async function refreshEnvironment(
  env: string,
  clients: { cloudFormation: CloudFormationClient; lambda: LambdaClient },
): Promise<RefreshResult> {
  const stackName = `MauticRelay-${env}`;
  let outputs: Array<{ OutputKey?: string | undefined; OutputValue?: string | undefined }>;
  try {
    const { Stacks } = await clients.cloudFormation.send(
      new DescribeStacksCommand({ StackName: stackName }),
    );
    outputs = Stacks?.[0]?.Outputs ?? [];
  } catch (error) {
    // What the AWS environment lacks (a region, credentials, a profile, the network) is for the
    // command to explain; a stack that is not there is this message.
    if (!(error instanceof Error && error.name === 'ValidationError')) throw error;
    throw new SetupError(
      `Cannot read the stack ${stackName} (${describe(error)}): check --env and the AWS environment (AWS_REGION or AWS_PROFILE, and credentials)`,
    );
  }
  const functionName = outputs.find((o) => o.OutputKey === REFRESH_FUNCTION_OUTPUT)?.OutputValue;
  if (!functionName) {
    throw new SetupError(
      `The stack ${stackName} has no ${REFRESH_FUNCTION_OUTPUT} output: deploy this version of the relay (npx cdk deploy ${stackName})`,
    );
  }
  const answer = await clients.lambda.send(
    new InvokeCommand({
      FunctionName: functionName,
      InvocationType: 'RequestResponse',
      Payload: new TextEncoder().encode(JSON.stringify({ force: true, reason: 'operator' })),
    }),
  );
  if (answer.FunctionError) {
    throw new Error(
      `The refresher failed (${answer.FunctionError}): see the log of ${functionName} (its log group is a resource of the stack)`,
    );
  }
  return parseOutcome(new TextDecoder().decode(answer.Payload ?? new Uint8Array()));
}

/** `refresh --local`: asks the running `npm start` through its control endpoint. */
async function refreshLocal(dir: string, fetch: FetchLike): Promise<RefreshResult> {
  const endpoints = readLocalEndpoints(endpointsPathIn(dir));
  if (endpoints?.controlUrl === undefined) {
    throw new SetupError(
      `No local stack is running here (no ${endpointsPathIn(dir)} of a running "npm start"): start one with "npm start", or set MAUTIC_RELAY_DIR to its directory.`,
    );
  }
  let response: Response;
  try {
    response = await fetch(`${endpoints.controlUrl}/refresh`, { method: 'POST' });
  } catch {
    throw new SetupError(
      `The local stack does not answer at ${endpoints.controlUrl}: is "npm start" still running?`,
    );
  }
  const text = await response.text();
  if (!response.ok) throw new Error('The local refresher failed: see the output of "npm start"');
  return parseOutcome(text);
}

/** What fixes a failed refresh of this relay: locally, `npm start` holds the credential. */
interface RefreshFixes {
  /** The command that authorizes this relay again. */
  authorize: string;
  /** What to do when Mautic refuses the client id or secret. */
  credentials: string;
  /** What to check when Mautic's token endpoint cannot be reached. */
  reach: string;
}

const LOCAL_FIXES: RefreshFixes = {
  authorize: 'npx mautic-relay authorize --local',
  credentials:
    'stop "npm start" and start it again with the right MAUTIC_CLIENT_ID and MAUTIC_CLIENT_SECRET (Mautic: Settings, API Credentials)',
  reach:
    'check the MAUTIC_BASE_URL "npm start" was given, and that Mautic runs and answers from here',
};

function environmentFixes(env: string): RefreshFixes {
  return {
    authorize: `npx mautic-relay authorize --env ${env}`,
    credentials: `store the right ones with "npx mautic-relay credentials --env ${env} --base-url URL --client-id ID" (the secret from MAUTIC_CLIENT_SECRET or typed)`,
    reach: `check the base URL stored with "npx mautic-relay credentials --env ${env}" and that Mautic answers from AWS ("npx mautic-relay doctor --env ${env}" tries it from here)`,
  };
}

/** The sentence after "The refresh failed (why):". */
function failureAdvice(result: RefreshResult, fixes: RefreshFixes): string {
  switch (result.why) {
    case 'invalid_client':
      return `Mautic refused the client id or secret: ${fixes.credentials}.`;
    case 'unauthorized_client':
      return `this Mautic credential may not use client_credentials (it was not made by an admin): use the grant type authorization_code and run "${fixes.authorize}".`;
    case 'needs_authorize':
      return `run "${fixes.authorize}".`;
    case 'transient':
      return `Mautic's token endpoint ${result.detail ?? 'failed'}: ${fixes.reach}. The refresher tries again on its schedule.`;
    default:
      return "the refresher's log says more.";
  }
}

/** Prints the result; false when the refresh failed (the command then exits non-zero). */
export function printRefresh(
  result: RefreshResult,
  options: {
    json: boolean;
    now: number;
    print: (line: string) => void;
    /** The relay refreshed: what fixes its failures differs. */
    relay: { local: true } | { env: string };
  },
): boolean {
  const fixes = 'env' in options.relay ? environmentFixes(options.relay.env) : LOCAL_FIXES;
  const secondsLeft = result.stored
    ? Math.max(0, Math.round((Date.parse(result.stored.accessTokenExpiresAt) - options.now) / 1000))
    : null;
  const refreshed = result.action === 'refreshed';
  if (options.json) {
    options.print(JSON.stringify({ refreshed, accessTokenSecondsLeft: secondsLeft }));
  } else if (refreshed) {
    options.print(
      `Refreshed (${result.grant ?? 'grant'}): the access token is good for ${secondsLeft} s, until ${result.stored?.accessTokenExpiresAt}.`,
    );
  } else if (result.action === 'failed') {
    options.print(
      `The refresh failed (${result.why ?? 'unknown'}): ${failureAdvice(result, fixes)}`,
    );
  } else {
    options.print(
      `Not refreshed (${result.why ?? 'nothing to do'})${secondsLeft === null ? '' : `: the stored access token is good for ${secondsLeft} s`}.`,
    );
  }
  return result.action !== 'failed';
}

function parseOutcome(text: string): RefreshResult {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  const parsed = outcomeSchema.safeParse(body);
  if (!parsed.success) throw new Error('The refresher answered something unexpected');
  return parsed.data;
}

function describe(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}
