/**
 * The Overview's per-minute flow: in the cloud, the CloudWatch query over the metrics the stack
 * emits; locally, the counters the local stack keeps of the same metrics.
 */
import { CloudWatchClient, GetMetricDataCommand } from '@aws-sdk/client-cloudwatch';
import { mockClient } from 'aws-sdk-client-mock';
import { describe, expect, it } from 'vitest';
import { cloudFlow, flowQueries } from '../../infra/cli/console/console-flow.ts';
import { CountingMetrics, FlowCounters } from '../../infra/local/flow-counters.ts';

const QUEUE = 'https://sqs.eu-west-1.amazonaws.com/123456789012/MauticRelay-dev-events.fifo';

describe('the flow in the cloud', () => {
  it('asks CloudWatch for the metrics the stack emits, by the catalog’s namespace and dimensions', () => {
    const queries = flowQueries('dev', QUEUE);
    const byId = Object.fromEntries(queries.map((q) => [q.Id, q.MetricStat]));
    expect(byId.accepted).toEqual({
      Metric: {
        Namespace: 'AWS/SQS',
        MetricName: 'NumberOfMessagesSent',
        Dimensions: [{ Name: 'QueueName', Value: 'MauticRelay-dev-events.fifo' }],
      },
      Period: 60,
      Stat: 'Sum',
    });
    for (const [id, name] of [
      ['delivered', 'EventsDelivered'],
      ['retrying', 'EventsRetried'],
      ['deadLettered', 'EventsRejected'],
    ]) {
      expect(byId[id ?? '']).toEqual({
        Metric: {
          Namespace: 'MauticBatchRelay/dev',
          MetricName: name,
          Dimensions: [{ Name: 'service', Value: 'batch' }],
        },
        Period: 60,
        Stat: 'Sum',
      });
    }
    expect(byId.latency?.Stat).toBe('Average');
    expect(byId.calls?.Stat).toBe('SampleCount');
  });

  it('lays the answer out minute by minute over the last hour, and weighs the call time by calls', async () => {
    const now = Date.parse('2026-11-28T10:30:20Z');
    const minute = (m: number) => new Date(Date.parse('2026-11-28T10:00:00Z') + m * 60_000);
    const cloudwatch = mockClient(CloudWatchClient);
    cloudwatch.on(GetMetricDataCommand).resolves({
      MetricDataResults: [
        { Id: 'accepted', Timestamps: [minute(30), minute(29)], Values: [7, 3] },
        { Id: 'delivered', Timestamps: [minute(30)], Values: [5] },
        { Id: 'calls', Timestamps: [minute(30), minute(29)], Values: [3, 1] },
        { Id: 'latency', Timestamps: [minute(30), minute(29)], Values: [100, 200] },
      ],
    });
    const flow = await cloudFlow(new CloudWatchClient({}), 'dev', QUEUE, now);
    const input = cloudwatch.commandCalls(GetMetricDataCommand)[0]?.args[0].input;
    expect(input?.StartTime).toEqual(new Date('2026-11-28T09:31:00Z'));
    expect(input?.EndTime).toEqual(new Date('2026-11-28T10:31:00Z'));
    expect(flow.start).toBe('2026-11-28T09:31:00.000Z');
    expect(flow.counts.accepted).toHaveLength(60);
    expect(flow.counts.accepted.slice(-2)).toEqual([3, 7]);
    expect(flow.counts.delivered.reduce((a, b) => a + b)).toBe(5);
    expect(flow.counts.deadLettered.every((n) => n === 0)).toBe(true);
    expect(flow.mautic).toEqual({ calls: 4, meanMs: 125 });
    cloudwatch.restore();
  });
});

describe('the flow of the local stack', () => {
  it('counts what the batch function emits and the ingest accepts, per minute, for an hour', () => {
    let now = Date.parse('2026-11-28T10:00:30Z');
    const counters = new FlowCounters(() => now);
    const metrics = new CountingMetrics(counters, { namespace: 'test', serviceName: 'local' });
    counters.add('accepted', 3);
    metrics.addMetric('EventsDelivered', 'Count', 2);
    metrics.addMetric('EventsRejected', 'Count', 1);
    metrics.addMetric('MauticLatency', 'Milliseconds', 40);
    now += 60_000;
    metrics.addMetric('EventsRetried', 'Count', 4);
    metrics.addMetric('MauticLatency', 'Milliseconds', 60);
    const report = counters.report();
    expect(report.start).toBe('2026-11-28T09:02:00.000Z');
    expect(report.counts.accepted.slice(-2)).toEqual([3, 0]);
    expect(report.counts.delivered.slice(-2)).toEqual([2, 0]);
    expect(report.counts.deadLettered.slice(-2)).toEqual([1, 0]);
    expect(report.counts.retrying.slice(-2)).toEqual([0, 4]);
    expect(report.mautic).toEqual({ calls: 2, meanMs: 50 });
    now += 3_600_000;
    expect(counters.report().counts.accepted.every((n) => n === 0)).toBe(true);
    expect(counters.report().mautic).toEqual({ calls: 0, meanMs: null });
  });
});
