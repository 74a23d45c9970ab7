import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import { describe, expect, it } from 'vitest';
import {
  METRICS,
  type MetricName,
  metricDimensions,
  metricsNamespace,
} from '../../functions/core/metrics.ts';
import { relayStack } from './synth.ts';

/** One use of a metric of the relay's namespace in a template. */
interface MetricUse {
  /** What uses it: "alarm <logical id>", "dashboard <logical id>", "metric filter <logical id>". */
  where: string;
  name: string;
  dimensions: Record<string, string>;
}

type Resources = Record<string, { Properties: Record<string, unknown> }>;

interface CfnMetric {
  Namespace?: string;
  MetricName?: string;
  Dimensions?: Array<{ Name: string; Value: string }>;
}

/** The metrics of `namespace` that the template's alarms and dashboards watch. */
function watchedMetrics(template: Template, namespace: string): MetricUse[] {
  const uses: MetricUse[] = [];
  const alarms = template.findResources('AWS::CloudWatch::Alarm') as Resources;
  for (const [id, { Properties }] of Object.entries(alarms)) {
    const stats = (Properties.Metrics ?? []) as Array<{ MetricStat?: { Metric: CfnMetric } }>;
    for (const metric of [Properties as CfnMetric, ...stats.map((m) => m.MetricStat?.Metric)]) {
      if (metric?.Namespace !== namespace) continue;
      uses.push({
        where: `alarm ${id}`,
        name: String(metric.MetricName),
        dimensions: Object.fromEntries((metric.Dimensions ?? []).map((d) => [d.Name, d.Value])),
      });
    }
  }
  const dashboards = template.findResources('AWS::CloudWatch::Dashboard') as Resources;
  for (const [id, { Properties }] of Object.entries(dashboards)) {
    for (const widget of dashboardWidgets(Properties.DashboardBody)) {
      // A widget's metric: [namespace, name, dimension, value, …, options?].
      for (const row of widget.properties?.metrics ?? []) {
        const [rowNamespace, name, ...rest] = row;
        if (rowNamespace !== namespace) continue;
        const pairs = rest.filter((part) => typeof part === 'string');
        const dimensions = Object.fromEntries(
          pairs.flatMap((key, i) => (i % 2 === 0 ? [[key, String(pairs[i + 1])]] : [])),
        );
        uses.push({ where: `dashboard ${id}`, name: String(name), dimensions });
      }
    }
  }
  return uses;
}

/**
 * The widgets of a dashboard body. The body is JSON joined with references (queue names, the
 * region); each reference becomes a placeholder word, which leaves it valid JSON.
 */
function dashboardWidgets(body: unknown): Array<{ properties?: { metrics?: unknown[][] } }> {
  const join = (body as { 'Fn::Join'?: [string, unknown[]] })['Fn::Join'];
  const text = join
    ? join[1].map((part) => (typeof part === 'string' ? part : 'REFERENCE')).join(join[0])
    : String(body);
  return JSON.parse(text).widgets;
}

/** The metrics of `namespace` that the template's log metric filters make. */
function filteredMetrics(template: Template, namespace: string): MetricUse[] {
  const filters = template.findResources('AWS::Logs::MetricFilter') as Resources;
  return Object.entries(filters).flatMap(([id, { Properties }]) =>
    (Properties.MetricTransformations as Array<{ MetricNamespace: string; MetricName: string }>)
      .filter((transformation) => transformation.MetricNamespace === namespace)
      .map((transformation) => ({
        where: `metric filter ${id}`,
        name: transformation.MetricName,
        dimensions: {},
      })),
  );
}

