import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { App, Validations } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { AwsSolutionsChecks } from 'cdk-nag';
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { OUTPUTS } from '../../infra/cli/target.ts';

afterEach(() => {
  vi.restoreAllMocks();
});

import { retryDelaySeconds, retryPolicy } from '../../functions/core/retry-policy.ts';
import {
  loadBatchConfig,
  loadIngestConfig,
  loadRefreshConfig,
} from '../../functions/shared/config.ts';
import { LAMBDA_ENVIRONMENT_BYTES } from '../../infra/aws/environment-size.ts';
import { environmentSettings } from '../../infra/aws/environments.ts';
import { acknowledgeFindings } from '../../infra/aws/nag.ts';
import { INGEST_5XX_ALARM } from '../../infra/aws/observability.ts';
import { RelayStack } from '../../infra/aws/relay-stack.ts';
import { environments, relayStack } from './synth.ts';

const run = promisify(execFile);

function synth(
  name = 'dev',
  overrides: Record<string, unknown> = {},
  options: { acknowledge?: boolean } = {},
) {
  const { app, stack, settings } = relayStack(name, overrides);
  if (options.acknowledge !== false) acknowledgeFindings(stack);
  return { app, stack, settings, template: Template.fromStack(stack) };
}

/** Each IAM statement granted to the role whose logical id starts with `rolePrefix`, with resources named by logical id. */
function statementsOf(
  template: Template,
  rolePrefix: string,
): Array<{ actions: string[]; resources: string[] }> {
  const roles = Object.keys(template.findResources('AWS::IAM::Role')).filter((id) =>
    id.startsWith(rolePrefix),
  );
  expect(roles).toHaveLength(1);
  const policies = Object.values(template.findResources('AWS::IAM::Policy')).filter((policy) =>
    (policy.Properties.Roles as Array<{ Ref: string }>).some((role) => role.Ref === roles[0]),
  );
  const name = (resource: unknown): string => {
    const value = resource as { Ref?: string; 'Fn::GetAtt'?: [string, string] };
    if (value.Ref) return value.Ref;
    if (value['Fn::GetAtt']) return value['Fn::GetAtt'][0];
    return JSON.stringify(resource);
  };
  return (
    policies
      .flatMap(
        (policy) =>
          policy.Properties.PolicyDocument.Statement as Array<{
            Action: string | string[];
            Resource: unknown;
          }>,
      )
      // One per resource: with the recommended feature flags (cdk.json) CDK merges statements of
      // the same actions into one, which grants the same.
      .flatMap((statement) =>
        [statement.Resource]
          .flat()
          .map(name)
          .map((id) => ({
            actions: [statement.Action].flat().sort(),
            resources: [id.replace(/[0-9A-F]{8}$/, '')],
          })),
      )
      .sort(
        (a, b) =>
          a.actions.join().localeCompare(b.actions.join()) ||
          a.resources.join().localeCompare(b.resources.join()),
      )
  );
}

