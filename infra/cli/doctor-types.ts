import type { CloudFormationClient } from '@aws-sdk/client-cloudformation';
import type { LambdaClient } from '@aws-sdk/client-lambda';
import type { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import type { SNSClient } from '@aws-sdk/client-sns';
import type { SQSClient } from '@aws-sdk/client-sqs';
import type { STSClient } from '@aws-sdk/client-sts';

/* What doctor's checks share: what they talk to, what they found first, what they answer. */

/** What the checks talk to; the command passes clients of the environment's region. */
export interface DoctorDeps {
  sts: Pick<STSClient, 'send'>;
  lambda: Pick<LambdaClient, 'send'>;
  secrets: Pick<SecretsManagerClient, 'send'>;
  cloudFormation: Pick<CloudFormationClient, 'send'>;
  sqs: Pick<SQSClient, 'send'>;
  sns: Pick<SNSClient, 'send'>;
  fetch: typeof fetch;
  /** The command's environment: an AWS error is explained with it (AWS_PROFILE, config files). */
  env: Readonly<Record<string, string | undefined>>;
  now: () => number;
}

/** The checks, in the order they are reported. */
export type CheckName =
  | 'binding'
  | 'bootstrap'
  | 'concurrency'
  | 'secrets'
  | 'queues'
  | 'stack'
  | 'alarm-email'
  | 'event-source'
  | 'refresher'
  | 'mautic';

/** One check: what it looked at, whether it passed, and what it found or what to do. */
export interface DoctorCheck {
  check: CheckName;
  ok: boolean;
  detail: string;
  /** Set when the check could not run: AWS did not answer (the binding check says why). */
  unchecked?: true;
}

/** The environment's stack, if CloudFormation has one: its name, status, and whether it is up. */
export interface StackState {
  name: string;
  status: string;
  deployed: boolean;
}

/** One resource of the stack: its type, physical id (a queue's URL, a topic's ARN) and logical id. */
export interface StackResource {
  type: string;
  id: string;
  logicalId: string;
}

/** What the first calls to AWS found: whose credentials these are, and the stack. */
export interface Reached {
  caller: string;
  stack: StackState | undefined;
  /** The stack's resources, listed once, when a check first asks. */
  resources: () => Promise<StackResource[]>;
}
