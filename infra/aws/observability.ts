import { Annotations, Duration, type Stack } from 'aws-cdk-lib';
import type * as apigw from 'aws-cdk-lib/aws-apigatewayv2';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as actions from 'aws-cdk-lib/aws-cloudwatch-actions';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as subscriptions from 'aws-cdk-lib/aws-sns-subscriptions';
import {
  type LogFilterMetricName,
  METRICS,
  type MetricName,
  type MetricUnit,
  metricDimensions,
  metricsNamespace,
  type UnitOf,
} from '../../functions/core/metrics.ts';
import { fewestSecondsLeftOnSchedule } from '../../functions/core/tokens/token-freshness.ts';
import { DEDUP_STORE_FAILED_EVENT } from '../../functions/shared/config.ts';
import { type RelaySettings, refreshPolicy } from './environments.ts';
import type { RelayFunctions } from './functions.ts';
import {
  type AlarmOn,
  above,
  FIVE_MINUTES,
  type LogMetric,
  type RelayMetric,
  retryAlarms,
} from './retry-alarms.ts';
import type { RelayQueues } from './storage.ts';

/** What the alarms and the dashboard watch. */
export interface Watched {
  readonly queues: RelayQueues;
  readonly functions: RelayFunctions;
  readonly api: apigw.HttpApi;
}

/** An alarm threshold in the unit the metric catalog gives its metric; the compiler holds one to the other. */
interface Threshold<Name extends MetricName> {
  readonly unit: UnitOf<Name>;
  readonly value: number;
}

/** Alarm thresholds that are facts of Mautic and of the design, not settings. */
/** At most: a short token lifetime lowers it (tokenAlarms). */
const ACCESS_TOKEN_ALARM: Threshold<'AccessTokenSecondsLeft'> = { unit: 'Seconds', value: 600 };
const REFRESH_TOKEN_ALARM: Threshold<'RefreshTokenSecondsLeft'> = {
  unit: 'Seconds',
  value: 2 * 86_400,
};

/**
 * The ingest's 5xx answers page as a share of its requests, and only when there are several in
 * a row of periods: a single 5xx is no outage, and anyone can cause a few (a body of 6 to 10 MB
 * passes API Gateway and fails Lambda's 6 MB invoke), which must not page on-call.
 */
export const INGEST_5XX_ALARM = { percent: 5, atLeast: 5, periods: 2 } as const;

/** The catalog's units as CloudWatch's, and as a dashboard title shows them. */
const UNITS: Readonly<Record<MetricUnit, { cloudwatch: cloudwatch.Unit; label: string }>> = {
  Count: { cloudwatch: cloudwatch.Unit.COUNT, label: 'count' },
  Milliseconds: { cloudwatch: cloudwatch.Unit.MILLISECONDS, label: 'ms' },
  Percent: { cloudwatch: cloudwatch.Unit.PERCENT, label: '%' },
  Seconds: { cloudwatch: cloudwatch.Unit.SECONDS, label: 's' },
};

/**
 * The log lines each metric filter counts: their stable `event` field, and the metric's value
 * (a field of the line, or 1 a line).
 */
const LOG_EVENTS: Readonly<Record<LogFilterMetricName, { event: string; value: string }>> = {
  DedupStoreErrors: { event: DEDUP_STORE_FAILED_EVENT, value: '1' },
  MauticCallsFailed: { event: 'mautic_call_failed', value: '1' },
  DeadLetterSendsFailed: { event: 'dead_letter_failed', value: '$.count' },
  RecordBacklogRefusals: { event: 'record_backlog', value: '1' },
};

/**
 * Alarms to an SNS topic (e-mailed when the environment names an address) and the dashboard.
 * The relay's own metrics are read from the metric catalog: its names, the environment's
 * namespace, and the dimensions Powertools writes them with.
 */
export function alarmsAndDashboard(
  stack: Stack,
  settings: RelaySettings,
  watched: Watched,
): cloudwatch.Dashboard {
  const relayMetric = relayMetrics(metricsNamespace(settings.name));
  const logMetric = logMetrics(stack, settings, watched);
  const alarm = alarmsTo(stack, alarmTopic(stack, settings));
  queueAndFunctionAlarms(alarm, settings, watched);
  retryAlarms(alarm, settings, relayMetric, logMetric);
  tokenAlarms(alarm, settings, relayMetric, watched.functions);
  ingestAlarms(alarm, logMetric, watched);
  return dashboard(stack, settings, { relayMetric, logMetric }, watched);
}

/** A metric of the catalog, where and how its emitter writes it. */
function relayMetrics(namespace: string): RelayMetric {
  return (name, statistic, period = FIVE_MINUTES) =>
    new cloudwatch.Metric({
      namespace,
      metricName: name,
      dimensionsMap: metricDimensions(name),
      statistic,
      period,
    });
}

/**
 * The metrics made from log lines (LOG_EVENTS), each by a metric filter on the log group of the
 * function the catalog names; read as sums.
 */