describe('the relay stack', () => {
  let template: Template;
  let settings: ReturnType<typeof synth>['settings'];

  beforeAll(() => {
    ({ template, settings } = synth());
  });

  it('feeds the batch function from the FIFO queue 10 at a time, with partial batch responses and concurrency from config, and no batching window', () => {
    template.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
      FunctionResponseTypes: ['ReportBatchItemFailures'],
      BatchSize: 10,
      MaximumBatchingWindowInSeconds: Match.absent(),
      ScalingConfig: { MaximumConcurrency: settings.maxConcurrency },
    });
    // Never more than one Mautic call's worth.
    synth('dev', { batchSize: 5 }).template.hasResourceProperties(
      'AWS::Lambda::EventSourceMapping',
      { BatchSize: 5 },
    );
  });

  it('lets the batch function gather its batch size itself, for the batching window of the settings', () => {
    for (const [batchSize, batchingWindowSeconds] of [
      [200, settings.batchingWindowSeconds],
      [50, 3],
    ] as const) {
      const { template: t } = synth('dev', { batchSize, batchingWindowSeconds });
      const variables = Object.values(t.findResources('AWS::Lambda::Function')).find(
        (fn) => fn.Properties.Environment.Variables.POWERTOOLS_SERVICE_NAME === 'batch',
      )?.Properties.Environment.Variables as Record<string, unknown>;
      expect(variables).toMatchObject({
        BATCH_SIZE: String(batchSize),
        BATCH_WINDOW_SECONDS: String(batchingWindowSeconds),
      });
      const config = loadBatchConfig(
        Object.fromEntries(
          Object.entries(variables).map(([n, v]) => [n, typeof v === 'string' ? v : 'resolved']),
        ),
      );
      expect(config).toMatchObject({ batchSize, batchWindowSeconds: batchingWindowSeconds });
    }
  });

  it('makes the events and dead-letter queues FIFO, deduplicating by explicit id and throttling per message group', () => {
    const queues = template.findResources('AWS::SQS::Queue');
    expect(
      Object.keys(queues)
        .map((id) => id.replace(/[0-9A-F]{8}$/, ''))
        .sort(),
    ).toEqual(['DeadLetterQueue', 'EventsQueue']);
    for (const queue of Object.values(queues)) {
      expect(queue.Properties).toMatchObject({
        FifoQueue: true,
        ContentBasedDeduplication: false,
        DeduplicationScope: 'messageGroup',
        FifoThroughputLimit: 'perMessageGroupId',
      });
      // CloudFormation names a FIFO queue itself, with the .fifo suffix SQS requires.
      expect(queue.Properties.QueueName).toBeUndefined();
    }
    const events = Object.values(queues).find((q) => q.Properties.RedrivePolicy);
    const deadLetterId = Object.keys(queues).find((id) => id.startsWith('DeadLetterQueue'));
    expect(events?.Properties.RedrivePolicy.deadLetterTargetArn).toEqual({
      'Fn::GetAtt': [deadLetterId, 'Arn'],
    });
  });

  it('gives the events queue a visibility timeout of at least 6 times the batch function timeout', () => {
    const batch = Object.values(template.findResources('AWS::Lambda::Function')).find(
      (fn) => fn.Properties.Environment.Variables.POWERTOOLS_SERVICE_NAME === 'batch',
    );
    const queue = Object.values(template.findResources('AWS::SQS::Queue')).find(
      (q) => q.Properties.RedrivePolicy,
    );
    expect(queue?.Properties.VisibilityTimeout).toBeGreaterThanOrEqual(
      6 * batch?.Properties.Timeout,
    );
  });

  it('keeps events a day beyond the retry horizon and dead letters 14 days; maxReceiveCount outlasts the horizon', () => {
    for (const hours of [1, 24, 96, 13 * 24]) {
      const { template: t } = synth('dev', {
        retryHorizonHours: hours,
        retryMaxDelaySeconds: 3600,
      });
      const queues = Object.values(t.findResources('AWS::SQS::Queue'));
      const events = queues.find((q) => q.Properties.RedrivePolicy);
      const dead = queues.find((q) => !q.Properties.RedrivePolicy);
      const horizon = hours * 3600;
      expect(dead?.Properties.MessageRetentionPeriod).toBe(14 * 86_400);
      expect(events?.Properties.MessageRetentionPeriod).toBeGreaterThanOrEqual(
        Math.min(14 * 86_400, horizon + 86_400),
      );
      expect(events?.Properties.MessageRetentionPeriod).toBeLessThanOrEqual(
        dead?.Properties.MessageRetentionPeriod,
      );
      const policy = retryPolicy({
        baseSeconds: 30,
        maxDelaySeconds: 3600,
        horizonSeconds: horizon,
      });
      expect(events?.Properties.RedrivePolicy.maxReceiveCount).toBe(policy.maxReceiveCount);
      // Even with every delay as short as the jitter allows, the horizon ends first.
      let elapsed = 0;
      let receives = 1;
      while (elapsed < horizon) elapsed += retryDelaySeconds(policy, receives++, 0);
      expect(policy.maxReceiveCount).toBeGreaterThan(receives);
    }
  });

  it('gives the batch function the retry settings and, with reservedConcurrency, reserves at least the event source’s maximum concurrency', () => {
    for (const maxConcurrency of [2, 7]) {
      const { template: t, settings: s } = synth('dev', {
        maxConcurrency,
        reservedConcurrency: true,
      });
      const batch = Object.values(t.findResources('AWS::Lambda::Function')).find(
        (fn) => fn.Properties.Environment.Variables.POWERTOOLS_SERVICE_NAME === 'batch',
      );
      expect(batch?.Properties.ReservedConcurrentExecutions).toBeGreaterThanOrEqual(maxConcurrency);
      const variables = batch?.Properties.Environment.Variables as Record<string, unknown>;
      const config = loadBatchConfig(
        Object.fromEntries(
          Object.entries(variables).map(([n, v]) => [n, typeof v === 'string' ? v : 'resolved']),
        ),
      );
      expect(config.retry).toMatchObject({
        baseSeconds: s.retryBaseSeconds,
        maxDelaySeconds: s.retryMaxDelaySeconds,
        horizonSeconds: s.retryHorizonHours * 3600,
      });
    }
  });

  it('retains queues, secrets, the de-duplication and outcome tables on deletion or replacement unless the environment lets them go, and not after a failed first deploy', () => {
    const kinds = ['AWS::SQS::Queue', 'AWS::SecretsManager::Secret', 'AWS::DynamoDB::Table'];
    const policies = (t: Template) =>
      kinds.flatMap((kind) =>
        Object.values(t.findResources(kind)).map((r) => [r.DeletionPolicy, r.UpdateReplacePolicy]),
      );
    expect(policies(synth('prod').template)).toEqual(
      Array(7).fill(['RetainExceptOnCreate', 'Retain']),
    );
    expect(policies(synth('prod', { retainData: false }).template)).toEqual(
      Array(7).fill(['Delete', 'Delete']),
    );
    expect(environments.prod?.retainData).toBe(true);
  });

  it('encrypts both queues and refuses non-TLS access to them', () => {
    template.resourcePropertiesCountIs('AWS::SQS::Queue', { SqsManagedSseEnabled: true }, 2);
    template.resourcePropertiesCountIs(
      'AWS::SQS::QueuePolicy',
      {
        PolicyDocument: {
          Statement: Match.arrayWith([
            Match.objectLike({
              Effect: 'Deny',
              Condition: { Bool: { 'aws:SecureTransport': 'false' } },
            }),
          ]),
        },
      },
      2,
    );
  });

  it('runs the refresher on its schedule, with reserved concurrency 1 where the environment reserves', () => {
    template.hasResourceProperties('AWS::Events::Rule', {
      ScheduleExpression: settings.refreshSchedule,
    });
    const reserved = (t: Template) =>
      Object.fromEntries(
        Object.values(t.findResources('AWS::Lambda::Function'))
          .filter((fn) => fn.Properties.Environment?.Variables?.POWERTOOLS_SERVICE_NAME)
          .map((fn) => [
            fn.Properties.Environment.Variables.POWERTOOLS_SERVICE_NAME,
            fn.Properties.ReservedConcurrentExecutions,
          ]),
      );

    // Off by default for dev: a new account's quota (often 10 or 50) could not hold it.
    expect(environments.dev?.reservedConcurrency).toBe(false);
    expect(reserved(template)).toEqual({ batch: undefined, ingest: undefined, refresh: undefined });
    expect(environments.prod?.reservedConcurrency).toBe(true);
    expect(reserved(synth('prod').template)).toEqual({
      batch: environments.prod?.maxConcurrency,
      ingest: undefined,
      refresh: 1,
    });
  });

  it('builds every function for nodejs24.x on arm64 with its own log group and Powertools settings', () => {
    const functions = Object.values(template.findResources('AWS::Lambda::Function')).filter(
      (fn) => fn.Properties.Environment?.Variables?.POWERTOOLS_SERVICE_NAME,
    );
    expect(
      functions.map((fn) => fn.Properties.Environment.Variables.POWERTOOLS_SERVICE_NAME).sort(),
    ).toEqual(['batch', 'ingest', 'refresh']);
    for (const fn of functions) {
      expect(fn.Properties).toMatchObject({
        Runtime: 'nodejs24.x',
        Architectures: ['arm64'],
        LoggingConfig: { LogGroup: expect.anything() },
      });
      expect(fn.Properties.Environment.Variables).toMatchObject({
        POWERTOOLS_METRICS_NAMESPACE: 'MauticBatchRelay/dev',
        POWERTOOLS_LOG_LEVEL: settings.logLevel,
      });
      // Source maps are not loaded at INIT (infra/aws/relay-function.ts says why).
      expect(fn.Properties.Environment.Variables.NODE_OPTIONS).toBeUndefined();
    }
    template.resourcePropertiesCountIs(
      'AWS::Logs::LogGroup',
      { RetentionInDays: settings.logRetentionDays },
      4,
    );
  });

  it('grants each function exactly its own actions on its own resources', () => {
    const logs = (group: string) => ({
      actions: ['logs:CreateLogStream', 'logs:PutLogEvents'],
      resources: [group],
    });
    expect(statementsOf(template, 'IngestRole')).toEqual([
      // Each accepted event's queued outcome, and GET /events' reads: batch calls, nothing else.
      {
        actions: ['dynamodb:BatchGetItem', 'dynamodb:BatchWriteItem'],
        resources: ['OutcomeTable'],
      },
      {
        actions: [
          'dynamodb:DeleteItem',
          'dynamodb:GetItem',
          'dynamodb:PutItem',
          'dynamodb:UpdateItem',
        ],
        resources: ['DedupTable'],
      },
      logs('IngestLogs'),
      { actions: ['secretsmanager:GetSecretValue'], resources: ['WebhookSecret'] },
      { actions: ['sqs:SendMessage'], resources: ['EventsQueue'] },
    ]);
    expect(statementsOf(template, 'BatchRole')).toEqual([
      // Each batch's outcomes: written in BatchWriteItem calls, never read.
      { actions: ['dynamodb:BatchWriteItem'], resources: ['OutcomeTable'] },
      // The action ledger: exactly the item actions it uses, on the de-duplication table.
      {
        actions: [
          'dynamodb:DeleteItem',
          'dynamodb:GetItem',
          'dynamodb:PutItem',
          'dynamodb:UpdateItem',
        ],
        resources: ['DedupTable'],
      },
      { actions: ['lambda:InvokeFunction'], resources: ['RefreshFunction'] },
      logs('BatchLogs'),
      { actions: ['secretsmanager:GetSecretValue'], resources: ['TokenSecret'] },
      {
        actions: [
          'sqs:ChangeMessageVisibility',
          'sqs:DeleteMessage',
          'sqs:GetQueueAttributes',
          'sqs:GetQueueUrl',
          'sqs:ReceiveMessage',
        ],
        resources: ['EventsQueue'],
      },
      { actions: ['sqs:SendMessage'], resources: ['DeadLetterQueue'] },
    ]);
    expect(statementsOf(template, 'RefreshRole')).toEqual([
      logs('RefreshLogs'),
      { actions: ['secretsmanager:GetSecretValue'], resources: ['ClientSecret'] },
      {
        actions: [
          'secretsmanager:GetSecretValue',
          'secretsmanager:PutSecretValue',
          'secretsmanager:UpdateSecretVersionStage',
        ],
        resources: ['TokenSecret'],
      },
    ]);
  });

  it('names the secrets after the environment and starts the webhook secret with a generated key', () => {
    for (const name of ['client', 'token', 'webhook']) {
      template.hasResourceProperties('AWS::SecretsManager::Secret', {
        Name: `MauticRelay/dev/${name}`,
      });
    }
    template.hasResourceProperties('AWS::SecretsManager::Secret', {
      Name: 'MauticRelay/dev/webhook',
      GenerateSecretString: {
        GenerateStringKey: 'generatedSecret',
        PasswordLength: 32,
        ExcludePunctuation: true,
      },
    });
  });

  it('routes POST /events to the ingest function, throttles the stage and logs access', () => {
    template.hasResourceProperties('AWS::ApiGatewayV2::Route', { RouteKey: 'POST /events' });
    template.hasResourceProperties('AWS::ApiGatewayV2::Stage', {
      StageName: '$default',
      DefaultRouteSettings: {
        ThrottlingRateLimit: settings.apiThrottle.rateLimit,
        ThrottlingBurstLimit: settings.apiThrottle.burstLimit,
      },
      AccessLogSettings: { DestinationArn: Match.anyValue(), Format: Match.anyValue() },
    });
  });

  it('routes POST /sources/{name} (and GET /events) to the ingest function, through the integration of /events', () => {
    const routes = Object.values(template.findResources('AWS::ApiGatewayV2::Route')).map(
      (route) => route.Properties,
    );
    expect(routes.map((route) => route.RouteKey).sort()).toEqual([
      'GET /events',
      'GET /events/{eventId}',
      'POST /events',
      'POST /sources/{name}',
    ]);
    expect(new Set(routes.map((route) => JSON.stringify(route.Target))).size).toBe(1);
  });

  it('lets the ingest keep what a source cannot map on the dead-letter queue, only when it has sources', () => {
    const ingestOf = (synthesized: Template) =>
      Object.values(synthesized.findResources('AWS::Lambda::Function')).find(
        (fn) => fn.Properties.Environment?.Variables?.POWERTOOLS_SERVICE_NAME === 'ingest',
      )?.Properties.Environment.Variables;
    const onDeadLetterQueue = (synthesized: Template) =>
      statementsOf(synthesized, 'IngestRole').filter((statement) =>
        statement.resources.includes('DeadLetterQueue'),
      );
    const withSources = synth('dev', {
      sources: {
        'stripe-customers': {
          verify: { scheme: 'stripe' },
          map: "{ 'entity': 'contacts', 'action': 'create', 'data': { 'email': data.object.email } }",
        },
      },
    }).template;

    expect(ingestOf(template).DEAD_LETTER_QUEUE_URL).toBeUndefined();
    expect(onDeadLetterQueue(template)).toEqual([]);
    expect(ingestOf(withSources).DEAD_LETTER_QUEUE_URL).toEqual({
      Ref: expect.stringMatching(/^DeadLetterQueue/),
    });
    expect(onDeadLetterQueue(withSources)).toEqual([
      { actions: ['sqs:SendMessage'], resources: ['DeadLetterQueue'] },
    ]);
  });

  it('keeps request ids and the action ledger in an on-demand, encrypted DynamoDB table with TTL, named in the ingest and batch environments', () => {
    // And the outcome table beside it (below).
    template.resourceCountIs('AWS::DynamoDB::Table', 2);
    template.hasResource('AWS::DynamoDB::Table', {
      Properties: {
        KeySchema: [{ AttributeName: 'id', KeyType: 'HASH' }],
        AttributeDefinitions: [{ AttributeName: 'id', AttributeType: 'S' }],
        BillingMode: 'PAY_PER_REQUEST',
        TimeToLiveSpecification: { AttributeName: 'expiration', Enabled: true },
        SSESpecification: { SSEEnabled: true },
      },
      DeletionPolicy: 'Delete',
    });
    const ingest = Object.values(template.findResources('AWS::Lambda::Function')).find(
      (fn) => fn.Properties.Environment?.Variables?.POWERTOOLS_SERVICE_NAME === 'ingest',
    )?.Properties.Environment.Variables;
    expect(ingest.DEDUP_TABLE_NAME).toEqual({ Ref: expect.stringMatching(/^DedupTable/) });
    expect(ingest.DEDUP_WINDOW_SECONDS).toBe('86400');
    const batch = Object.values(template.findResources('AWS::Lambda::Function')).find(
      (fn) => fn.Properties.Environment?.Variables?.POWERTOOLS_SERVICE_NAME === 'batch',
    )?.Properties.Environment.Variables;
    expect(batch.DEDUP_TABLE_NAME).toEqual(ingest.DEDUP_TABLE_NAME);
    // "standard" leaves ENTITIES unset: the function's default is the one list.
    expect(ingest.ENTITIES).toBeUndefined();
    expect(ingest.CONTACT_MATCH_FIELDS).toBe('email');
  });

  it("keeps each event's outcome in a table of its own, keyed by event and slot#sender, swept by TTL, on demand and encrypted, named in both functions' environments", () => {
    const [outcomes, ...others] = Object.entries(template.findResources('AWS::DynamoDB::Table'))
      .filter(([id]) => id.startsWith('OutcomeTable'))
      .map(([, table]) => table);
    expect(others).toEqual([]);
    expect(outcomes).toMatchObject({
      Properties: {
        KeySchema: [
          { AttributeName: 'eventId', KeyType: 'HASH' },
          { AttributeName: 'slot', KeyType: 'RANGE' },
        ],
        BillingMode: 'PAY_PER_REQUEST',
        TimeToLiveSpecification: { AttributeName: 'expiresAt', Enabled: true },
        SSESpecification: { SSEEnabled: true },
      },
      // dev's retainData is false; prod keeps it with its other data.
      DeletionPolicy: 'Delete',
    });
    expect(outcomes?.Properties.GlobalSecondaryIndexes).toBeUndefined();
    synth('prod').template.hasResource('AWS::DynamoDB::Table', {
      Properties: { KeySchema: Match.arrayWith([{ AttributeName: 'slot', KeyType: 'RANGE' }]) },
      DeletionPolicy: 'RetainExceptOnCreate',
    });
    for (const service of ['ingest', 'batch']) {
      const variables = Object.values(template.findResources('AWS::Lambda::Function')).find(
        (fn) => fn.Properties.Environment?.Variables?.POWERTOOLS_SERVICE_NAME === service,
      )?.Properties.Environment.Variables;
      expect(variables.OUTCOME_TABLE_NAME).toEqual({
        Ref: expect.stringMatching(/^OutcomeTable/),
      });
      expect(variables.OUTCOME_RETENTION_SECONDS).toBe(String(settings.outcomeRetentionSeconds));
    }
    expect(settings.outcomeRetentionSeconds).toBe(259_200);
  });

  it('grants nothing on the outcome table when outcomeRetentionSeconds is 0', () => {
    const off = synth('dev', { outcomeRetentionSeconds: 0 }).template;
    for (const role of ['IngestRole', 'BatchRole'])
      expect(
        statementsOf(off, role).filter(({ resources }) => resources.includes('OutcomeTable')),
      ).toEqual([]);
    const variables = Object.values(off.findResources('AWS::Lambda::Function')).find(
      (fn) => fn.Properties.Environment?.Variables?.POWERTOOLS_SERVICE_NAME === 'ingest',
    )?.Properties.Environment.Variables;
    expect(variables.OUTCOME_RETENTION_SECONDS).toBe('0');
    expect(() => synth('dev', { outcomeRetentionSeconds: 2_592_001 })).toThrow(
      /outcomeRetentionSeconds/,
    );
  });

  it('takes ENTITIES and the window from the settings, and alarms on store failures', () => {
    const custom = synth('dev', {
      entities: ['contacts', 'companies'],
      contactMatchFields: ['email', 'crm_id'],
      dedupWindowSeconds: 0,
    }).template;
    const variables = Object.values(custom.findResources('AWS::Lambda::Function')).find(
      (fn) => fn.Properties.Environment?.Variables?.POWERTOOLS_SERVICE_NAME === 'ingest',
    )?.Properties.Environment.Variables;
    expect(variables.ENTITIES).toBe('contacts,companies');
    expect(variables.DEDUP_WINDOW_SECONDS).toBe('0');
    // De-duplication off keeps the table: the batch function's action ledger lives there.
    custom.resourceCountIs('AWS::DynamoDB::Table', 2);
    expect(() => synth('dev', { entities: ['campaigns/events'] })).toThrow(/entities/);
    expect(variables.CONTACT_MATCH_FIELDS).toBe('email,crm_id');
    expect(() => synth('dev', { contactMatchFields: ['CRM-ID'] })).toThrow(
      /contactMatchFields\.0 must be contact field aliases/,
    );

    template.hasResourceProperties('AWS::Logs::MetricFilter', {
      LogGroupName: { Ref: Match.stringLikeRegexp('^IngestLogs') },
      FilterPattern: '{ $.event = "dedup_store_failed" }',
      MetricTransformations: [
        {
          MetricNamespace: 'MauticBatchRelay/dev',
          MetricName: 'DedupStoreErrors',
          MetricValue: '1',
          Unit: 'Count',
        },
      ],
    });
    template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      MetricName: 'DedupStoreErrors',
      Namespace: 'MauticBatchRelay/dev',
      Statistic: 'Sum',
      Threshold: 0,
      ComparisonOperator: 'GreaterThanThreshold',
    });
  });

  it('gives the ingest its bound per record from the settings, and counts its 429s from its log', () => {
    const ingestVariables = (of: Template) =>
      Object.values(of.findResources('AWS::Lambda::Function')).find(
        (fn) => fn.Properties.Environment?.Variables?.POWERTOOLS_SERVICE_NAME === 'ingest',
      )?.Properties.Environment.Variables;
    const off = synth('dev', { maxRecordEventsPerMinute: 0 }).template;

    expect(ingestVariables(template).MAX_RECORD_EVENTS_PER_MINUTE).toBe('600');
    expect(ingestVariables(off).MAX_RECORD_EVENTS_PER_MINUTE).toBe('0');
    expect(() => synth('dev', { maxRecordEventsPerMinute: -1 })).toThrow(
      /maxRecordEventsPerMinute/,
    );
    template.hasResourceProperties('AWS::Logs::MetricFilter', {
      LogGroupName: { Ref: Match.stringLikeRegexp('^IngestLogs') },
      FilterPattern: '{ $.event = "record_backlog" }',
      MetricTransformations: [
        {
          MetricNamespace: 'MauticBatchRelay/dev',
          MetricName: 'RecordBacklogRefusals',
          MetricValue: '1',
          Unit: 'Count',
        },
      ],
    });
  });

  it('raises every alarm to the SNS topic: itself, or the composite alarm it is a part of', () => {
    const alarms = Object.values(template.findResources('AWS::CloudWatch::Alarm'));
    const metrics = alarms.map(
      (alarm) =>
        alarm.Properties.MetricName ??
        alarm.Properties.Metrics?.map((m: { Id: string }) => m.Id).join('+'),
    );
    expect(metrics.sort()).toEqual(
      [
        'expr_1+errors+requests',
        'AccessTokenSecondsLeft',
        'ApproximateAgeOfOldestMessage',
        'DeadLetterSendsFailed',
        'DedupStoreErrors',
        'ApproximateNumberOfMessagesVisible',
        'Errors',
        'EventsRetried',
        'MauticCircuitOpen',
        'expr_1+failed+calls',
        'OldestRetriedEventAge',
        'RefreshTokenSecondsLeft',
        'Throttles',
        'expr_1+failed+errors',
      ].sort(),
    );
    const topic = [{ Ref: expect.stringMatching(/^Alarms/) }];
    const composites = template.findResources('AWS::CloudWatch::CompositeAlarm');
    const rules = JSON.stringify(Object.values(composites).map((c) => c.Properties.AlarmRule));
    for (const composite of Object.values(composites))
      expect(composite.Properties.AlarmActions).toEqual(topic);
    for (const [id, alarm] of Object.entries(template.findResources('AWS::CloudWatch::Alarm'))) {
      if (alarm.Properties.AlarmActions === undefined) expect(rules).toContain(id);
      else expect(alarm.Properties.AlarmActions).toEqual(topic);
    }
    template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      MetricName: 'RefreshTokenSecondsLeft',
      Threshold: 172_800,
      ComparisonOperator: 'LessThanThreshold',
    });
    template.resourceCountIs('AWS::SNS::Subscription', 0);
    // SQS publishes a FIFO queue's metrics under its whole name, .fifo included: the name
    // CloudFormation gave it.
    for (const [metric, queue] of [
      ['ApproximateAgeOfOldestMessage', 'EventsQueue'],
      ['ApproximateNumberOfMessagesVisible', 'DeadLetterQueue'],
    ]) {
      template.hasResourceProperties('AWS::CloudWatch::Alarm', {
        Namespace: 'AWS/SQS',
        MetricName: metric,
        Dimensions: [
          {
            Name: 'QueueName',
            Value: { 'Fn::GetAtt': [Match.stringLikeRegexp(`^${queue}`), 'QueueName'] },
          },
        ],
      });
    }
    // The relay's own metrics are found where Powertools writes them: the function's namespace
    // and its service name as the `service` dimension.
    const refresh = Object.values(template.findResources('AWS::Lambda::Function')).find(
      (fn) => fn.Properties.Environment?.Variables?.POWERTOOLS_SERVICE_NAME === 'refresh',
    )?.Properties.Environment.Variables;
    for (const name of ['AccessTokenSecondsLeft', 'RefreshTokenSecondsLeft']) {
      template.hasResourceProperties('AWS::CloudWatch::Alarm', {
        MetricName: name,
        Namespace: refresh.POWERTOOLS_METRICS_NAMESPACE,
        Dimensions: [{ Name: 'service', Value: refresh.POWERTOOLS_SERVICE_NAME }],
      });
    }
    template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      MetricName: 'AccessTokenSecondsLeft',
      Period: 900,
      TreatMissingData: 'breaching',
    });
  });

  it("pages on the ingest's 5xx as a share of its requests, several periods running, never on one", () => {
    const ingest5xx = Object.entries(template.findResources('AWS::CloudWatch::Alarm')).find(
      ([id]) => id.startsWith('Ingest5xxAlarm'),
    )?.[1];
    expect(ingest5xx?.Properties).toMatchObject({
      Threshold: INGEST_5XX_ALARM.percent,
      ComparisonOperator: 'GreaterThanThreshold',
      EvaluationPeriods: 2,
      DatapointsToAlarm: 2,
      TreatMissingData: 'notBreaching',
    });
    const metrics = ingest5xx?.Properties.Metrics as Array<{
      Id: string;
      Expression?: string;
      MetricStat?: { Metric: { Namespace: string; MetricName: string }; Stat: string };
    }>;
    expect(metrics.find((m) => m.Id === 'expr_1')?.Expression).toBe(
      'IF(FILL(errors, 0) >= 5, 100 * FILL(errors, 0) / requests, 0)',
    );
    expect(
      metrics.flatMap(({ Id, MetricStat }) =>
        MetricStat
          ? [[Id, MetricStat.Metric.Namespace, MetricStat.Metric.MetricName, MetricStat.Stat]]
          : [],
      ),
    ).toEqual([
      ['errors', 'AWS/ApiGateway', '5xx', 'Sum'],
      ['requests', 'AWS/ApiGateway', 'Count', 'Sum'],
    ]);
  });

  it('subscribes the alarm e-mail when one is configured, and outputs what operators need', () => {
    const { template: prod } = synth('prod');
    prod.hasResourceProperties('AWS::SNS::Subscription', {
      Protocol: 'email',
      Endpoint: environments.prod?.alarmEmail,
    });
    expect(Object.keys(prod.findOutputs('*')).sort()).toEqual(
      [
        'BatchFunctionName',
        'ClientSecretName',
        'DashboardName',
        'DeadLetterQueueUrl',
        'DedupTableName',
        'EventsQueueUrl',
        'IngestFunctionName',
        'IngestUrl',
        'OutcomeRetentionSeconds',
        'OutcomeTableName',
        'RefreshFunctionName',
        'TokenSecretName',
        'WebhookSecretName',
      ].sort(),
    );
    // The operator commands find an environment by these output keys.
    for (const key of Object.values(OUTPUTS)) expect(prod.findOutputs(key)).not.toEqual({});
    expect(prod.findOutputs('DashboardName').DashboardName?.Value).toEqual({
      Ref: Object.keys(prod.findResources('AWS::CloudWatch::Dashboard'))[0],
    });
    prod.hasResource('AWS::CloudWatch::Dashboard', {});
  });
});

