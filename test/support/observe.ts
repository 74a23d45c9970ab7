/**
 * The tests' Logger and MetricsSink: one recorder that keeps what the code under test logs and
 * emits, for assertions. Every test that reads log lines or metrics takes them from here.
 */
import type { Logger, MetricsSink, MetricUnit } from '../../functions/core/ports.ts';

export interface LogLine {
  level: 'info' | 'warn' | 'error';
  message: string;
  /** The extra objects merged into one, as Powertools merges them into the printed line. */
  fields: Record<string, unknown>;
  /** The extra objects as the caller passed them. */
  extra: Array<Record<string, unknown>>;
}

/**
 * One metric data point. The name is a plain string: the sink's type admits only the catalog's
 * names, and a test asks for any name, including one that must not have been emitted.
 */
type MetricPoint = [name: string, unit: MetricUnit, value: number];

/** A Logger and MetricsSink that keep what they are given, for tests to read. */
export function recorder() {
  const lines: LogLine[] = [];
  const emitted: MetricPoint[] = [];
  const log =
    (level: LogLine['level']) =>
    (message: string, ...extra: Array<Record<string, unknown>>) => {
      lines.push({ level, message, fields: Object.assign({}, ...extra), extra: [...extra] });
    };
  const logger: Logger = { info: log('info'), warn: log('warn'), error: log('error') };
  const sink: MetricsSink = { addMetric: (name, unit, value) => emitted.push([name, unit, value]) };
  return {
    logger,
    metrics: sink,
    lines,
    /** Every data point, in the order emitted. */
    emitted,
    /** Forgets every line and data point; the arrays above stay the same objects. */
    clear() {
      lines.length = 0;
      emitted.length = 0;
    },
    /** Every line as JSON, for scanning for secrets. */
    text: () => lines.map((line) => JSON.stringify(line)).join('\n'),
    /** The lines carrying this stable `event` field. */
    events: (name: string) => lines.filter((line) => line.fields.event === name),
    /** The sum of a metric's values. */
    metric: (name: string) =>
      emitted.filter(([metric]) => metric === name).reduce((sum, [, , value]) => sum + value, 0),
  };
}

/**
 * A Logger alone whose `lines` read as Powertools prints them: one JSON object a line, the level,
 * the message and the merged fields side by side, to parse or to scan for what must not be logged.
 */
export function recordingLogger(): Logger & { readonly lines: string[] } {
  const { logger, lines } = recorder();
  return {
    ...logger,
    get lines() {
      return lines.map(({ level, message, fields }) =>
        JSON.stringify({ level, message, ...fields }),
      );
    },
  };
}