function logMetrics(stack: Stack, settings: RelaySettings, watched: Watched): LogMetric {
  const filters = new Map<LogFilterMetricName, logs.MetricFilter>();
  for (const [name, { event, value }] of Object.entries(LOG_EVENTS) as Array<
    [LogFilterMetricName, { event: string; value: string }]
  >) {
    const filter = new logs.MetricFilter(stack, `${name}Filter`, {
      logGroup: watched.functions[METRICS[name].service].logGroup,
      filterPattern: logs.FilterPattern.stringValue('$.event', '=', event),
      metricNamespace: metricsNamespace(settings.name),
      metricName: name,
      metricValue: value,
      unit: UNITS[METRICS[name].unit].cloudwatch,
    });
    filters.set(name, filter);
  }
  return (name, period = FIVE_MINUTES) =>
    (filters.get(name) as logs.MetricFilter).metric({ period, statistic: 'Sum' });
}

function alarmTopic(stack: Stack, settings: RelaySettings): sns.Topic {
  const topic = new sns.Topic(stack, 'Alarms', {
    displayName: `Mautic relay ${settings.name} alarms`,
    enforceSSL: true,
  });
  if (settings.alarmEmail)
    topic.addSubscription(new subscriptions.EmailSubscription(settings.alarmEmail));
  else if (settings.retainData)
    // An environment that keeps its data is someone's production: its alarms would page no one.
    Annotations.of(topic).addWarningV2(
      'mautic-relay:no-alarm-email',
      `Environment "${settings.name}" keeps its data (retainData) but has no alarmEmail: its alarms page no one. Set alarmEmail, or subscribe to its Alarms topic another way`,
    );
  return topic;
}

function alarmsTo(stack: Stack, topic: sns.Topic): AlarmOn {
  return (id, description, props) => {
    const created = new cloudwatch.Alarm(stack, id, { ...props, alarmDescription: description });
    created.addAlarmAction(new actions.SnsAction(topic));
    return created;
  };
}

function queueAndFunctionAlarms(alarm: AlarmOn, settings: RelaySettings, watched: Watched) {
  const { queues, functions } = watched;
  alarm(
    'DeadLetterAlarm',
    'Events are in the dead-letter queue: read their relay.reason attributes, fix, then redrive.',
    above(
      queues.deadLetter.metricApproximateNumberOfMessagesVisible({
        period: FIVE_MINUTES,
        statistic: 'Maximum',
      }),
    ),
  );
  alarm(
    'OldestEventAlarm',
    'Events wait too long in the queue without being delivered, as SQS reports it: is the batch function running, or failing? Events being retried may count here too; RetriedEventAgeAlarm watches them.',
    above(
      queues.events.metricApproximateAgeOfOldestMessage({
        period: FIVE_MINUTES,
        statistic: 'Maximum',
      }),
      settings.oldestEventAlarmSeconds,
    ),
  );
  alarm(
    'BatchErrorsAlarm',
    'The batch function failed: see its log group.',
    above(functions.batch.function.metricErrors({ period: FIVE_MINUTES, statistic: 'Sum' })),
  );
  alarm(
    'BatchThrottlesAlarm',
    'The batch function is throttled: raise the account concurrency or lower maxConcurrency.',
    above(functions.batch.function.metricThrottles({ period: FIVE_MINUTES, statistic: 'Sum' })),
  );
}

function tokenAlarms(
  alarm: AlarmOn,
  settings: RelaySettings,
  relayMetric: RelayMetric,
  functions: Watched['functions'],
) {
  // Below what a healthy refresher reports, which a short lifetime can bring under 600 s.
  const accessTokenThreshold = Math.min(
    ACCESS_TOKEN_ALARM.value,
    fewestSecondsLeftOnSchedule(
      settings.mauticAccessTokenLifetimeMinutes * 60,
      refreshPolicy(settings),
    ),
  );
  alarm(
    'RefreshFailedAlarm',
    'Token refresh failed: the refresher log names the fix.',
    above(
      new cloudwatch.MathExpression({
        expression: 'FILL(failed, 0) + FILL(errors, 0)',
        usingMetrics: {
          failed: relayMetric('TokenRefreshFailed', 'Sum'),
          errors: functions.refresh.function.metricErrors({
            period: FIVE_MINUTES,
            statistic: 'Sum',
          }),
        },
        period: FIVE_MINUTES,
      }),
    ),
  );
  alarm(
    'AccessTokenAlarm',
    'The Mautic access token is about to expire and is not being refreshed.',
    {
      // 15 minutes hold several scheduled runs: no data in that long means no refresher.
      metric: relayMetric('AccessTokenSecondsLeft', 'Minimum', Duration.minutes(15)),
      threshold: accessTokenThreshold,
      comparisonOperator: cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
      evaluationPeriods: 1,
      treatMissingData: cloudwatch.TreatMissingData.BREACHING,
    },
  );
  alarm(
    'RefreshTokenAlarm',
    'The Mautic refresh token expires within 2 days, or Mautic refused it (revoked, or spent by a refresh whose answer was lost): run "npx mautic-relay authorize".',
    {
      metric: relayMetric('RefreshTokenSecondsLeft', 'Minimum'),
      threshold: REFRESH_TOKEN_ALARM.value,
      comparisonOperator: cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
      evaluationPeriods: 1,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    },
  );
}