describe('cdk-nag (AwsSolutions)', () => {
  /** Synthesises `env` with the AwsSolutions pack into a fresh folder; returns the validation report or the failure. */
  function nagged(acknowledge: boolean, env = 'dev') {
    const outdir = mkdtempSync(join(tmpdir(), 'relay-nag-'));
    const app = new App({ outdir, context: { 'aws:cdk:bundling-stacks': [] } });
    const stack = new RelayStack(app, `MauticRelay-${env}`, {
      settings: environmentSettings(env, environments),
    });
    if (acknowledge) acknowledgeFindings(stack);
    Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
    let failure: unknown;
    try {
      app.synth();
    } catch (error) {
      failure = error;
    }
    const report = JSON.parse(readFileSync(join(outdir, 'validation-report.json'), 'utf8')) as {
      pluginReports: Array<{
        conclusion: string;
        violations: unknown[];
        suppressedViolations: Array<{ ruleName: string; reason: string; acknowledgedAt: string }>;
      }>;
    };
    rmSync(outdir, { recursive: true, force: true });
    return { failure, report: report.pluginReports[0] };
  }

  it('leaves no unacknowledged finding, and each acknowledgment has its own reason', () => {
    const { failure, report } = nagged(true);

    expect(failure).toBeUndefined();
    expect(report?.conclusion).toBe('success');
    expect(report?.violations).toEqual([]);
    expect(report?.suppressedViolations.map((v) => [v.ruleName, v.acknowledgedAt]).sort()).toEqual([
      ['AwsSolutions-APIG4', 'MauticRelay-dev/Api/GET--events'],
      ['AwsSolutions-APIG4', 'MauticRelay-dev/Api/GET--events--{eventId}'],
      ['AwsSolutions-APIG4', 'MauticRelay-dev/Api/POST--events'],
      ['AwsSolutions-APIG4', 'MauticRelay-dev/Api/POST--sources--{name}'],
      ['AwsSolutions-DDB3', 'MauticRelay-dev/DedupTable'],
      ['AwsSolutions-DDB3', 'MauticRelay-dev/OutcomeTable'],
      ['AwsSolutions-SMG4', 'MauticRelay-dev/ClientSecret'],
      ['AwsSolutions-SMG4', 'MauticRelay-dev/TokenSecret'],
      ['AwsSolutions-SMG4', 'MauticRelay-dev/WebhookSecret'],
    ]);
    expect(new Set(report?.suppressedViolations.map((v) => v.reason)).size).toBe(9);
    // The reason for no point-in-time recovery says what the table's loss costs.
    expect(
      report?.suppressedViolations.find(
        (v) => v.ruleName === 'AwsSolutions-DDB3' && v.acknowledgedAt.endsWith('/DedupTable'),
      )?.reason,
    ).toMatch(/addPoints ledger, each key kept 42 days .* may add its points twice/);
  });

  it('gives the table point-in-time recovery and deletion protection where the data is kept (prod), so no finding to acknowledge', () => {
    const { failure, report } = nagged(true, 'prod');
    expect(failure).toBeUndefined();
    expect(report?.violations).toEqual([]);
    // Only the outcome table's: a few days of statuses, which a restore would bring back stale.
    expect(
      report?.suppressedViolations
        .filter((v) => v.ruleName === 'AwsSolutions-DDB3')
        .map((v) => v.acknowledgedAt),
    ).toEqual(['MauticRelay-prod/OutcomeTable']);
    const table = (env: string) =>
      Object.entries(synth(env).template.findResources('AWS::DynamoDB::Table')).find(([id]) =>
        id.startsWith('DedupTable'),
      )?.[1]?.Properties;
    expect(table('prod')).toMatchObject({
      PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
      DeletionProtectionEnabled: true,
    });
    expect(table('dev')?.PointInTimeRecoverySpecification).toBeUndefined();
    expect(table('dev')?.DeletionProtectionEnabled).toBeUndefined();
  });

  it('fails the synth when a finding is not acknowledged', () => {
    vi.spyOn(console, 'error').mockImplementation(() => {});
    vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    const { failure, report } = nagged(false);

    expect(String(failure)).toContain('ValidationFailed');
    expect(report?.violations).toHaveLength(3);
  });
});

