import { CloudFormationClient, DescribeStacksCommand } from '@aws-sdk/client-cloudformation';
import { CloudWatchClient } from '@aws-sdk/client-cloudwatch';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SQSClient } from '@aws-sdk/client-sqs';
import { clientConfig } from './environment-region.ts';
import { SetupError } from './errors.ts';
import { localEndpointsPath, readLocalEndpoints } from './local-endpoints.ts';

/** What the operator commands act on: one deployed environment or the running local stack. */
export interface Target {
  /** `dev`, or `local`. */
  name: string;
  local: boolean;
  ingestUrl: string;
  eventsQueueUrl: string;
  deadLetterQueueUrl: string;
  tokenSecretId: string;
  webhookSecretId: string;
  /** The CloudWatch dashboard in the console; none locally. */
  dashboardUrl: string | null;
  sqs: SQSClient;
  secrets: SecretsManagerClient;
  /** For the oldest event's age, which only CloudWatch knows; none locally. */
  cloudwatch: CloudWatchClient | undefined;
  /** The de-duplication table, which holds Mautic's shared health (`status`); unknown: none. */
  table?: { dynamodb: DynamoDBClient; name: string };
  /**
   * The outcome table of each event (contract §1.6) and its retention (0: none is kept);
   * undefined for a relay of a version before it.
   */
  outcomes?: { dynamodb: DynamoDBClient; tableName: string; retentionSeconds: number } | undefined;
  /** The Mautic a local stack delivers to (`mautic --local` reads it); none for --env. */
  mauticUrl?: string | undefined;
}

/** The stack of environment NAME, as infra/aws/app.ts names it. */
const stackName = (environment: string) => `MauticRelay-${environment}`;

/** The stack outputs the commands read (infra/aws/relay-stack.ts declares them). */
export const OUTPUTS = {
  ingestUrl: 'IngestUrl',
  eventsQueueUrl: 'EventsQueueUrl',
  deadLetterQueueUrl: 'DeadLetterQueueUrl',
  tokenSecretName: 'TokenSecretName',
  webhookSecretName: 'WebhookSecretName',
  dashboardName: 'DashboardName',
  dedupTableName: 'DedupTableName',
  ingestFunctionName: 'IngestFunctionName',
  outcomeTableName: 'OutcomeTableName',
  outcomeRetentionSeconds: 'OutcomeRetentionSeconds',
} as const;

/** A deployed stack's outputs: `require` names what to do when one is missing. */
export interface StackOutputs {
  get(key: string): string | undefined;
  require(key: string): string;
}

/**
 * Reads the outputs of environment NAME's stack. The SDK's errors (no stack, no credentials) go
 * on as they are, for the command to explain.
 */
export async function stackOutputs(
  environment: string,
  cloudFormation: CloudFormationClient,
): Promise<StackOutputs> {
  const { Stacks } = await cloudFormation.send(
    new DescribeStacksCommand({ StackName: stackName(environment) }),
  );
  const outputs = new Map(
    (Stacks?.[0]?.Outputs ?? []).map((output) => [output.OutputKey, output.OutputValue]),
  );
  return {
    get: (key) => outputs.get(key) || undefined,
    require: (key) => {
      const value = outputs.get(key);
      if (value) return value;
      throw new SetupError(
        `The stack ${stackName(environment)} has no output ${key}: deploy this version of the relay (npx cdk deploy -c env=${environment}).`,
      );
    },
  };
}

/**
 * A deployed environment, found from its stack's outputs in the region cdk.json binds it to
 * (else the usual AWS environment's), with the usual AWS credentials.
 */
