import type { CfnElement } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import type { IConstruct } from 'constructs';
import { beforeAll, describe, expect, it } from 'vitest';
import type { RelayStack } from '../../infra/aws/relay-stack.ts';
import { type CfnTemplate, cloudFormationSchemas, schemaProblems } from '../support/cfn-schema.ts';
import { environments, relayStack } from './synth.ts';
import { limitProblems } from './template-limits.ts';

/**
 * Every environment's template as CloudFormation's registry describes its resources
 * (`@aws-cdk/aws-service-spec`), and within the service limits the registry does not carry.
 */

let db: Awaited<ReturnType<typeof cloudFormationSchemas>>;

beforeAll(async () => {
  db = await cloudFormationSchemas();
});

const synthesized = (stack: RelayStack) => Template.fromStack(stack).toJSON() as CfnTemplate;
const idOf = (stack: RelayStack, construct: IConstruct) =>
  stack.getLogicalId(construct.node.defaultChild as CfnElement);

describe('the synthesized templates against the CloudFormation registry schemas', () => {
  it.each(Object.keys(environments))(
    '%s: known types and properties, right value types, required fields, live references, within the limits',
    (name) => {
      const { stack } = relayStack(name);
      const template = synthesized(stack);

      expect(Object.keys(template.Resources ?? {}).length).toBeGreaterThan(40);
      expect(schemaProblems(db, template)).toEqual([]);
      expect(limitProblems(stack, template)).toEqual([]);
    },
  );

  it('reports a deliberately wrong template, one problem of each kind', () => {
    const { stack } = relayStack('dev');
    const template = synthesized(stack);
    const resources = template.Resources ?? {};
    const queue = idOf(stack, stack.eventsQueue);
    const refresh = idOf(stack, stack.refresh.function);
    const mapping = Object.keys(resources).find(
      (id) => resources[id]?.Type === 'AWS::Lambda::EventSourceMapping',
    ) as string;
    const properties = (id: string) => resources[id]?.Properties as Record<string, unknown>;

    properties(queue).MaxMessageSize = 1024;
    properties(refresh).Timeout = 'half a minute';
    delete properties(refresh).Role;
    properties(mapping).ScalingConfig = { MaximumConcurrency: 2, MinimumConcurrency: 1 };
    properties(refresh).Environment = { Variables: { PLAIN: { nested: true } } };
    resources.Extra = { Type: 'AWS::SQS::Queues', DependsOn: 'Ghost' };
    resources.Topic = {
      Type: 'AWS::SNS::Topic',
      // biome-ignore lint/suspicious/noTemplateCurlyInString: Fn::Sub's own placeholders.
      Properties: { DisplayName: { 'Fn::Sub': '${Nowhere.Arn}-${AWS::Region}' } },
    };
    template.Outputs = {
      Gone: { Value: { Ref: 'NoSuchFunction' } },
      QueueArn: { Value: { 'Fn::GetAtt': [queue, 'QueueArn'] } },
    };

    expect(new Set(schemaProblems(db, template))).toEqual(
      new Set([
        `Resources.${queue}.Properties.MaxMessageSize: no such property`,
        `Resources.${refresh}.Properties: Role is required`,
        `Resources.${refresh}.Properties.Timeout: expected an integer, found "half a minute"`,
        `Resources.${refresh}.Properties.Environment.Variables.PLAIN: expected a string, found {"nested":true}`,
        `Resources.${mapping}.Properties.ScalingConfig.MinimumConcurrency: no such property`,
        'Resources.Extra.Type: AWS::SQS::Queues is no CloudFormation resource type',
        'Resources.Extra.DependsOn: names no resource: "Ghost"',
        'Resources.Topic.Properties.DisplayName: Fn::GetAtt names no resource: Nowhere',
        'Outputs.Gone.Value: Ref names no resource or parameter: "NoSuchFunction"',
        `Outputs.QueueArn.Value: AWS::SQS::Queue has no attribute QueueArn (Fn::GetAtt ${queue})`,
      ]),
    );
  });

  it('reports what the registry leaves to the documentation: allowed values, alarm periods and windows, JSON fields, exclusive properties, policies, names', () => {
    const { stack } = relayStack('dev');
    const template = synthesized(stack);
    const resources = template.Resources ?? {};
    const first = (type: string, prefix = '') =>
      Object.keys(resources).find(
        (id) => resources[id]?.Type === type && id.startsWith(prefix),
      ) as string;
    const properties = (id: string) => resources[id]?.Properties as Record<string, unknown>;
    const [logs, ageAlarm, callsAlarm, webhook, queue, dashboard] = [
      first('AWS::Logs::LogGroup'),
      first('AWS::CloudWatch::Alarm', 'RetriedEventAgeAlarm'),
      first('AWS::CloudWatch::Alarm', 'MauticCallsFailedAlarm'),
      first('AWS::SecretsManager::Secret', 'WebhookSecret'),
      idOf(stack, stack.eventsQueue),
      first('AWS::CloudWatch::Dashboard'),
    ];

    properties(logs).RetentionInDays = 13;
    Object.assign(properties(ageAlarm), {
      ComparisonOperator: 'GreaterThan',
      Statistic: 'Max',
      TreatMissingData: 'notbreaching',
      Period: 45,
    });
    Object.assign(properties(callsAlarm), { EvaluationPeriods: 97, DatapointsToAlarm: 98 });
    properties(webhook).SecretString = '{}';
    properties(queue).RedrivePolicy = { maxReceiveCount: 'five', maxReceives: 5 };
    Object.assign(resources[queue] ?? {}, {
      DeletionPolicy: 'Keep',
      UpdateReplacePolicy: 'Snapshot',
    });
    properties(dashboard).DashboardName = 'MauticRelay dev/us-east-1';

    expect(schemaProblems(db, template)).toEqual([
      `Resources.${logs}.Properties.RetentionInDays: expected one of 1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653, found 13`,
    ]);
    expect(new Set(limitProblems(stack, template))).toEqual(
      new Set([
        `Resources.${ageAlarm}.Properties.ComparisonOperator: GreaterThan is not one of GreaterThanOrEqualToThreshold, GreaterThanThreshold, LessThanThreshold, LessThanOrEqualToThreshold, LessThanLowerOrGreaterThanUpperThreshold, LessThanLowerThreshold, GreaterThanUpperThreshold`,
        `Resources.${ageAlarm}.Properties.Statistic: Max is not one of SampleCount, Average, Sum, Minimum, Maximum`,
        `Resources.${ageAlarm}.Properties.TreatMissingData: notbreaching is not one of breaching, notBreaching, ignore, missing`,
        `Resources.${ageAlarm}.Properties.Period: 45 is not 10, 20, 30 or a multiple of 60 seconds`,
        `Resources.${callsAlarm}.Properties: 97 evaluation periods of 900 s exceed CloudWatch's 86400 s`,
        `Resources.${callsAlarm}.Properties.DatapointsToAlarm: 98 exceeds EvaluationPeriods 97`,
        `Resources.${webhook}.Properties: SecretString and GenerateSecretString exclude each other`,
        `Resources.${queue}.Properties.RedrivePolicy.maxReceives: no such field`,
        `Resources.${queue}.Properties.RedrivePolicy.deadLetterTargetArn: the dead-letter queue's ARN is required`,
        `Resources.${queue}.Properties.RedrivePolicy.maxReceiveCount: expected an integer, found "five"`,
        `Resources.${queue}.DeletionPolicy: "Keep" is not one of Delete, Retain, RetainExceptOnCreate, Snapshot`,
        `Resources.${queue}.UpdateReplacePolicy: AWS::SQS::Queue cannot be kept as a snapshot`,
        `Resources.${dashboard}.Properties.DashboardName: "MauticRelay dev/us-east-1" is not 1–255 letters, digits, dashes and underscores`,
      ]),
    );
    // A math alarm's metrics have the periods.
    const metrics = properties(callsAlarm).Metrics as Array<{ MetricStat?: { Period: number } }>;
    for (const metric of metrics) if (metric.MetricStat) metric.MetricStat.Period = 90;
    expect(limitProblems(stack, template)).toContainEqual(
      `Resources.${callsAlarm}.Properties.Metrics[1].MetricStat.Period: 90 is not 10, 20, 30 or a multiple of 60 seconds`,
    );
  });

  it('reports a stack beyond the service limits', () => {
    const { stack } = relayStack('prod');
    const template = synthesized(stack);
    const [batch, refresh, queue] = [
      stack.batch.function,
      stack.refresh.function,
      stack.eventsQueue,
    ].map((construct) => idOf(stack, construct));
    const mapping = Object.keys(template.Resources ?? {}).find((id) =>
      id.startsWith('BatchFunctionSqsEventSource'),
    );
    // In the template: CDK's own synth validation refuses some of these (as it does a 901 s
    // timeout) before any template exists.
    const properties = (id = '') => template.Resources?.[id]?.Properties as Record<string, unknown>;
    properties(refresh).Timeout = 901;
    properties(batch).ReservedConcurrentExecutions = 1;
    properties(queue).MaximumMessageSize = 262_144;
    // The environment is read, as deployed, from the function's construct (synth refuses this too).
    stack.batch.function.addEnvironment('PADDING', 'x'.repeat(4096));

    const problems = limitProblems(stack, template);

    expect(problems).toEqual([
      `Resources.${refresh}.Properties.Timeout: 901 is outside 1–900`,
      expect.stringMatching(
        new RegExp(
          `^Resources\\.${batch}\\.Properties\\.Environment: up to \\d+ bytes, over Lambda's 4096$`,
        ),
      ),
      `Resources.${mapping}: the function reserves 1, below the mapping's MaximumConcurrency 2`,
      `Resources.${mapping}: the queue takes messages of 262144 bytes, under the ingest's 1032192`,
    ]);
    // Reservations beyond what the default quota leaves: 1 + 950, and Lambda's 100.
    const crowded = relayStack('prod', { maxConcurrency: 950 }).stack;
    expect(limitProblems(crowded, synthesized(crowded))).toEqual([
      'Resources: the functions reserve 951, leaving under 100 of the default quota of 1000',
    ]);
  });
});