describe('environment settings', () => {
  it('refuses a refresh schedule slower than 10 minutes or not a rate', () => {
    for (const refreshSchedule of ['rate(30 minutes)', 'rate(1 hour)', 'cron(0 * * * ? *)']) {
      expect(() =>
        environmentSettings('dev', { dev: { ...environments.dev, refreshSchedule } }),
      ).toThrow(/refreshSchedule must be rate\(1 minute\) to rate\(10 minutes\)/);
    }
    expect(
      environmentSettings('dev', {
        dev: { ...environments.dev, refreshSchedule: 'rate(1 minute)' },
      }).refreshSchedule,
    ).toBe('rate(1 minute)');
  });

  it('requires a known environment and lists the known ones', () => {
    expect(() => environmentSettings(undefined, environments)).toThrow(
      'Choose an environment with -c env=NAME; known environments: dev, prod',
    );
    expect(() => environmentSettings('staging', environments)).toThrow(
      'Unknown environment "staging"; known environments: dev, prod',
    );
  });

  it('refuses settings that would break the relay, naming them', () => {
    const bad = {
      ...environments.dev,
      batchSize: 500,
      retryHorizonHours: 400,
      mauticBaseUrl: 'http://mautic',
    };
    expect(() => environmentSettings('dev', { dev: bad })).toThrow(
      /mauticBaseUrl.*batchSize.*retryHorizonHours/,
    );
    expect(() =>
      environmentSettings('dev', {
        dev: { ...environments.dev, retryHorizonHours: 300, retryMaxDelaySeconds: 60 },
      }),
    ).toThrow(/retryHorizonHours, retryMaxDelaySeconds: .*raise RETRY_MAX_DELAY_SECONDS/);
    expect(() =>
      environmentSettings('dev', {
        dev: { ...environments.dev, batchSize: 50, batchingWindowSeconds: 0 },
      }),
    ).toThrow('batchSize above 10 needs batchingWindowSeconds of at least 1');
  });

  it('refuses a batching window longer than a quarter of the batch function timeout', () => {
    expect(() =>
      environmentSettings('dev', {
        dev: { ...environments.dev, batchTimeoutSeconds: 60, batchingWindowSeconds: 16 },
      }),
    ).toThrow(
      'batchingWindowSeconds (16) must be at most a quarter of batchTimeoutSeconds (60), so that the batch it gathers can still be delivered and settled in the invocation; lower the window or raise the timeout',
    );
    expect(
      environmentSettings('dev', {
        dev: { ...environments.dev, batchTimeoutSeconds: 60, batchingWindowSeconds: 15 },
      }).batchingWindowSeconds,
    ).toBe(15);
    for (const name of Object.keys(environments))
      expect(() => environmentSettings(name, environments)).not.toThrow();
  });

  it('bundles every function locally as ESM with source maps, and each bundle starts with the environment the stack gives it', async () => {
    const outdir = mkdtempSync(join(tmpdir(), 'relay-bundle-'));
    try {
      const app = new App({ outdir });
      const stack = new RelayStack(app, 'MauticRelay-dev', {
        settings: environmentSettings('dev', environments),
      });
      const assembly = app.synth();
      const template = Template.fromStack(stack);
      const functions = Object.values(template.findResources('AWS::Lambda::Function')).filter(
        (fn) => fn.Properties.Environment?.Variables?.POWERTOOLS_SERVICE_NAME,
      );

      expect(functions).toHaveLength(3);
      for (const fn of functions) {
        const asset = join(
          assembly.directory,
          `asset.${String(fn.Properties.Code.S3Key).replace(/\.zip$/, '')}`,
        );
        expect(readdirSync(asset).sort()).toEqual(['index.mjs', 'index.mjs.map']);
        // CloudFormation references become placeholders; no AWS call happens at import.
        const env = Object.fromEntries(
          Object.entries(fn.Properties.Environment.Variables as Record<string, unknown>).map(
            ([name, value]) => [
              name,
              typeof value === 'string' ? value : `placeholder-for-${name.toLowerCase()}`,
            ],
          ),
        );
        // The ingest would read its webhook secret from Secrets Manager at cold start; give it the
        // local form instead, so that nothing leaves this machine.
        if (env.WEBHOOK_SECRET_ID) {
          delete env.WEBHOOK_SECRET_ID;
          env.WEBHOOK_SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
        }
        const script = `const m = await import(${JSON.stringify(pathToFileURL(join(asset, 'index.mjs')).href)}); console.log(typeof m.handler);`;
        const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], {
          env: {
            PATH: process.env.PATH ?? '',
            AWS_REGION: 'us-east-1',
            AWS_ACCESS_KEY_ID: 'x',
            AWS_SECRET_ACCESS_KEY: 'x',
            ...env,
          },
          timeout: 20_000,
        });
        expect(stdout.trim()).toBe('function');
      }
    } finally {
      rmSync(outdir, { recursive: true, force: true });
    }
  }, 60_000);

  it('gives each function an environment its configuration loader accepts', () => {
    const { template } = synth();
    const environmentOf = (service: string) => {
      const fn = Object.values(template.findResources('AWS::Lambda::Function')).find(
        (candidate) =>
          candidate.Properties.Environment?.Variables?.POWERTOOLS_SERVICE_NAME === service,
      );
      return Object.fromEntries(
        Object.entries(fn?.Properties.Environment.Variables as Record<string, unknown>).map(
          ([name, value]) => [
            name,
            typeof value === 'string' ? value : `resolved-${name.toLowerCase()}`,
          ],
        ),
      );
    };

    expect(loadBatchConfig(environmentOf('batch'))).toMatchObject({
      mauticBaseUrl: environments.dev?.mauticBaseUrl,
      batchSize: 200,
    });
    expect(loadIngestConfig(environmentOf('ingest'))).toMatchObject({
      webhookSecretId: 'resolved-webhook_secret_id',
      dedupTableName: 'resolved-dedup_table_name',
      dedupWindowSeconds: 86_400,
    });
    expect(loadRefreshConfig(environmentOf('refresh')).tokenSecretId).toBe(
      'resolved-token_secret_id',
    );
  });
});