function ingestAlarms(alarm: AlarmOn, logMetric: LogMetric, watched: Watched) {
  // Every store failure the ingest meets (unreachable, throttled, denied, DynamoDB's own
  // errors) is one log line with this event; each means a request refused with 503.
  alarm(
    'DedupStoreAlarm',
    'The ingest could not use its de-duplication table: requests whose id could not be claimed were refused with 503 (senders retry); see the ingest log group (event dedup_store_failed).',
    above(logMetric('DedupStoreErrors')),
  );
  const { percent, atLeast, periods } = INGEST_5XX_ALARM;
  alarm(
    'Ingest5xxAlarm',
    `More than ${percent} % of the ingest endpoint's answers were 5xx (and at least ${atLeast}) in each of ${periods} periods of 5 minutes: senders are retrying; see the ingest log group.`,
    {
      metric: new cloudwatch.MathExpression({
        // Errors never outnumber requests: at least `atLeast` errors means requests > 0.
        expression: `IF(FILL(errors, 0) >= ${atLeast}, 100 * FILL(errors, 0) / requests, 0)`,
        usingMetrics: {
          errors: watched.api.metricServerError({ period: FIVE_MINUTES, statistic: 'Sum' }),
          requests: watched.api.metricCount({ period: FIVE_MINUTES, statistic: 'Sum' }),
        },
        period: FIVE_MINUTES,
        label: '5xx answers, % of requests',
      }),
      threshold: percent,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
      evaluationPeriods: periods,
      datapointsToAlarm: periods,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    },
  );
}

/**
 * The dashboard, named per region as well as per environment: a dashboard's name is global to
 * the account, and the same environment may run in two regions. Every line has its own label.
 */
function dashboard(
  stack: Stack,
  settings: RelaySettings,
  { relayMetric, logMetric }: { relayMetric: RelayMetric; logMetric: LogMetric },
  { queues }: Watched,
): cloudwatch.Dashboard {
  const period = FIVE_MINUTES;
  const as = (label: string, metric: cloudwatch.Metric) => metric.with({ label });
  return new cloudwatch.Dashboard(stack, 'Dashboard', {
    dashboardName: `MauticRelay-${settings.name}-${settings.region}`,
    widgets: [
      [
        graph('Events in', [
          as('queued', queues.events.metricNumberOfMessagesSent({ period, statistic: 'Sum' })),
          // Requests, not events: each refused whole because one record is past its bound.
          as('requests refused: record_backlog', logMetric('RecordBacklogRefusals')),
        ]),
        graph('Delivered, rejected, retried', [
          as('delivered', relayMetric('EventsDelivered', 'Sum')),
          as('dead-lettered', relayMetric('EventsRejected', 'Sum')),
          as('sent back for a later try', relayMetric('EventsRetried', 'Sum')),
        ]),
        graph(titled('Batch fill', 'BatchFill'), [
          as('average', relayMetric('BatchFill', 'Average')),
        ]),
        graph('Failures', [
          as('Mautic calls failed', logMetric('MauticCallsFailed')),
          as('dead letters not sent', logMetric('DeadLetterSendsFailed')),
        ]),
      ],
      [
        graph(titled('Mautic latency', 'MauticLatency'), [
          as('p50', relayMetric('MauticLatency', 'p50')),
          as('p99', relayMetric('MauticLatency', 'p99')),
        ]),
        graph('Queue depth', [
          as('events', queues.events.metricApproximateNumberOfMessagesVisible({ period })),
          as(
            'dead letters',
            queues.deadLetter.metricApproximateNumberOfMessagesVisible({ period }),
          ),
        ]),
        graph('Oldest event (s)', [
          as(
            'oldest in the queue (as SQS reports it)',
            queues.events.metricApproximateAgeOfOldestMessage({ period }),
          ),
          as('sent back, since its first receive', relayMetric('OldestRetriedEventAge', 'Maximum')),
        ]),
        graph('Token seconds left', [
          as('access token', relayMetric('AccessTokenSecondsLeft', 'Minimum')),
          as('refresh token', relayMetric('RefreshTokenSecondsLeft', 'Minimum')),
        ]),
      ],
    ],
  });
}

/** A widget title with the unit the catalog gives its metric. */
function titled(title: string, metric: MetricName): string {
  return `${title} (${UNITS[METRICS[metric].unit].label})`;
}

function graph(title: string, metrics: cloudwatch.IMetric[]): cloudwatch.GraphWidget {
  return new cloudwatch.GraphWidget({ title, left: metrics, width: 6 });
}
