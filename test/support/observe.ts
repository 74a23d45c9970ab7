import type { Logger, MetricsSink, MetricUnit } from '../../functions/core/ports.ts';

export interface LogLine {
  level: 'info' | 'warn' | 'error';
  message: string;
  fields: Record<string, unknown>;
}

/** A Logger and MetricsSink that keep what they are given, for tests to read. */
export function recorder() {
  const lines: LogLine[] = [];
  const metrics: Array<[string, MetricUnit, number]> = [];
  const log =
    (level: LogLine['level']) =>
    (message: string, ...extra: Array<Record<string, unknown>>) => {
      lines.push({ level, message, fields: Object.assign({}, ...extra) });
    };
  const logger: Logger = { info: log('info'), warn: log('warn'), error: log('error') };
  const sink: MetricsSink = { addMetric: (name, unit, value) => metrics.push([name, unit, value]) };
  return {
    logger,
    metrics: sink,
    lines,
    /** Every line as JSON, for scanning for secrets. */
    text: () => lines.map((line) => JSON.stringify(line)).join('\n'),
    /** The lines carrying this stable `event` field. */
    events: (name: string) => lines.filter((line) => line.fields.event === name),
    /** The sum of a metric's values. */
    metric: (name: string) =>
      metrics.filter(([metric]) => metric === name).reduce((sum, [, , value]) => sum + value, 0),
  };
}
