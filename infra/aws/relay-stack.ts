import {
  CfnOutput,
  Duration,
  RemovalPolicy,
  SecretValue,
  Stack,
  type StackProps,
} from 'aws-cdk-lib';
import { AccessLogFormat } from 'aws-cdk-lib/aws-apigateway';
import * as apigw from 'aws-cdk-lib/aws-apigatewayv2';
import { HttpLambdaIntegration } from 'aws-cdk-lib/aws-apigatewayv2-integrations';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as actions from 'aws-cdk-lib/aws-cloudwatch-actions';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import * as iam from 'aws-cdk-lib/aws-iam';
import { SqsEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as subscriptions from 'aws-cdk-lib/aws-sns-subscriptions';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import type { Construct } from 'constructs';
import {
  DEDUP_STORE_FAILED_EVENT,
  DEDUP_TABLE_KEY,
  DEDUP_TTL_ATTRIBUTE,
  ENV,
  retryPolicy,
  secretNames,
} from '../../functions/shared/config.ts';
import type { EnvironmentSettings } from './environments.ts';
import { RelayFunction } from './relay-function.ts';

export interface RelayStackProps extends StackProps {
  readonly settings: EnvironmentSettings & { name: string };
}

/** Alarm thresholds that are facts of Mautic and of the design, not settings. */
const ACCESS_TOKEN_ALARM_SECONDS = 600;
const REFRESH_TOKEN_ALARM_SECONDS = 2 * 86_400;

/**
 * The whole relay for one environment: the HTTP API and ingest function, the events queue and
 * its dead-letter queue, the batch function on the queue, the token refresher on a schedule, the
 * three secrets, alarms to an SNS topic, and a dashboard. Each function may do exactly what it
 * needs on exactly its own resources.
 */
export class RelayStack extends Stack {
  readonly ingest: RelayFunction;
  readonly batch: RelayFunction;
  readonly refresh: RelayFunction;
  readonly eventsQueue: sqs.Queue;
  readonly deadLetterQueue: sqs.Queue;
  readonly api: apigw.HttpApi;
  readonly dedupTable: dynamodb.Table;

  constructor(scope: Construct, id: string, props: RelayStackProps) {
    super(scope, id, props);
    const { settings } = props;
    const names = secretNames(settings.name);
    const namespace = `MauticBatchRelay/${settings.name}`;
    const batchTimeout = Duration.seconds(settings.batchTimeoutSeconds);
    const logRetention = settings.logRetentionDays;
    const common = { metricsNamespace: namespace, logRetention, logLevel: settings.logLevel };

    // What the stack's deletion, or a replacement, does to the data: queues and secrets are kept
    // unless the environment's settings let them go.
    const dataPolicy = settings.retainData ? RemovalPolicy.RETAIN : RemovalPolicy.DESTROY;
    // Failures that are not the events' own are retried for a horizon of time, not a number of
    // receives; the queue's maxReceiveCount is derived from it and is only a backstop (for
    // receives the function never settles, e.g. crashes). Throws, naming the setting, when the
    // horizon needs more receives than SQS allows.
    const retry = retryPolicy({
      baseSeconds: settings.retryBaseSeconds,
      maxDelaySeconds: settings.retryMaxDelaySeconds,
      horizonSeconds: Math.round(settings.retryHorizonHours * 3600),
    });

    // Queues: SSE and TLS only. The events queue keeps an event a day beyond its retry horizon
    // (at least the SQS default of 4 days), so a backlog cannot outlive it; the dead-letter
    // queue keeps messages the longest SQS allows.
    this.deadLetterQueue = new sqs.Queue(this, 'DeadLetterQueue', {
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      retentionPeriod: Duration.days(14),
      removalPolicy: dataPolicy,
    });
    this.eventsQueue = new sqs.Queue(this, 'EventsQueue', {
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      retentionPeriod: Duration.seconds(
        Math.min(14 * 86_400, Math.max(4 * 86_400, retry.horizonSeconds + 86_400)),
      ),
      // AWS: at least 6 times the function timeout, so retries inside it never overlap a redelivery.
      visibilityTimeout: Duration.seconds(6 * settings.batchTimeoutSeconds),
      deadLetterQueue: { queue: this.deadLetterQueue, maxReceiveCount: retry.maxReceiveCount },
      removalPolicy: dataPolicy,
    });

    // Secrets. The client and token secrets start as `{}`: `credentials` and the refresher (or
    // `authorize`) write their values, and a redeploy leaves those alone.
    const clientSecret = new secretsmanager.Secret(this, 'ClientSecret', {
      secretName: names.client,
      description:
        'Mautic OAuth2 credential (written with "npx mautic-relay credentials"; read by the refresher only)',
      secretStringValue: SecretValue.unsafePlainText('{}'),
      removalPolicy: dataPolicy,
    });
    const tokenSecret = new secretsmanager.Secret(this, 'TokenSecret', {
      secretName: names.token,
      description: 'Mautic tokens (written by the refresher only; read by the batch function)',
      secretStringValue: SecretValue.unsafePlainText('{}'),
      removalPolicy: dataPolicy,
    });
    const webhookSecret = new secretsmanager.Secret(this, 'WebhookSecret', {
      secretName: names.webhook,
      description:
        'Ingest credentials: whsec_ + generatedSecret, plus optional webhookSecrets and apiKeys lists',
      generateSecretString: {
        secretStringTemplate: JSON.stringify({ webhookSecrets: [], apiKeys: [] }),
        generateStringKey: 'generatedSecret',
        // 32 letters and digits are the base64 of 24 bytes: a valid Standard Webhooks key.
        passwordLength: 32,
        excludePunctuation: true,
        includeSpace: false,
      },
      removalPolicy: dataPolicy,
    });

    this.refresh = new RelayFunction(this, 'Refresh', {
      ...common,
      name: 'refresh',
      serviceName: 'refresh',
      timeout: Duration.seconds(30),
      // The single writer of the token secret: two refreshes must never race on a refresh token.
      reservedConcurrentExecutions: 1,
      environment: {
        [ENV.CLIENT_SECRET_ID]: clientSecret.secretArn,
        [ENV.TOKEN_SECRET_ID]: tokenSecret.secretArn,
      },
    });
    this.refresh.role.addToPolicy(
      new iam.PolicyStatement({
        actions: ['secretsmanager:GetSecretValue'],
        resources: [clientSecret.secretArn],
      }),
    );
    this.refresh.role.addToPolicy(
      new iam.PolicyStatement({
        // Put a pending version, then move AWSCURRENT to it only from the version read.
        actions: [
          'secretsmanager:GetSecretValue',
          'secretsmanager:PutSecretValue',
          'secretsmanager:UpdateSecretVersionStage',
        ],
        resources: [tokenSecret.secretArn],
      }),
    );
    new events.Rule(this, 'RefreshSchedule', {
      schedule: events.Schedule.expression(settings.refreshSchedule),
      targets: [new targets.LambdaFunction(this.refresh.function, { retryAttempts: 0 })],
    });

    this.batch = new RelayFunction(this, 'Batch', {
      ...common,
      name: 'batch',
      serviceName: 'batch',
      timeout: batchTimeout,
      // At least the event source's maximum concurrency: an account-wide throttle must not make
      // the mapping's invokes fail, each failure costing every event of the batch a receive.
      reservedConcurrentExecutions: settings.maxConcurrency,
      environment: {
        [ENV.MAUTIC_BASE_URL]: settings.mauticBaseUrl,
        [ENV.TOKEN_SECRET_ID]: tokenSecret.secretArn,
        [ENV.EVENTS_QUEUE_URL]: this.eventsQueue.queueUrl,
        [ENV.DEAD_LETTER_QUEUE_URL]: this.deadLetterQueue.queueUrl,
        [ENV.REFRESH_FUNCTION_NAME]: this.refresh.function.functionName,
        [ENV.BATCH_SIZE]: String(settings.batchSize),
        [ENV.RETRY_BASE_SECONDS]: String(retry.baseSeconds),
        [ENV.RETRY_MAX_DELAY_SECONDS]: String(retry.maxDelaySeconds),
        [ENV.RETRY_HORIZON_SECONDS]: String(retry.horizonSeconds),
        [ENV.MAX_RECEIVE_COUNT]: String(retry.maxReceiveCount),
      },
    });
    // The event source grants the batch role Receive, Delete, ChangeMessageVisibility,
    // GetQueueAttributes and GetQueueUrl on the events queue: all the function needs of it.
    this.batch.function.addEventSource(
      new SqsEventSource(this.eventsQueue, {
        batchSize: settings.batchSize,
        maxBatchingWindow: Duration.seconds(settings.batchingWindowSeconds),
        reportBatchItemFailures: true,
        maxConcurrency: settings.maxConcurrency,
      }),
    );
    this.batch.role.addToPolicy(
      new iam.PolicyStatement({
        actions: ['sqs:SendMessage'],
        resources: [this.deadLetterQueue.queueArn],
      }),
    );
    this.batch.role.addToPolicy(
      new iam.PolicyStatement({
        actions: ['secretsmanager:GetSecretValue'],
        resources: [tokenSecret.secretArn],
      }),
    );
    this.batch.role.addToPolicy(
      new iam.PolicyStatement({
        actions: ['lambda:InvokeFunction'],
        resources: [this.refresh.function.functionArn],
      }),
    );

    // Request ids the ingest has accepted (contract §1, Idempotency): short-lived records that
    // DynamoDB's TTL sweeps away; on demand, since ingest traffic is bursty.
    this.dedupTable = new dynamodb.Table(this, 'DedupTable', {
      partitionKey: { name: DEDUP_TABLE_KEY, type: dynamodb.AttributeType.STRING },
      billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
      timeToLiveAttribute: DEDUP_TTL_ATTRIBUTE,
      encryption: dynamodb.TableEncryption.AWS_MANAGED,
      removalPolicy: dataPolicy,
    });

    this.ingest = new RelayFunction(this, 'Ingest', {
      ...common,
      name: 'ingest',
      serviceName: 'ingest',
      timeout: Duration.seconds(10),
      environment: {
        [ENV.EVENTS_QUEUE_URL]: this.eventsQueue.queueUrl,
        [ENV.WEBHOOK_SECRET_ID]: webhookSecret.secretArn,
        [ENV.DEDUP_TABLE_NAME]: this.dedupTable.tableName,
        [ENV.DEDUP_WINDOW_SECONDS]: String(settings.dedupWindowSeconds),
        ...(settings.entities === 'standard'
          ? {}
          : { [ENV.ENTITIES]: settings.entities.join(',') }),
      },
    });
    // What Powertools idempotency does: claim (conditional put), read a claim it lost (get),
    // save the answer (update), free the id after a failure (delete). Nothing else.
    this.ingest.role.addToPolicy(
      new iam.PolicyStatement({
        actions: [
          'dynamodb:DeleteItem',
          'dynamodb:GetItem',
          'dynamodb:PutItem',
          'dynamodb:UpdateItem',
        ],
        resources: [this.dedupTable.tableArn],
      }),
    );
    this.ingest.role.addToPolicy(
      new iam.PolicyStatement({
        actions: ['sqs:SendMessage'],
        resources: [this.eventsQueue.queueArn],
      }),
    );
    this.ingest.role.addToPolicy(
      new iam.PolicyStatement({
        actions: ['secretsmanager:GetSecretValue'],
        resources: [webhookSecret.secretArn],
      }),
    );

    const accessLogs = new logs.LogGroup(this, 'ApiAccessLogs', { retention: logRetention });
    this.api = new apigw.HttpApi(this, 'Api', {
      createDefaultStage: false,
      description: `Mautic batch relay (${settings.name})`,
    });
    new apigw.HttpStage(this, 'ApiStage', {
      httpApi: this.api,
      stageName: '$default',
      autoDeploy: true,
      throttle: settings.apiThrottle,
      accessLogSettings: {
        destination: new apigw.LogGroupLogDestination(accessLogs),
        // HTTP APIs have their own $context variables; the REST API's standard format is not for them.
        format: AccessLogFormat.custom(
          JSON.stringify({
            requestId: '$context.requestId',
            ip: '$context.identity.sourceIp',
            requestTime: '$context.requestTime',
            routeKey: '$context.routeKey',
            status: '$context.status',
            responseLength: '$context.responseLength',
            responseLatency: '$context.responseLatency',
            integrationError: '$context.integrationErrorMessage',
          }),
        ),
      },
    });
    this.api.addRoutes({
      path: '/events',
      methods: [apigw.HttpMethod.POST],
      integration: new HttpLambdaIntegration('IngestIntegration', this.ingest.function),
    });

    const topic = new sns.Topic(this, 'Alarms', {
      displayName: `Mautic relay ${settings.name} alarms`,
      enforceSSL: true,
    });
    if (settings.alarmEmail)
      topic.addSubscription(new subscriptions.EmailSubscription(settings.alarmEmail));
    const relayMetric = (
      name: string,
      service: string,
      statistic: string,
      period = Duration.minutes(5),
    ) =>
      new cloudwatch.Metric({
        namespace,
        metricName: name,
        dimensionsMap: { service },
        statistic,
        period,
      });
    const alarm = (
      id: string,
      description: string,
      props: Omit<cloudwatch.AlarmProps, 'alarmDescription'>,
    ) => {
      const created = new cloudwatch.Alarm(this, id, { ...props, alarmDescription: description });
      created.addAlarmAction(new actions.SnsAction(topic));
      return created;
    };
    const fiveMinutes = Duration.minutes(5);
    alarm(
      'DeadLetterAlarm',
      'Events are in the dead-letter queue: read their relay.reason attributes, fix, then redrive.',
      {
        metric: this.deadLetterQueue.metricApproximateNumberOfMessagesVisible({
          period: fiveMinutes,
          statistic: 'Maximum',
        }),
        threshold: 0,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        evaluationPeriods: 1,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      },
    );
    alarm(
      'OldestEventAlarm',
      'Events wait too long in the queue: is Mautic reachable, rate-limited, or is the batch function failing?',
      {
        metric: this.eventsQueue.metricApproximateAgeOfOldestMessage({
          period: fiveMinutes,
          statistic: 'Maximum',
        }),
        threshold: settings.oldestEventAlarmSeconds,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        evaluationPeriods: 1,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      },
    );
    alarm('BatchErrorsAlarm', 'The batch function failed: see its log group.', {
      metric: this.batch.function.metricErrors({ period: fiveMinutes, statistic: 'Sum' }),
      threshold: 0,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
      evaluationPeriods: 1,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    });
    alarm(
      'BatchThrottlesAlarm',
      'The batch function is throttled: raise the account concurrency or lower maxConcurrency.',
      {
        metric: this.batch.function.metricThrottles({ period: fiveMinutes, statistic: 'Sum' }),
        threshold: 0,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        evaluationPeriods: 1,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      },
    );
    alarm('RefreshFailedAlarm', 'Token refresh failed: the refresher log names the fix.', {
      metric: new cloudwatch.MathExpression({
        expression: 'FILL(failed, 0) + FILL(errors, 0)',
        usingMetrics: {
          failed: relayMetric('TokenRefreshFailed', 'refresh', 'Sum'),
          errors: this.refresh.function.metricErrors({ period: fiveMinutes, statistic: 'Sum' }),
        },
        period: fiveMinutes,
      }),
      threshold: 0,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
      evaluationPeriods: 1,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    });
    alarm(
      'AccessTokenAlarm',
      'The Mautic access token is about to expire and is not being refreshed.',
      {
        // 15 minutes hold several scheduled runs: no data in that long means no refresher.
        metric: relayMetric('AccessTokenSecondsLeft', 'refresh', 'Minimum', Duration.minutes(15)),
        threshold: ACCESS_TOKEN_ALARM_SECONDS,
        comparisonOperator: cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
        evaluationPeriods: 1,
        treatMissingData: cloudwatch.TreatMissingData.BREACHING,
      },
    );
    alarm(
      'RefreshTokenAlarm',
      'The Mautic refresh token expires within 2 days, or Mautic refused it (revoked, or spent by a refresh whose answer was lost): run "npx mautic-relay authorize".',
      {
        metric: relayMetric('RefreshTokenSecondsLeft', 'refresh', 'Minimum'),
        threshold: REFRESH_TOKEN_ALARM_SECONDS,
        comparisonOperator: cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
        evaluationPeriods: 1,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      },
    );
    // Every store failure the ingest meets (unreachable, throttled, denied, DynamoDB's own
    // errors) is one log line with this event; each means a request refused with 503.
    const dedupFailures = new logs.MetricFilter(this, 'DedupStoreErrorsFilter', {
      logGroup: this.ingest.logGroup,
      filterPattern: logs.FilterPattern.stringValue('$.event', '=', DEDUP_STORE_FAILED_EVENT),
      metricNamespace: namespace,
      metricName: 'DedupStoreErrors',
      metricValue: '1',
      unit: cloudwatch.Unit.COUNT,
    });
    alarm(
      'DedupStoreAlarm',
      'The ingest could not use its de-duplication table: requests are refused with 503; see the ingest log group (event dedup_store_failed).',
      {
        metric: dedupFailures.metric({ period: fiveMinutes, statistic: 'Sum' }),
        threshold: 0,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        evaluationPeriods: 1,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      },
    );
    alarm(
      'Ingest5xxAlarm',
      'The ingest endpoint answered 5xx: senders are retrying; see the ingest log group.',
      {
        metric: this.api.metricServerError({ period: fiveMinutes, statistic: 'Sum' }),
        threshold: 0,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        evaluationPeriods: 1,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      },
    );

    const dashboard = new cloudwatch.Dashboard(this, 'Dashboard', {
      dashboardName: `MauticRelay-${settings.name}`,
      widgets: [
        [
          graph('Events in', [
            this.eventsQueue.metricNumberOfMessagesSent({ period: fiveMinutes, statistic: 'Sum' }),
          ]),
          graph('Delivered, rejected, retried', [
            relayMetric('EventsDelivered', 'batch', 'Sum'),
            relayMetric('EventsRejected', 'batch', 'Sum'),
            relayMetric('EventsRetried', 'batch', 'Sum'),
          ]),
          graph('Batch fill (%)', [relayMetric('BatchFill', 'batch', 'Average')]),
        ],
        [
          graph('Mautic latency (ms)', [
            relayMetric('MauticLatency', 'batch', 'p50'),
            relayMetric('MauticLatency', 'batch', 'p99'),
          ]),
          graph('Queue depth', [
            this.eventsQueue.metricApproximateNumberOfMessagesVisible({ period: fiveMinutes }),
            this.deadLetterQueue.metricApproximateNumberOfMessagesVisible({ period: fiveMinutes }),
          ]),
          graph('Oldest event (s)', [
            this.eventsQueue.metricApproximateAgeOfOldestMessage({ period: fiveMinutes }),
          ]),
          graph('Token seconds left', [
            relayMetric('AccessTokenSecondsLeft', 'refresh', 'Minimum'),
            relayMetric('RefreshTokenSecondsLeft', 'refresh', 'Minimum'),
          ]),
        ],
      ],
    });

    new CfnOutput(this, 'IngestUrl', { value: `${this.api.apiEndpoint}/events` });
    new CfnOutput(this, 'EventsQueueUrl', { value: this.eventsQueue.queueUrl });
    new CfnOutput(this, 'DedupTableName', { value: this.dedupTable.tableName });
    new CfnOutput(this, 'DeadLetterQueueUrl', { value: this.deadLetterQueue.queueUrl });
    new CfnOutput(this, 'ClientSecretName', { value: names.client });
    new CfnOutput(this, 'TokenSecretName', { value: names.token });
    new CfnOutput(this, 'WebhookSecretName', { value: names.webhook });
    // Read by the operator commands (infra/cli/target.ts; refresh --env invokes the refresher) to find this environment.
    new CfnOutput(this, 'RefreshFunctionName', { value: this.refresh.function.functionName });
    new CfnOutput(this, 'DashboardName', { value: dashboard.dashboardName });
  }
}

function graph(title: string, metrics: cloudwatch.IMetric[]): cloudwatch.GraphWidget {
  return new cloudwatch.GraphWidget({ title, left: metrics, width: 8 });
}
