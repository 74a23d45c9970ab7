import {
  type CloudWatchClient,
  GetMetricDataCommand,
  type MetricDataQuery,
} from '@aws-sdk/client-cloudwatch';
import { metricDimensions, metricsNamespace } from '../../../functions/core/metrics.ts';
import { localEndpointsPath, readLocalEndpoints } from '../local-endpoints.ts';
import type { Target } from '../target.ts';

/** The Overview's chart and Mautic's call time; the local stack's control endpoint says the same. */
export interface Flow {
  start: string;
  periodSeconds: number;
  counts: Record<'accepted' | 'delivered' | 'retrying' | 'deadLettered', number[]>;
  mautic: { calls: number; meanMs: number | null };
}

const HOUR_MS = 3_600_000;
const MINUTE_MS = 60_000;

/**
 * The per-minute counts of the last hour from the metrics the stack already emits: the events
 * the ingest queued (SQS's NumberOfMessagesSent on the events queue, which a redrive's sends
 * count too), and the batch function's EventsDelivered, EventsRetried and EventsRejected;
 * Mautic's calls and mean call time over the last five minutes.
 */
export function flowQueries(environment: string, eventsQueueUrl: string): MetricDataQuery[] {
  const relay = (
    id: string,
    name: 'EventsDelivered' | 'EventsRetried' | 'EventsRejected' | 'MauticLatency',
    stat: string,
  ): MetricDataQuery => ({
    Id: id,
    MetricStat: {
      Metric: {
        Namespace: metricsNamespace(environment),
        MetricName: name,
        Dimensions: Object.entries(metricDimensions(name)).map(([Name, Value]) => ({
          Name,
          Value,
        })),
      },
      Period: 60,
      Stat: stat,
    },
  });
  return [
    {
      Id: 'accepted',
      MetricStat: {
        Metric: {
          Namespace: 'AWS/SQS',
          MetricName: 'NumberOfMessagesSent',
          Dimensions: [{ Name: 'QueueName', Value: eventsQueueUrl.split('/').pop() ?? '' }],
        },
        Period: 60,
        Stat: 'Sum',
      },
    },
    relay('delivered', 'EventsDelivered', 'Sum'),
    relay('retrying', 'EventsRetried', 'Sum'),
    relay('deadLettered', 'EventsRejected', 'Sum'),
    relay('calls', 'MauticLatency', 'SampleCount'),
    relay('latency', 'MauticLatency', 'Average'),
  ];
}

/** The last hour from CloudWatch, minute by minute, oldest first (a minute without data is 0). */
export async function cloudFlow(
  cloudwatch: CloudWatchClient,
  environment: string,
  eventsQueueUrl: string,
  now: number,
): Promise<Flow> {
  const end = Math.floor(now / MINUTE_MS) * MINUTE_MS + MINUTE_MS;
  const start = end - HOUR_MS;
  const { MetricDataResults = [] } = await cloudwatch.send(
    new GetMetricDataCommand({
      StartTime: new Date(start),
      EndTime: new Date(end),
      MetricDataQueries: flowQueries(environment, eventsQueueUrl),
    }),
  );
  const series = (id: string) => {
    const minutes = new Array<number>(60).fill(0);
    const result = MetricDataResults.find((r) => r.Id === id);
    (result?.Timestamps ?? []).forEach((time, i) => {
      const slot = Math.floor((time.getTime() - start) / MINUTE_MS);
      if (slot >= 0 && slot < 60) minutes[slot] = result?.Values?.[i] ?? 0;
    });
    return minutes;
  };
  const recent = (values: number[]) => values.slice(-5);
  const calls = recent(series('calls')).reduce((a, b) => a + b, 0);
  const latency = recent(series('latency'));
  const callsPerMinute = recent(series('calls'));
  const weighted = latency.reduce((sum, ms, i) => sum + ms * (callsPerMinute[i] ?? 0), 0);
  return {
    start: new Date(start).toISOString(),
    periodSeconds: 60,
    counts: {
      accepted: series('accepted'),
      delivered: series('delivered'),
      retrying: series('retrying'),
      deadLettered: series('deadLettered'),
    },
    mautic: { calls, meanMs: calls === 0 ? null : Math.round(weighted / calls) },
  };
}

/** The running `npm start`'s counters, from its control endpoint; null when it has none. */
async function localFlow(env: Readonly<Record<string, string | undefined>>): Promise<Flow | null> {
  const controlUrl = readLocalEndpoints(localEndpointsPath(env))?.controlUrl;
  if (!controlUrl) return null;
  const response = await fetch(`${controlUrl}/flow`, { signal: AbortSignal.timeout(5000) });
  if (!response.ok) return null;
  return (await response.json()) as Flow;
}

/** The Overview's flow for the console's target. */
export function flowOf(
  target: Target,
  env: Readonly<Record<string, string | undefined>>,
  now: () => number,
): () => Promise<Flow | null> {
  const { cloudwatch } = target;
  if (target.local || !cloudwatch) return () => localFlow(env);
  return () => cloudFlow(cloudwatch, target.name, target.eventsQueueUrl, now());
}
