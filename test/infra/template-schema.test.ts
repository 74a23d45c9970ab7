import type { CfnElement } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import type { IConstruct } from 'constructs';
import { beforeAll, describe, expect, it } from 'vitest';
import type { RelayStack } from '../../infra/aws/relay-stack.ts';
import { type CfnTemplate, cloudFormationSchemas, schemaProblems } from '../support/cfn-schema.ts';
import { environments, relayStack } from './synth.ts';
import { limitProblems } from './template-limits.ts';

/**
 * Issue 26: every environment's template as CloudFormation's registry describes its resources
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
