/**
 * Every metric the relay emits, in one place: the emitters may only use these names and units
 * (`MetricsSink` in ports.ts is typed by this table), and the stack's alarms and dashboard take
 * their names, namespace and dimensions from it (infra/aws/observability.ts). A test
 * (test/infra/metrics.test.ts) fails when an alarm or a widget watches a metric nothing emits,
 * or when an entry here is emitted by nothing.
 */

/** The CloudWatch units the relay's metrics use; Powertools' and CloudWatch's spell them alike. */
export type MetricUnit = 'Count' | 'Milliseconds' | 'Percent' | 'Seconds';

/** The relay's functions, by their Powertools service name (the `service` dimension). */
export type RelayService = 'ingest' | 'batch' | 'refresh';

interface MetricSpec {
  readonly unit: MetricUnit;
  /**
   * How the metric reaches CloudWatch. `addMetric`: the function calls `MetricsSink.addMetric`
   * and Powertools writes it with the function's service name as the only dimension.
   * `logFilter`: a metric filter on the function's log group counts a log event; such metrics
   * have no dimensions, and no code may emit them as well (they would count twice).
   */
  readonly madeBy: 'addMetric' | 'logFilter';
  /** The function that emits the metric, or whose log group the filter reads. */
  readonly service: RelayService;
  /** What one data point means. */
  readonly means: string;
}

export const METRICS = {
  EventsDelivered: {
    unit: 'Count',
    madeBy: 'addMetric',
    service: 'batch',
    means: 'Events of one invocation that Mautic accepted.',
  },
  EventsRejected: {
    unit: 'Count',
    madeBy: 'addMetric',
    service: 'batch',
    means: 'Events of one invocation put on the dead-letter queue.',
  },
  EventsRetried: {
    unit: 'Count',
    madeBy: 'addMetric',
    service: 'batch',
    means: 'Events of one invocation left to the queue for a later try.',
  },
  OldestRetriedEventAge: {
    unit: 'Seconds',
    madeBy: 'addMetric',
    service: 'batch',
    means:
      'Of the events one invocation sent back to the queue for a later try, the oldest one’s time since its first receive. SQS’s ApproximateAgeOfOldestMessage leaves out messages received three times or more, so it does not see them.',
  },
  MauticCalls: {
    unit: 'Count',
    madeBy: 'addMetric',
    service: 'batch',
    means: 'One Mautic batch call, whatever its answer.',
  },
  MauticLatency: {
    unit: 'Milliseconds',
    madeBy: 'addMetric',
    service: 'batch',
    means: 'How long one Mautic batch call took.',
  },
  BatchFill: {
    unit: 'Percent',
    madeBy: 'addMetric',
    service: 'batch',
    means: 'Items in one Mautic call, as a share of the most one call may carry.',
  },
  MauticCircuitOpen: {
    unit: 'Count',
    madeBy: 'addMetric',
    service: 'batch',
    means:
      'Per batch: 1 when Mautic’s circuit was not closed at its end (Mautic failing as a whole: its events held for the next probe), else 0.',
  },
  OutcomeWritesFailed: {
    unit: 'Count',
    madeBy: 'addMetric',
    service: 'batch',
    means:
      'Outcome records (contract §1.6) one invocation could not write: delivery went on without them, so `GET /events/{id}` and `events show` lag behind until a later write of the same events.',
  },
  TokenRefreshed: {
    unit: 'Count',
    madeBy: 'addMetric',
    service: 'refresh',
    means: 'The refresher stored new tokens from Mautic.',
  },
  TokenRefreshFailed: {
    unit: 'Count',
    madeBy: 'addMetric',
    service: 'refresh',
    means: 'A refresher run that ended in failure (its log says why).',
  },
  AccessTokenSecondsLeft: {
    unit: 'Seconds',
    madeBy: 'addMetric',
    service: 'refresh',
    means: 'Seconds until the stored access token expires, at each refresher run.',
  },
  RefreshTokenSecondsLeft: {
    unit: 'Seconds',
    madeBy: 'addMetric',
    service: 'refresh',
    means: 'Seconds until the stored refresh token expires (0 once Mautic refused it).',
  },
  MauticCallsFailed: {
    unit: 'Count',
    madeBy: 'logFilter',
    service: 'batch',
    means:
      'A Mautic call attempt that failed as a whole (network, timeout, 401, 403, 429, 5xx, a 400, 413 or 422 refusing the whole call): a log line with event mautic_call_failed.',
  },
  DeadLetterSendsFailed: {
    unit: 'Count',
    madeBy: 'logFilter',
    service: 'batch',
    means:
      'Events whose dead letter could not be sent (they stay on the events queue): the count of a log line with event dead_letter_failed.',
  },
  DedupStoreErrors: {
    unit: 'Count',
    madeBy: 'logFilter',
    service: 'ingest',
    means: 'An ingest request refused with 503 because its de-duplication table failed.',
  },
  RecordBacklogRefusals: {
    unit: 'Count',
    madeBy: 'logFilter',
    service: 'ingest',
    means:
      'An ingest request refused with 429 record_backlog: a record of it had had MAX_RECORD_EVENTS_PER_MINUTE events accepted in the last minute (a log line with event record_backlog).',
  },
} as const satisfies Record<string, MetricSpec>;

export type MetricName = keyof typeof METRICS;

/** The metrics a function emits itself, through `MetricsSink`. */
export type EmittedMetricName = {
  [Name in MetricName]: (typeof METRICS)[Name]['madeBy'] extends 'addMetric' ? Name : never;
}[MetricName];

/** The metrics a metric filter makes from a function's log lines. */
export type LogFilterMetricName = Exclude<MetricName, EmittedMetricName>;

/** The unit the catalog gives a metric. */
export type UnitOf<Name extends MetricName> = (typeof METRICS)[Name]['unit'];

/** The metrics namespace of one environment (Powertools writes there, the alarms read there). */
export function metricsNamespace(environment: string): string {
  return `MauticBatchRelay/${environment}`;
}

/** The dimensions a metric is written with (see `MetricSpec.madeBy`). */
export function metricDimensions(name: MetricName): Record<string, string> {
  const spec: MetricSpec = METRICS[name];
  return spec.madeBy === 'addMetric' ? { service: spec.service } : {};
}
