import type { Stack } from 'aws-cdk-lib';
import { CfnFunction } from 'aws-cdk-lib/aws-lambda';
import { MAX_MESSAGE_BYTES } from '../../functions/core/ingest-steps.ts';
import {
  environmentBytesBound,
  LAMBDA_ENVIRONMENT_BYTES,
} from '../../infra/aws/environment-size.ts';
import type { CfnTemplate } from '../support/cfn-schema.ts';

/**
 * The service limits the registry schemas do not carry, as AWS documents them, checked in a
 * synthesized relay stack: each a deploy (or the relay) would fail on. A test tool.
 */

/** A property's documented range, `path` dotted into nested objects. */
const RANGES: ReadonlyArray<[type: string, path: string, min: number, max: number]> = [
  // Lambda quotas: timeout, memory; reserved concurrency is a count of executions.
  ['AWS::Lambda::Function', 'Timeout', 1, 900],
  ['AWS::Lambda::Function', 'MemorySize', 128, 10_240],
  ['AWS::Lambda::Function', 'ReservedConcurrentExecutions', 1, 1_000],
  // SQS CreateQueue attributes (1 MiB messages since August 2025), and its redrive policy.
  ['AWS::SQS::Queue', 'MaximumMessageSize', 1_024, 1_048_576],
  ['AWS::SQS::Queue', 'MessageRetentionPeriod', 60, 1_209_600],
  ['AWS::SQS::Queue', 'VisibilityTimeout', 0, 43_200],
  ['AWS::SQS::Queue', 'DelaySeconds', 0, 900],
  ['AWS::SQS::Queue', 'ReceiveMessageWaitTimeSeconds', 0, 20],
  ['AWS::SQS::Queue', 'RedrivePolicy.maxReceiveCount', 1, 1_000],
  // An SQS event source: at most 10 messages from a FIFO queue, and 2 to 1000 concurrent.
  ['AWS::Lambda::EventSourceMapping', 'BatchSize', 1, 10],
  ['AWS::Lambda::EventSourceMapping', 'ScalingConfig.MaximumConcurrency', 2, 1_000],
];

/** Lambda keeps this much of an account's concurrency unreserved. */
const MIN_UNRESERVED_CONCURRENCY = 100;
/** Lambda's default concurrency quota per region: shipped environments must deploy within it. */
const DEFAULT_CONCURRENCY_QUOTA = 1_000;

type Resources = NonNullable<CfnTemplate['Resources']>;

/** Every limit `stack` (synthesized as `template`) breaks, each `<path>: <what>`. */
export function limitProblems(stack: Stack, template: CfnTemplate): string[] {
  const resources: Resources = template.Resources ?? {};
  const problems: string[] = [];
  for (const [id, resource] of Object.entries(resources)) {
    for (const [type, path, min, max] of RANGES) {
      const value = resource.Type === type ? at(resource.Properties, path) : undefined;
      if (typeof value === 'number' && (value < min || value > max))
        problems.push(`Resources.${id}.Properties.${path}: ${value} is outside ${min}–${max}`);
    }
  }
  for (const fn of stack.node.findAll().filter((c): c is CfnFunction => c instanceof CfnFunction)) {
    const { total } = environmentBytesBound(fn);
    if (total > LAMBDA_ENVIRONMENT_BYTES)
      problems.push(
        `Resources.${stack.getLogicalId(fn)}.Properties.Environment: up to ${total} bytes, over Lambda's ${LAMBDA_ENVIRONMENT_BYTES}`,
      );
  }
  return [...problems, ...mappingProblems(resources), ...concurrencyProblems(resources)];
}

/**
 * An SQS event source: the function's timeout within the queue's visibility timeout (Lambda
 * refuses the mapping otherwise), its reserved concurrency no lower than the mapping's maximum
 * (the rest would be throttled), and the queue taking the largest message the ingest sends.
 */
function mappingProblems(resources: Resources): string[] {
  const problems: string[] = [];
  for (const [id, mapping] of Object.entries(resources)) {
    if (mapping.Type !== 'AWS::Lambda::EventSourceMapping') continue;
    const fn = resources[String(at(mapping.Properties, 'FunctionName.Ref'))]?.Properties;
    const queue =
      resources[String(at(mapping.Properties, 'EventSourceArn.Fn::GetAtt.0'))]?.Properties;
    const timeout = at(fn, 'Timeout') ?? 3;
    const visibility = at(queue, 'VisibilityTimeout') ?? 30;
    if (Number(timeout) > Number(visibility))
      problems.push(
        `Resources.${id}: the function's timeout ${timeout} s exceeds the queue's visibility timeout ${visibility} s`,
      );
    const reserved = at(fn, 'ReservedConcurrentExecutions');
    const maximum = at(mapping.Properties, 'ScalingConfig.MaximumConcurrency');
    if (reserved !== undefined && maximum !== undefined && Number(reserved) < Number(maximum))
      problems.push(
        `Resources.${id}: the function reserves ${reserved}, below the mapping's MaximumConcurrency ${maximum}`,
      );
    const size = at(queue, 'MaximumMessageSize') ?? 262_144;
    if (Number(size) < MAX_MESSAGE_BYTES)
      problems.push(
        `Resources.${id}: the queue takes messages of ${size} bytes, under the ingest's ${MAX_MESSAGE_BYTES}`,
      );
  }
  return problems;
}

/** All reservations together leave Lambda's 100 unreserved within the default quota. */
function concurrencyProblems(resources: Resources): string[] {
  const reserved = Object.values(resources)
    .map((resource) => at(resource.Properties, 'ReservedConcurrentExecutions'))
    .reduce<number>((sum, value) => sum + (typeof value === 'number' ? value : 0), 0);
  return reserved + MIN_UNRESERVED_CONCURRENCY > DEFAULT_CONCURRENCY_QUOTA
    ? [
        `Resources: the functions reserve ${reserved}, leaving under ${MIN_UNRESERVED_CONCURRENCY} of the default quota of ${DEFAULT_CONCURRENCY_QUOTA}`,
      ]
    : [];
}

/** The value at a dotted path, or undefined. */
function at(value: unknown, path: string): unknown {
  return path
    .split('.')
    .reduce<unknown>(
      (node, key) =>
        typeof node === 'object' && node !== null
          ? (node as Record<string, unknown>)[key]
          : undefined,
      value,
    );
}
