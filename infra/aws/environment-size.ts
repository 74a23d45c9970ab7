import { CfnResource, Stack, Token } from 'aws-cdk-lib';
import type { CfnFunction } from 'aws-cdk-lib/aws-lambda';
import type { IConstruct } from 'constructs';

/** Lambda's limit on all of one function's environment variables together, names and values. */
export const LAMBDA_ENVIRONMENT_BYTES = 4096;

/*
 * A value CloudFormation fills in at deploy time (a queue's URL, a table's name, a secret's ARN)
 * is not known at synth, so each is counted at the longest it can be. AWS documents the
 * formats; the parts left open are bounded by their documented maxima: a region name (at most
 * 15 characters today, e.g. us-isof-south-1), an account id (12), a queue name (80), a generated
 * physical name (`<stack>-<logical id>-<13 random>`), a secret's 6-character suffix. Lambda
 * measures the variables as JSON, so a `"` or `\` in a value counts twice.
 */
const LONGEST_REGION = 15;
const LONGEST_PARTITION = 'aws-us-gov'.length;
const ACCOUNT = 12;
const LONGEST_QUEUE_NAME = 80;
const GENERATED_SUFFIX = 1 + 13;
/** Any other deploy-time value: a name or an ARN of a common length. */
const OTHER_DEPLOY_TIME_VALUE = 256;

/**
 * The most bytes `fn`'s environment can take once deployed, as JSON (`{"NAME":"value",…}`,
 * which counts a little more than Lambda does), and each variable's share, largest first.
 */
export function environmentBytesBound(fn: CfnFunction): {
  total: number;
  variables: Array<{ name: string; bytes: number }>;
} {
  const stack = Stack.of(fn);
  const resolved = stack.resolve(fn.environment) as { variables?: Record<string, unknown> };
  const variables = Object.entries(resolved?.variables ?? {}).map(([name, value]) => ({
    name,
    bytes:
      typeof value === 'string'
        ? Buffer.byteLength(JSON.stringify(value)) - 2
        : deployTimeBound(stack, value),
  }));
  const total = variables.reduce(
    // "NAME":"value" and a comma each, and the braces less one comma.
    (sum, variable) => sum + Buffer.byteLength(variable.name) + variable.bytes + 6,
    1,
  );
  return { total, variables: variables.sort((a, b) => b.bytes - a.bytes) };
}

/** The longest a `{ Ref: … }` value can resolve to, by the type of the resource it names. */
function deployTimeBound(stack: Stack, value: unknown): number {
  const ref = (value as { Ref?: unknown } | null)?.Ref;
  if (typeof ref !== 'string') return OTHER_DEPLOY_TIME_VALUE;
  const resource = resourceOf(stack, ref);
  if (resource === undefined) return OTHER_DEPLOY_TIME_VALUE;
  const region = Token.isUnresolved(stack.region) ? LONGEST_REGION : stack.region.length;
  const generatedName = stack.stackName.length + 1 + ref.length + GENERATED_SUFFIX;
  switch (resource.cfnResourceType) {
    case 'AWS::SQS::Queue':
      // https://sqs.<region>.amazonaws.com[.cn]/<account>/<name>
      return `https://sqs..amazonaws.com.cn//`.length + region + ACCOUNT + LONGEST_QUEUE_NAME;
    case 'AWS::DynamoDB::Table':
      return Math.min(255, generatedName);
    case 'AWS::Lambda::Function':
      return Math.min(64, generatedName);
    case 'AWS::SecretsManager::Secret': {
      // arn:<partition>:secretsmanager:<region>:<account>:secret:<name>-<6 characters>
      const secretName = stack.resolve((resource as unknown as { name?: unknown }).name);
      const nameBytes = typeof secretName === 'string' ? secretName.length : 512;
      return (
        `arn::secretsmanager:::secret:-123456`.length +
        LONGEST_PARTITION +
        region +
        ACCOUNT +
        nameBytes
      );
    }
    default:
      return OTHER_DEPLOY_TIME_VALUE;
  }
}

function resourceOf(stack: Stack, logicalId: string): CfnResource | undefined {
  return stack.node
    .findAll()
    .find(
      (construct: IConstruct): construct is CfnResource =>
        CfnResource.isCfnResource(construct) && stack.resolve(construct.logicalId) === logicalId,
    );
}

/** Where a large variable comes from, for the message that refuses it. */
const SETTING_OF: Readonly<Record<string, string>> = {
  SOURCES_DOCUMENT:
    "the environment's sources in cdk.json (shorten the expressions or drop a source)",
  ENTITIES: 'entities in cdk.json (list fewer, or "standard")',
  CONTACT_MATCH_FIELDS: 'contactMatchFields in cdk.json',
  MAUTIC_BASE_URL: 'mauticBaseUrl in cdk.json',
};

/**
 * `cdk synth` refuses a function whose environment could pass Lambda's limit once deployed,
 * naming the largest variables and the settings they come from: CloudFormation would refuse it
 * half-way through a deploy.
 */
export function checkEnvironmentSize(fn: CfnFunction, label: string): string[] {
  const { total, variables } = environmentBytesBound(fn);
  if (total <= LAMBDA_ENVIRONMENT_BYTES) return [];
  const largest = variables
    .slice(0, 3)
    .map(({ name, bytes }) => `${name} ${bytes}${SETTING_OF[name] ? `: ${SETTING_OF[name]}` : ''}`);
  return [
    `The ${label} function's environment could take ${total} bytes once deployed, over Lambda's ${LAMBDA_ENVIRONMENT_BYTES} for all of a function's variables; the largest: ${largest.join('; ')}`,
  ];
}