/** Each metric name some function's code passes to `addMetric`, with the files that do. */
function addMetricCalls(): Map<string, string[]> {
  const calls = new Map<string, string[]>();
  const files = readdirSync('functions', { recursive: true, encoding: 'utf8' });
  for (const file of files.filter((name) => name.endsWith('.ts'))) {
    const source = readFileSync(join('functions', file), 'utf8');
    for (const [, name] of source.matchAll(/\baddMetric\(\s*['"`]([^'"`]+)['"`]/g)) {
      calls.set(String(name), [...(calls.get(String(name)) ?? []), file]);
    }
  }
  return calls;
}

function isCatalogued(name: string): name is MetricName {
  return Object.hasOwn(METRICS, name);
}

/**
 * What is wrong between the template, the catalog and the code: a metric watched that the
 * catalog lacks, that nothing emits, or with other dimensions than it is written with; a
 * catalogued metric nothing emits; a metric emitted that the catalog lacks, or made twice.
 */
function metricProblems(
  template: Template,
  namespace: string,
  calls: ReadonlyMap<string, string[]> = addMetricCalls(),
): string[] {
  const filtered = filteredMetrics(template, namespace);
  const problems: string[] = [];
  const emitted = (name: MetricName) =>
    METRICS[name].madeBy === 'addMetric'
      ? calls.has(name)
      : filtered.some((made) => made.name === name);
  for (const use of watchedMetrics(template, namespace)) {
    if (!isCatalogued(use.name)) {
      problems.push(`${use.where} watches ${use.name}, which the metric catalog does not have`);
    } else if (!emitted(use.name)) {
      problems.push(`${use.where} watches ${use.name}, which nothing emits`);
    } else if (JSON.stringify(use.dimensions) !== JSON.stringify(metricDimensions(use.name))) {
      problems.push(
        `${use.where} watches ${use.name} with dimensions ${JSON.stringify(use.dimensions)}; it is written with ${JSON.stringify(metricDimensions(use.name))}`,
      );
    }
  }
  for (const name of Object.keys(METRICS) as MetricName[]) {
    if (!emitted(name)) problems.push(`${name} is in the metric catalog, but nothing emits it`);
  }
  for (const [name, files] of calls) {
    if (!isCatalogued(name) || METRICS[name].madeBy !== 'addMetric')
      problems.push(`${files.join(', ')} emit ${name}, which the catalog does not say they emit`);
  }
  for (const made of filtered) {
    if (!isCatalogued(made.name) || METRICS[made.name].madeBy !== 'logFilter')
      problems.push(`${made.where} makes ${made.name}, which the catalog does not say it makes`);
  }
  return problems;
}

function synthesized(name: string, change: (stack: Stack) => void = () => {}) {
  const { stack, settings } = relayStack(name);
  change(stack);
  return { template: Template.fromStack(stack), namespace: metricsNamespace(settings.name) };
}

describe('the metric catalog and the stack', () => {
  it('watches only catalogued metrics that something emits, with their dimensions; emits every catalogued metric', () => {
    for (const name of ['dev', 'prod']) {
      const { template, namespace } = synthesized(name);

      expect(metricProblems(template, namespace)).toEqual([]);
      // The collectors found the alarms', the dashboard's and the filter's metrics.
      const uses = [
        ...watchedMetrics(template, namespace),
        ...filteredMetrics(template, namespace),
      ];
      expect(new Set(uses.map((use) => use.where.replace(/ \S+$/, '')))).toEqual(
        new Set(['alarm', 'dashboard', 'metric filter']),
      );
    }
  });

  it('gives every function the namespace the alarms read, and a service name the catalog knows', () => {
    const { template, namespace } = synthesized('dev');
    const functions = Object.values(template.findResources('AWS::Lambda::Function')).filter(
      (fn) => fn.Properties.Environment?.Variables?.POWERTOOLS_SERVICE_NAME,
    );
    const variables = functions.map((fn) => fn.Properties.Environment.Variables);

    expect(variables.map((v) => v.POWERTOOLS_METRICS_NAMESPACE)).toEqual([
      namespace,
      namespace,
      namespace,
    ]);
    const services = new Set(variables.map((v) => v.POWERTOOLS_SERVICE_NAME));
    for (const spec of Object.values(METRICS)) expect(services).toContain(spec.service);
  });

  it('counts with each metric filter a log event that its function’s code writes', () => {
    const { template } = synthesized('dev');
    const code = readdirSync('functions', { recursive: true, encoding: 'utf8' })
      .filter((name) => name.endsWith('.ts'))
      .map((name) => readFileSync(join('functions', name), 'utf8'))
      .join('\n');
    const patterns = Object.values(
      template.findResources('AWS::Logs::MetricFilter') as Resources,
    ).map(({ Properties }) => String(Properties.FilterPattern));

    expect(patterns.length).toBe(
      Object.values(METRICS).filter((spec) => spec.madeBy === 'logFilter').length,
    );
    for (const pattern of patterns) {
      const event = /^\{ \$\.event = "([a-z_]+)" \}$/.exec(pattern)?.[1];
      expect(event, pattern).toBeDefined();
      // Written as a literal where it is logged, or as a constant's value.
      expect(code).toMatch(new RegExp(`(event: |= )'${event}'`));
    }
  });

  it('finds an alarm or a widget that watches a metric nothing emits, or with the wrong dimensions', () => {
    const { template, namespace } = synthesized('dev', (stack) => {
      const ours = (metricName: string, dimensionsMap: Record<string, string>) =>
        new cloudwatch.Metric({ namespace: metricsNamespace('dev'), metricName, dimensionsMap });
      new cloudwatch.Alarm(stack, 'BogusAlarm', {
        metric: ours('EventsDropped', { service: 'batch' }),
        threshold: 0,
        evaluationPeriods: 1,
      });
      new cloudwatch.Alarm(stack, 'WrongServiceAlarm', {
        metric: ours('TokenRefreshFailed', { service: 'batch' }),
        threshold: 0,
        evaluationPeriods: 1,
      });
      new cloudwatch.Dashboard(stack, 'BogusDashboard', {
        widgets: [[new cloudwatch.GraphWidget({ left: [ours('QueueLag', {})] })]],
      });
    });

    expect(metricProblems(template, namespace)).toEqual([
      expect.stringMatching(/^alarm BogusAlarm\w* watches EventsDropped, which the metric catalog/),
      expect.stringMatching(
        /^alarm WrongServiceAlarm\w* watches TokenRefreshFailed with dimensions {"service":"batch"}; it is written with {"service":"refresh"}$/,
      ),
      expect.stringMatching(/^dashboard BogusDashboard\w* watches QueueLag, which the metric/),
    ]);
  });

  it('finds a catalogued metric that nothing emits, and code that emits a metric the catalog lacks', () => {
    const { template, namespace } = synthesized('dev');
    const calls = new Map(addMetricCalls());
    calls.delete('TokenRefreshFailed');
    calls.set('EventsLost', ['batch/handler.ts']);

    expect(metricProblems(template, namespace, calls)).toEqual([
      expect.stringMatching(
        /^alarm RefreshFailedAlarm\w* watches TokenRefreshFailed, which nothing emits$/,
      ),
      'TokenRefreshFailed is in the metric catalog, but nothing emits it',
      'batch/handler.ts emit EventsLost, which the catalog does not say they emit',
    ]);
  });
});