export async function environmentTarget(environment: string): Promise<Target> {
  const aws = clientConfig(environment);
  const cloudFormation = new CloudFormationClient(aws);
  const outputs = await stackOutputs(environment, cloudFormation);
  const output = outputs.require;
  const region = await cloudFormation.config.region();
  cloudFormation.destroy();
  const dashboard = outputs.get(OUTPUTS.dashboardName);
  const table = outputs.get(OUTPUTS.dedupTableName);
  return {
    name: environment,
    local: false,
    ingestUrl: output(OUTPUTS.ingestUrl),
    eventsQueueUrl: output(OUTPUTS.eventsQueueUrl),
    deadLetterQueueUrl: output(OUTPUTS.deadLetterQueueUrl),
    tokenSecretId: output(OUTPUTS.tokenSecretName),
    webhookSecretId: output(OUTPUTS.webhookSecretName),
    dashboardUrl: dashboard
      ? `https://${region}.console.aws.amazon.com/cloudwatch/home?region=${region}#dashboards/dashboard/${encodeURIComponent(dashboard)}`
      : null,
    sqs: new SQSClient(aws),
    secrets: new SecretsManagerClient(aws),
    cloudwatch: new CloudWatchClient(aws),
    ...(table === undefined ? {} : { table: { dynamodb: new DynamoDBClient(aws), name: table } }),
    outcomes: outcomesOf(
      outputs.get(OUTPUTS.outcomeTableName),
      Number(outputs.get(OUTPUTS.outcomeRetentionSeconds)),
      () => new DynamoDBClient(aws),
    ),
  };
}

/** The outcome table, when the relay has one (a version before it has none). */
function outcomesOf(
  tableName: string | undefined,
  retentionSeconds: number,
  client: () => DynamoDBClient,
): Target['outcomes'] {
  if (tableName === undefined || !Number.isInteger(retentionSeconds)) return undefined;
  return { dynamodb: client(), tableName, retentionSeconds };
}

/** The running `npm start`, from the endpoints file it keeps while it runs. */
export function localTarget(env: Readonly<Record<string, string | undefined>>): Target {
  const path = localEndpointsPath(env);
  const endpoints = readLocalEndpoints(path);
  if (!endpoints) {
    throw new SetupError(
      `No local stack is running (nothing live in ${path}): start one with "npm start" in the project directory, or set MAUTIC_RELAY_DIR to the directory it runs in.`,
    );
  }
  // The stand-ins check no signature; the SDK still wants a region and credentials.
  const local = {
    region: 'us-east-1',
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    maxAttempts: 2,
  };
  return {
    name: 'local',
    local: true,
    ingestUrl: endpoints.ingestUrl,
    eventsQueueUrl: endpoints.queueUrl,
    deadLetterQueueUrl: endpoints.deadLetterQueueUrl,
    tokenSecretId: endpoints.tokenSecretId,
    webhookSecretId: endpoints.webhookSecretId,
    dashboardUrl: null,
    mauticUrl: endpoints.mauticUrl,
    sqs: new SQSClient({ ...local, endpoint: endpoints.sqsEndpoint }),
    secrets: new SecretsManagerClient({ ...local, endpoint: endpoints.secretsEndpoint }),
    cloudwatch: undefined,
    ...(endpoints.dynamodbEndpoint === undefined || endpoints.dedupTableName === undefined
      ? {}
      : {
          table: {
            dynamodb: new DynamoDBClient({ ...local, endpoint: endpoints.dynamodbEndpoint }),
            name: endpoints.dedupTableName,
          },
        }),
    outcomes: outcomesOf(
      endpoints.dynamodbEndpoint && endpoints.outcomeTableName,
      endpoints.outcomeRetentionSeconds ?? Number.NaN,
      () => new DynamoDBClient({ ...local, endpoint: endpoints.dynamodbEndpoint ?? '' }),
    ),
  };
}

/** Lets the process end: the SDK keeps connections alive. */
export function closeTarget(target: Target): void {
  target.sqs.destroy();
  target.secrets.destroy();
  target.cloudwatch?.destroy();
  target.table?.dynamodb.destroy();
  target.outcomes?.dynamodb.destroy();
}