describe('sources (contract §6)', () => {
  /** Two sources as cdk.json holds them: no secret. */
  const SOURCES = {
    shop: {
      verify: { scheme: 'shopify' },
      map: "{ 'entity': 'contacts', 'action': 'create', 'data': { 'email': email } }",
    },
    'stripe-customers': {
      verify: { scheme: 'stripe' },
      filter: "type = 'customer.created'",
      map: "{ 'entity': 'contacts', 'action': 'create', 'data': { 'email': data.object.email } }",
    },
  };
  const ingestVariables = (t: Template) =>
    Object.values(t.findResources('AWS::Lambda::Function')).find(
      (fn) => fn.Properties.Environment?.Variables?.POWERTOOLS_SERVICE_NAME === 'ingest',
    )?.Properties.Environment.Variables as Record<string, unknown>;

  it('makes one secret per source, named after it, with no value in the template', () => {
    const { template: t } = synth('dev', { sources: SOURCES });
    const secrets = Object.entries(t.findResources('AWS::SecretsManager::Secret')).filter(([id]) =>
      id.startsWith('SourceSecret'),
    );

    expect(secrets.map(([, secret]) => secret.Properties.Name).sort()).toEqual([
      'MauticRelay/dev/sources/shop',
      'MauticRelay/dev/sources/stripe-customers',
    ]);
    for (const [, secret] of secrets) {
      // `{}` holds no secret: the ingest refuses the source until `sources set-secret`.
      expect(secret.Properties.SecretString).toBe('{}');
      expect(secret.Properties.GenerateSecretString).toBeUndefined();
      expect(secret.DeletionPolicy).toBe('Delete');
    }
    expect(
      Object.keys(
        synth('prod', { sources: SOURCES }).template.findResources('AWS::SecretsManager::Secret'),
      ).length,
    ).toBe(5);
    // No sources: no source secret, and the ingest reads no document.
    const none = synth().template;
    expect(Object.keys(none.findResources('AWS::SecretsManager::Secret'))).toHaveLength(3);
    expect(ingestVariables(none).SOURCES_DOCUMENT).toBeUndefined();
  });

  it('lets the ingest, and nothing else, read exactly the sources’ secrets', () => {
    const { template: t } = synth('dev', { sources: SOURCES });
    const secretReads = (role: string) =>
      statementsOf(t, role).filter((statement) =>
        statement.actions.some((action) => action.startsWith('secretsmanager:')),
      );

    expect(
      secretReads('IngestRole').sort((a, b) =>
        a.resources.join().localeCompare(b.resources.join()),
      ),
    ).toEqual([
      { actions: ['secretsmanager:GetSecretValue'], resources: ['SourceSecretshop'] },
      { actions: ['secretsmanager:GetSecretValue'], resources: ['SourceSecretstripecustomers'] },
      { actions: ['secretsmanager:GetSecretValue'], resources: ['WebhookSecret'] },
    ]);
    for (const role of ['BatchRole', 'RefreshRole'])
      expect(JSON.stringify(statementsOf(t, role))).not.toContain('SourceSecret');
  });

  it('gives the ingest the document, compact and without secrets, and the secrets’ prefix, which its loader accepts', () => {
    const { template: t } = synth('dev', { sources: SOURCES });
    const variables = ingestVariables(t);

    expect(variables.SOURCES_DOCUMENT).toBe(JSON.stringify({ sources: SOURCES }));
    expect(variables.SOURCES_SECRET_PREFIX).toBe('MauticRelay/dev/sources/');
    const config = loadIngestConfig(
      Object.fromEntries(
        Object.entries(variables).map(([n, v]) => [n, typeof v === 'string' ? v : `resolved-${n}`]),
      ),
    );
    expect(config.sources).toEqual({
      document: JSON.stringify({ sources: SOURCES }),
      secretPrefix: 'MauticRelay/dev/sources/',
    });
  });

  it('acknowledges the sources’ secrets’ rotation finding, each with its reason', () => {
    const outdir = mkdtempSync(join(tmpdir(), 'relay-nag-sources-'));
    try {
      const app = new App({ outdir, context: { 'aws:cdk:bundling-stacks': [] } });
      const stack = new RelayStack(app, 'MauticRelay-dev', {
        settings: environmentSettings('dev', {
          dev: { ...environments.dev, sources: SOURCES },
        }),
      });
      acknowledgeFindings(stack);
      Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
      app.synth();
      const report = JSON.parse(readFileSync(join(outdir, 'validation-report.json'), 'utf8'))
        .pluginReports[0] as {
        violations: unknown[];
        suppressedViolations: Array<{ ruleName: string; acknowledgedAt: string }>;
      };

      expect(report.violations).toEqual([]);
      expect(
        report.suppressedViolations
          .filter((v) => v.acknowledgedAt.includes('SourceSecret'))
          .map((v) => [v.ruleName, v.acknowledgedAt])
          .sort(),
      ).toEqual([
        ['AwsSolutions-SMG4', 'MauticRelay-dev/SourceSecret-shop'],
        ['AwsSolutions-SMG4', 'MauticRelay-dev/SourceSecret-stripe-customers'],
      ]);
    } finally {
      rmSync(outdir, { recursive: true, force: true });
    }
  });

  it.each([
    [
      'an expression that does not compile',
      { shop: { ...SOURCES.shop, map: '{ ,' } },
      /sources: Source "shop": map does not compile: /,
    ],
    [
      'an unknown scheme',
      { shop: { ...SOURCES.shop, verify: { scheme: 'paypal' } } },
      /sources: Source "shop": verify/,
    ],
    ['a bad name', { Shop: SOURCES.shop }, /sources: Source "Shop": the name must match/],
    [
      'a secret, which cdk.json (committed) must not hold',
      {
        shop: {
          ...SOURCES.shop,
          verify: { scheme: 'shopify', secret: 'shpss_committed_0123456789' },
        },
      },
      /sources: Source "shop": cdk.json is committed, so it holds no secret: .*sources set-secret shop --env dev/,
    ],
  ])('refuses to synthesize %s, naming the source and the problem', (_, sources, message) => {
    const settings = () => environmentSettings('dev', { dev: { ...environments.dev, sources } });

    expect(settings).toThrow(/^Invalid settings for environment "dev" in cdk\.json: sources: /);
    expect(settings).toThrow(message);
    expect(settings).not.toThrow('shpss_committed_0123456789');
  });

  /** `count` sources of about 150 bytes each, as compact JSON. */
  const manySources = (count: number) =>
    Object.fromEntries(
      Array.from({ length: count }, (_, i) => [`source-${i}`, { ...SOURCES['stripe-customers'] }]),
    );

  it('refuses to synthesize an ingest whose whole environment could pass Lambda’s 4 KB once deployed', () => {
    // Fits alone; not with a long ENTITIES list beside it (CloudFormation would refuse it mid-deploy).
    const sources = manySources(16);
    const entities = Array.from(
      { length: 24 },
      (_, i) => `customEntityNumber${String.fromCharCode(97 + i)}`,
    );
    const fits = () => synth('prod', { sources });
    const tooMuch = () => synth('prod', { sources, entities });

    expect(fits).not.toThrow();
    expect(tooMuch).toThrow(
      new RegExp(
        `The ingest function's environment could take \\d+ bytes once deployed, over Lambda's ${LAMBDA_ENVIRONMENT_BYTES} .*the largest: SOURCES_DOCUMENT \\d+: the environment's sources in cdk.json \\(shorten the expressions or drop a source\\); ENTITIES \\d+: entities in cdk.json`,
      ),
    );
    expect(() => synth('prod', { sources: manySources(25) })).toThrow(/SOURCES_DOCUMENT \d+/);
  });

  it('refuses an environment without "sources", as any missing setting', () => {
    const { sources: _sources, ...withoutSources } = environments.dev as Record<string, unknown>;

    expect(() => environmentSettings('dev', { dev: withoutSources })).toThrow(/sources/);
  });
});
