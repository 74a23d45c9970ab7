import { Duration } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import type { LogFilterMetricName, MetricName } from '../../functions/core/metrics.ts';
import type { RelaySettings } from './environments.ts';

/**
 * The alarms that see a stuck queue from the batch function, and what every alarm of
 * observability.ts is made with.
 */

export const FIVE_MINUTES = Duration.minutes(5);
const FIFTEEN_MINUTES = Duration.minutes(15);

export type RelayMetric = (
  name: MetricName,
  statistic: string,
  period?: Duration,
) => cloudwatch.Metric;
export type LogMetric = (name: LogFilterMetricName, period?: Duration) => cloudwatch.Metric;
export type AlarmOn = (
  id: string,
  description: string,
  props: Omit<cloudwatch.AlarmProps, 'alarmDescription'>,
) => cloudwatch.Alarm;

/** An alarm on any data point above `threshold` in one period; no data is no alarm. */
export function above(metric: cloudwatch.IMetric, threshold = 0) {
  return {
    metric,
    threshold,
    comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
    evaluationPeriods: 1,
    treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
  };
}

/** CloudWatch's longest evaluation window (period × evaluation periods) for periods under an hour. */
const MAX_EVALUATION_SECONDS = 86_400;

/**
 * `times` breaching periods in a window where a failure that lasts shows at least that often: a
 * retried event comes back at most `gapSeconds` apart, so every run of ceil(gap / period)
 * periods holds one of its tries (there is no data in between). No data is not breaching: the
 * alarm clears once a window passes with fewer breaches.
 */
function sustained(period: Duration, times: number, gapSeconds: number) {
  const span = Math.ceil(gapSeconds / period.toSeconds());
  const evaluationPeriods = Math.min(
    times * span,
    Math.floor(MAX_EVALUATION_SECONDS / period.toSeconds()),
  );
  return {
    evaluationPeriods,
    datapointsToAlarm: Math.max(1, Math.min(times, Math.floor(evaluationPeriods / span))),
  };
}

/**
 * What a stuck queue looks like from the batch function: events it keeps sending back, their
 * age since their first receive, Mautic calls none of which succeed, and dead letters it could
 * not send. A retried event comes back at most retryMaxDelaySeconds later, and is reported at
 * the end of the invocation that takes it (batchTimeoutSeconds at most): the alarms watch
 * windows that long, or a lone retried event would leave periods without data between its tries.
 */
export function retryAlarms(
  alarm: AlarmOn,
  settings: RelaySettings,
  relayMetric: RelayMetric,
  logMetric: LogMetric,
) {
  const gap = settings.retryMaxDelaySeconds + settings.batchTimeoutSeconds;
  const age = sustained(FIVE_MINUTES, 1, gap);
  const retried = sustained(FIFTEEN_MINUTES, 3, gap);
  const failing = sustained(FIFTEEN_MINUTES, 2, gap);
  alarm(
    'RetriedEventAgeAlarm',
    `Events sent back for a later try have waited longer than oldestEventAlarmSeconds since their first receive: Mautic down, refusing the token, rate limiting, or an entity-wide 403. See the batch log (events_retried, mautic_call_failed). It clears after ${age.evaluationPeriods * 5} minutes without one that old.`,
    {
      ...above(relayMetric('OldestRetriedEventAge', 'Maximum'), settings.oldestEventAlarmSeconds),
      ...age,
    },
  );
  alarm(
    'EventsRetriedAlarm',
    `Events were sent back for a later try in ${retried.datapointsToAlarm} of the last ${retried.evaluationPeriods} quarter hours: deliveries keep failing. See the batch log (events_retried: the reasons).`,
    { ...above(relayMetric('EventsRetried', 'Sum', FIFTEEN_MINUTES)), ...retried },
  );
  alarm(
    'MauticCallsFailedAlarm',
    `In ${failing.datapointsToAlarm} of the last ${failing.evaluationPeriods} quarter hours, Mautic calls failed and none succeeded (network, timeout, 401, 403, 429, 5xx, a whole call refused with 400, 413 or 422): the batch log’s mautic_call_failed lines name the error. A failure with a success in the same quarter hour (a 429 waited out, a token renewed, a call narrowed down) does not count.`,
    {
      ...above(
        new cloudwatch.MathExpression({
          // The failed calls of a quarter hour in which no call succeeded (MauticCalls counts
          // every call, failed or not), else 0.
          expression: 'IF(FILL(failed, 0) >= FILL(calls, 0), FILL(failed, 0), 0)',
          usingMetrics: {
            failed: logMetric('MauticCallsFailed', FIFTEEN_MINUTES),
            calls: relayMetric('MauticCalls', 'Sum', FIFTEEN_MINUTES),
          },
          period: FIFTEEN_MINUTES,
          label: 'failed Mautic calls, none succeeding',
        }),
      ),
      ...failing,
    },
  );
  alarm(
    'DeadLetterSendFailedAlarm',
    'The batch function could not send dead letters (event dead_letter_failed): those events stay on the events queue and are tried again; check the dead-letter queue and the batch role.',
    above(logMetric('DeadLetterSendsFailed')),
  );
}
