import type { Stack } from 'aws-cdk-lib';
import { CfnFunction } from 'aws-cdk-lib/aws-lambda';
import { MAX_MESSAGE_BYTES } from '../../functions/core/ingest/queue-messages.ts';
import {
  environmentBytesBound,
  LAMBDA_ENVIRONMENT_BYTES,
} from '../../infra/aws/environment-size.ts';
import type { CfnTemplate } from '../support/cfn-schema.ts';

/**
 * The service limits and rules the registry schemas do not carry, as AWS documents them, checked
 * in a synthesized relay stack: each a deploy (or the relay) would fail on. A test tool.
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
  return [
    ...problems,
    ...mappingProblems(resources),
    ...concurrencyProblems(resources),
    ...alarmProblems(resources),
    ...ruleProblems(resources),
  ];
}

/** An alarm's enumerations, as PutMetricAlarm documents them (the registry has plain strings). */
const ALARM_ENUMS: ReadonlyArray<[property: string, values: ReadonlyArray<string>]> = [
  [
    'ComparisonOperator',
    [
      'GreaterThanOrEqualToThreshold',
      'GreaterThanThreshold',
      'LessThanThreshold',
      'LessThanOrEqualToThreshold',
      'LessThanLowerOrGreaterThanUpperThreshold',
      'LessThanLowerThreshold',
      'GreaterThanUpperThreshold',
    ],
  ],
  ['Statistic', ['SampleCount', 'Average', 'Sum', 'Minimum', 'Maximum']],
  ['TreatMissingData', ['breaching', 'notBreaching', 'ignore', 'missing']],
];

/**
 * Each alarm: its enumerations; its period (its own, or its metrics' in a math expression) 10,
 * 20, 30 or a multiple of 60 seconds; its whole evaluation, period × evaluation periods, at most
 * a day (7 days for periods of an hour or more); no more datapoints to alarm than periods.
 */
function alarmProblems(resources: Resources): string[] {
  const problems: string[] = [];
  for (const [id, alarm] of Object.entries(resources)) {
    if (alarm.Type !== 'AWS::CloudWatch::Alarm') continue;
    const where = `Resources.${id}.Properties`;
    const properties = (alarm.Properties ?? {}) as Record<string, unknown>;
    for (const [property, values] of ALARM_ENUMS) {
      const value = properties[property];
      if (typeof value === 'string' && !values.includes(value))
        problems.push(`${where}.${property}: ${value} is not one of ${values.join(', ')}`);
    }
    const metrics = (properties.Metrics ?? []) as Array<{ MetricStat?: { Period?: unknown } }>;
    const periods = [
      [`${where}.Period`, properties.Period],
      ...metrics.map((m, i) => [`${where}.Metrics[${i}].MetricStat.Period`, m.MetricStat?.Period]),
    ].filter((pair): pair is [string, number] => typeof pair[1] === 'number');
    for (const [path, period] of periods)
      if (![10, 20, 30].includes(period) && period % 60 !== 0)
        problems.push(`${path}: ${period} is not 10, 20, 30 or a multiple of 60 seconds`);
    const period = periods[0]?.[1];
    const evaluations = Number(properties.EvaluationPeriods);
    const most = period !== undefined && period >= 3_600 ? 604_800 : 86_400;
    if (period !== undefined && period * evaluations > most)
      problems.push(
        `${where}: ${evaluations} evaluation periods of ${period} s exceed CloudWatch's ${most} s`,
      );
    if (Number(properties.DatapointsToAlarm ?? 1) > evaluations)
      problems.push(
        `${where}.DatapointsToAlarm: ${properties.DatapointsToAlarm} exceeds EvaluationPeriods ${evaluations}`,
      );
  }
  return problems;
}

/** The resource types whose DeletionPolicy or UpdateReplacePolicy may be Snapshot. */
const SNAPSHOT_TYPES = new Set([
  'AWS::EC2::Volume',
  'AWS::ElastiCache::CacheCluster',
  'AWS::ElastiCache::ReplicationGroup',
  'AWS::RDS::DBInstance',
  'AWS::RDS::DBCluster',
  'AWS::Redshift::Cluster',
]);

/**
 * Rules of single resources the registry does not state: the policies' values; a secret made
 * with either SecretString or GenerateSecretString, never both; the queue's redrive policy (a
 * JSON property) naming its dead-letter queue and a whole maxReceiveCount; a dashboard name of
 * 1–255 letters, digits, dashes and underscores.
 */
function ruleProblems(resources: Resources): string[] {
  const problems: string[] = [];
  for (const [id, resource] of Object.entries(resources)) {
    const where = `Resources.${id}`;
    for (const [policy, allowed] of [
      ['DeletionPolicy', ['Delete', 'Retain', 'RetainExceptOnCreate', 'Snapshot']],
      ['UpdateReplacePolicy', ['Delete', 'Retain', 'Snapshot']],
    ] as const) {
      const value = resource[policy];
      if (value === undefined) continue;
      if (!(allowed as ReadonlyArray<unknown>).includes(value))
        problems.push(
          `${where}.${policy}: ${JSON.stringify(value)} is not one of ${allowed.join(', ')}`,
        );
      else if (value === 'Snapshot' && !SNAPSHOT_TYPES.has(resource.Type))
        problems.push(`${where}.${policy}: ${resource.Type} cannot be kept as a snapshot`);
    }
    const properties = (resource.Properties ?? {}) as Record<string, unknown>;
    if (
      resource.Type === 'AWS::SecretsManager::Secret' &&
      properties.SecretString !== undefined &&
      properties.GenerateSecretString !== undefined
    )
      problems.push(
        `${where}.Properties: SecretString and GenerateSecretString exclude each other`,
      );
    if (resource.Type === 'AWS::SQS::Queue' && properties.RedrivePolicy !== undefined)
      problems.push(...redrivePolicyProblems(properties.RedrivePolicy, `${where}.Properties`));
    const name = properties.DashboardName;
    if (
      resource.Type === 'AWS::CloudWatch::Dashboard' &&
      typeof name === 'string' &&
      !/^[A-Za-z0-9_-]{1,255}$/.test(name)
    )
      problems.push(
        `${where}.Properties.DashboardName: "${name}" is not 1–255 letters, digits, dashes and underscores`,
      );
  }
  return problems;
}

/** SQS's RedrivePolicy: the dead-letter queue's ARN and a whole maxReceiveCount, nothing else. */
function redrivePolicyProblems(policy: unknown, where: string): string[] {
  const value = typeof policy === 'string' ? safeJson(policy) : policy;
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    return [`${where}.RedrivePolicy: expected an object, found ${JSON.stringify(policy)}`];
  const problems = Object.keys(value)
    .filter((key) => key !== 'deadLetterTargetArn' && key !== 'maxReceiveCount')
    .map((key) => `${where}.RedrivePolicy.${key}: no such field`);
  const { deadLetterTargetArn: arn, maxReceiveCount: count } = value as Record<string, unknown>;
  if (arn === undefined || (typeof arn !== 'string' && typeof arn !== 'object'))
    problems.push(
      `${where}.RedrivePolicy.deadLetterTargetArn: the dead-letter queue's ARN is required`,
    );
  const number = typeof count === 'string' ? Number(count) : count;
  if (!Number.isInteger(number))
    problems.push(
      `${where}.RedrivePolicy.maxReceiveCount: expected an integer, found ${JSON.stringify(count)}`,
    );
  return problems;
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
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
