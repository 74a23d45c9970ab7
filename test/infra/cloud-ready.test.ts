import { readFileSync } from 'node:fs';
import { Annotations, Match, Template } from 'aws-cdk-lib/assertions';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { MAX_MESSAGE_BYTES } from '../../functions/core/ingest/queue-messages.ts';
import { environmentSettings, PLACEHOLDER_ACCOUNT } from '../../infra/aws/environments.ts';
import { MAX_MESSAGE_SIZE_BYTES } from '../../infra/aws/storage.ts';
import type { CfnTemplate } from '../support/cfn-schema.ts';
import { cdkContext, environments, relayStack } from './synth.ts';
import { limitProblems } from './template-limits.ts';

afterEach(() => {
  vi.restoreAllMocks();
});

/**
 * The synth prints each warning it finds (as `cdk synth` does) on stderr: a test that makes them
 * on purpose reads them from the annotations, and keeps them out of the run's output, where
 * they would look like a problem with the project.
 */
function quietSynth() {
  vi.spyOn(console, 'error').mockImplementation(() => {});
}

/** What the stack must do to work in the cloud as AWS documents it. */

function template(name = 'dev', overrides: Record<string, unknown> = {}) {
  return Template.fromStack(relayStack(name, overrides).stack);
}

/** The recommended feature flags left off in cdk.json, each with why (none so far). */
const FLAGS_LEFT_OFF: Readonly<Record<string, string>> = {};

describe('the stack in a real account', () => {
  it('names the API access log group under /aws/vendedlogs/, unique per stack, kept only with the data', () => {
    for (const [name, policy] of [
      ['dev', 'Delete'],
      ['prod', 'Retain'],
    ] as const) {
      const groups = Object.entries(template(name).findResources('AWS::Logs::LogGroup')).filter(
        ([id]) => id.startsWith('ApiAccessLogs'),
      );

      expect(groups).toHaveLength(1);
      const [, group] = groups[0] as [string, { Properties: Record<string, unknown> }];
      expect(group.Properties.LogGroupName).toEqual({
        'Fn::Join': [
          '/',
          [
            `/aws/vendedlogs/MauticRelay-${name}/api-access`,
            { 'Fn::Select': [2, { 'Fn::Split': ['/', { Ref: 'AWS::StackId' }] }] },
          ],
        ],
      });
      expect(group).toMatchObject({ DeletionPolicy: policy, UpdateReplacePolicy: policy });
    }
  });

  it('names the dashboard after the environment and its region, so two regions never collide', () => {
    const names = ['us-east-1', 'eu-west-1'].map((region) =>
      Object.values(template('prod', { region }).findResources('AWS::CloudWatch::Dashboard')).map(
        (dashboard) => dashboard.Properties.DashboardName,
      ),
    );

    expect(names).toEqual([['MauticRelay-prod-us-east-1'], ['MauticRelay-prod-eu-west-1']]);
  });

  it('labels every line of every dashboard widget, no two alike in one widget', () => {
    const [dashboard] = Object.values(template().findResources('AWS::CloudWatch::Dashboard'));
    const join = dashboard?.Properties.DashboardBody['Fn::Join'] as [string, unknown[]];
    const body = JSON.parse(
      join[1].map((part) => (typeof part === 'string' ? part : 'REFERENCE')).join(join[0]),
    ) as { widgets: Array<{ properties: { title: string; metrics: unknown[][] } }> };

    expect(body.widgets.length).toBeGreaterThan(6);
    for (const { properties } of body.widgets) {
      const labels = properties.metrics.map(
        (row) => (row.at(-1) as { label?: string } | undefined)?.label,
      );
      expect(
        labels.every((label) => typeof label === 'string'),
        properties.title,
      ).toBe(true);
      expect(new Set(labels).size, properties.title).toBe(labels.length);
    }
  });

  it('states the queues’ maximum message size: the 1 MiB the ingest and the dead letters rely on', () => {
    const queues = Object.values(template().findResources('AWS::SQS::Queue'));

    expect(queues).toHaveLength(2);
    for (const queue of queues) expect(queue.Properties.MaximumMessageSize).toBe(1_048_576);
    expect(MAX_MESSAGE_SIZE_BYTES).toBeGreaterThan(MAX_MESSAGE_BYTES);
  });

  it('sets every feature flag CDK recommends to its recommended value, or says why not', () => {
    const recommended = JSON.parse(
      readFileSync('node_modules/aws-cdk-lib/recommended-feature-flags.json', 'utf8'),
    ) as Record<string, unknown>;
    const differing = Object.entries(recommended)
      .filter(([flag, value]) => JSON.stringify(cdkContext[flag]) !== JSON.stringify(value))
      .map(([flag]) => flag);

    expect(Object.keys(recommended).length).toBeGreaterThan(50);
    expect(differing.sort()).toEqual(Object.keys(FLAGS_LEFT_OFF).sort());
  });

  it('binds every environment’s stack to the account and region cdk.json names', () => {
    for (const name of Object.keys(environments)) {
      const { stack, settings, app } = relayStack(name, {
        account: '111122223333',
        region: 'eu-central-1',
        mauticBaseUrl: 'https://mautic.acme.test',
        alarmEmail: 'ops@acme.test',
      });

      expect([stack.account, stack.region]).toEqual([settings.account, settings.region]);
      // What `cdk deploy` compares with the credentials' account, refusing others.
      expect(app.synth().getStackByName(stack.stackName).environment).toMatchObject({
        account: '111122223333',
        region: 'eu-central-1',
      });
    }
    expect(() =>
      environmentSettings('dev', { dev: { ...environments.dev, account: '1234' } }),
    ).toThrow(/account must be a 12-digit AWS account id/);
    expect(() =>
      environmentSettings('dev', { dev: { ...environments.dev, region: 'Europe' } }),
    ).toThrow(/region must be an AWS region such as eu-west-1/);
  });

  it('refuses to synthesize an environment bound to a real account that keeps a shipped placeholder', () => {
    const bound = (overrides: Record<string, unknown>) => () =>
      environmentSettings('prod', {
        prod: { ...environments.prod, account: '111122223333', ...overrides },
      });

    expect(environments.prod).toMatchObject({
      account: PLACEHOLDER_ACCOUNT,
      mauticBaseUrl: 'https://mautic.example.com',
      alarmEmail: 'ops@example.com',
    });
    expect(bound({})).toThrow(
      'Invalid settings for environment "prod" in cdk.json: it is bound to account 111122223333 but still holds the example placeholder of mauticBaseUrl (https://mautic.example.com: your Mautic\'s https URL) and alarmEmail (ops@example.com: where alarms go, or "" for none)',
    );
    expect(bound({ mauticBaseUrl: 'https://mautic.acme.test' })).toThrow(
      /placeholder of alarmEmail \(ops@example\.com/,
    );
    expect(bound({ alarmEmail: 'ops@acme.test' })).toThrow(
      /placeholder of mauticBaseUrl \(https:\/\/mautic\.example\.com/,
    );
    expect(
      bound({ mauticBaseUrl: 'https://mautic.acme.test', alarmEmail: 'ops@acme.test' }),
    ).not.toThrow();
    // The shipped environments, bound to no real account, synthesize for `npm run synth`; no
    // credentials match that account, so they cannot be deployed as they are.
    for (const name of Object.keys(environments))
      expect(() => environmentSettings(name, environments)).not.toThrow();
  });

  it('warns at synth when an environment that keeps its data e-mails its alarms to no one', () => {
    quietSynth();
    const warnings = (overrides: Record<string, unknown>) =>
      Annotations.fromStack(relayStack('prod', overrides).stack)
        .findWarning('*', Match.anyValue())
        .map((warning) => warning.entry.data);

    expect(warnings({ alarmEmail: '' })).toEqual([
      'Environment "prod" keeps its data (retainData) but has no alarmEmail: its alarms page no one. Set alarmEmail, or subscribe to its Alarms topic another way [ack: mautic-relay:no-alarm-email]',
    ]);
    expect(warnings({ alarmEmail: 'ops@acme.test' })).toEqual([]);
    // A developer's environment, whose data may be lost, need not page anyone.
    expect(warnings({ alarmEmail: '', retainData: false })).toEqual([]);
  });
});

describe('alarms that see a stuck queue', () => {
  const alarms = (t: Template) =>
    Object.fromEntries(
      Object.entries(t.findResources('AWS::CloudWatch::Alarm')).map(([id, alarm]) => [
        id.replace(/[0-9A-F]{8}$/, ''),
        alarm.Properties,
      ]),
    );

  it('alarms on the age of the oldest event sent back, from its first receive, at oldestEventAlarmSeconds, without flapping between its tries', () => {
    for (const name of Object.keys(environments)) {
      expect(alarms(template(name)).RetriedEventAgeAlarm).toMatchObject({
        Namespace: `MauticBatchRelay/${name}`,
        MetricName: 'OldestRetriedEventAge',
        Dimensions: [{ Name: 'service', Value: 'batch' }],
        Statistic: 'Maximum',
        Period: 300,
        Threshold: environments[name]?.oldestEventAlarmSeconds,
        ComparisonOperator: 'GreaterThanThreshold',
        // A retried event comes back up to 900 + 60 s later: any 4 periods of 5 minutes in a
        // row hold one of its tries, so one breach in the last 4 keeps the alarm up between them.
        EvaluationPeriods: 4,
        DatapointsToAlarm: 1,
        TreatMissingData: 'notBreaching',
      });
    }
  });

  it('alarms on events retried in 3 quarter hours, and on Mautic calls none of which succeed in 2, within windows that hold a retried event’s tries', () => {
    const all = alarms(template());

    expect(all.EventsRetriedAlarm).toMatchObject({
      MetricName: 'EventsRetried',
      Statistic: 'Sum',
      Period: 900,
      Threshold: 0,
      // Tries up to 960 s apart: every 2 quarter hours in a row hold one.
      EvaluationPeriods: 6,
      DatapointsToAlarm: 3,
      TreatMissingData: 'notBreaching',
    });
    expect(all.DeadLetterSendFailedAlarm).toMatchObject({
      MetricName: 'DeadLetterSendsFailed',
      Statistic: 'Sum',
      Period: 300,
      Threshold: 0,
      EvaluationPeriods: 1,
    });
  });

  it('pages on failed Mautic calls only in quarter hours where no call succeeded: a 429 waited out, a renewed token or a narrowed call does not', () => {
    const alarm = alarms(template()).MauticCallsFailedAlarm;
    const metrics = (alarm?.Metrics ?? []) as Array<{ Id: string; MetricStat?: unknown }>;
    const stat = (id: string) => metrics.find((m) => m.Id === id)?.MetricStat;

    expect(alarm).toMatchObject({
      Threshold: 0,
      ComparisonOperator: 'GreaterThanThreshold',
      EvaluationPeriods: 4,
      DatapointsToAlarm: 2,
      TreatMissingData: 'notBreaching',
    });
    expect(alarm?.MetricName).toBeUndefined();
    // MauticCalls counts every call, failed or not: as many failures as calls is none answered.
    expect(alarm?.Metrics).toContainEqual(
      expect.objectContaining({
        Expression: 'IF(FILL(failed, 0) >= FILL(calls, 0), FILL(failed, 0), 0)',
        ReturnData: true,
      }),
    );
    expect(stat('failed')).toEqual({
      Metric: { MetricName: 'MauticCallsFailed', Namespace: 'MauticBatchRelay/dev' },
      Period: 900,
      Stat: 'Sum',
    });
    expect(stat('calls')).toEqual({
      Metric: {
        MetricName: 'MauticCalls',
        Namespace: 'MauticBatchRelay/dev',
        Dimensions: [{ Name: 'service', Value: 'batch' }],
      },
      Period: 900,
      Stat: 'Sum',
    });
  });

  it('widens the windows with retryMaxDelaySeconds, so a stuck queue still pages with long retry delays, within CloudWatch’s one day', () => {
    const windows = (retryMaxDelaySeconds: number) => {
      const all = alarms(template('dev', { retryMaxDelaySeconds }));
      return ['RetriedEventAgeAlarm', 'EventsRetriedAlarm', 'MauticCallsFailedAlarm'].map((id) => [
        all[id]?.EvaluationPeriods,
        all[id]?.DatapointsToAlarm,
      ]);
    };

    // An hour between tries (3660 s with the invocation): 13 periods of 5 minutes, 5 quarter
    // hours per try.
    expect(windows(3600)).toEqual([
      [13, 1],
      [15, 3],
      [10, 2],
    ]);
    // 12 hours: a day is the most CloudWatch evaluates; one try in it is all a window holds.
    expect(windows(43_200)).toEqual([
      [145, 1],
      [96, 1],
      [96, 1],
    ]);
    const { stack } = relayStack('dev', { retryMaxDelaySeconds: 43_200 });
    // Within CloudWatch's one day, as every alarm's window must be (template-limits.ts).
    expect(limitProblems(stack, Template.fromStack(stack).toJSON() as CfnTemplate)).toEqual([]);
  });

  it('counts failed Mautic calls and unsent dead letters from the batch log, by their event', () => {
    const filters = Object.values(template().findResources('AWS::Logs::MetricFilter')).map(
      (filter) => filter.Properties,
    );
    const made = (metric: string) =>
      filters.find((filter) => filter.MetricTransformations[0].MetricName === metric);

    expect(made('MauticCallsFailed')).toMatchObject({
      LogGroupName: { Ref: expect.stringMatching(/^BatchLogs/) },
      FilterPattern: '{ $.event = "mautic_call_failed" }',
      MetricTransformations: [{ MetricValue: '1', Unit: 'Count' }],
    });
    // A line per batch of letters not sent, with how many: the metric counts events.
    expect(made('DeadLetterSendsFailed')).toMatchObject({
      LogGroupName: { Ref: expect.stringMatching(/^BatchLogs/) },
      FilterPattern: '{ $.event = "dead_letter_failed" }',
      MetricTransformations: [{ MetricValue: '$.count', Unit: 'Count' }],
    });
  });

  it('has a runbook entry in docs/operations.md for every alarm', () => {
    const runbook = readFileSync('docs/operations.md', 'utf8');
    const headings = new Set([...runbook.matchAll(/^### (\w+Alarm)$/gm)].map((m) => m[1]));

    for (const name of Object.keys(alarms(template('prod'))))
      expect(headings.has(name), `### ${name} in docs/operations.md`).toBe(true);
  });
});

describe('token secret writes within AWS’s guidance', () => {
  const TOKEN_SECRET_WRITES = 'mautic-relay:token-secret-writes';
  const stackOf = (overrides: Record<string, unknown>) => relayStack('dev', overrides).stack;
  const warnings = (overrides: Record<string, unknown>) =>
    Annotations.fromStack(stackOf(overrides)).findWarning('*', Match.anyValue());
  const accessTokenThreshold = (t: Template) =>
    Object.entries(t.findResources('AWS::CloudWatch::Alarm')).find(([id]) =>
      id.startsWith('AccessTokenAlarm'),
    )?.[1].Properties.Threshold;

  it('warns at synth, and still synthesizes, when a lifetime and schedule make more than one write per 10 minutes', () => {
    quietSynth();
    const annotations = Annotations.fromStack(
      stackOf({ mauticAccessTokenLifetimeMinutes: 10, refreshSchedule: 'rate(5 minutes)' }),
    );

    annotations.hasWarning(
      '/MauticRelay-dev/RefreshSchedule',
      `Environment "dev": with mauticAccessTokenLifetimeMinutes 10 and refreshSchedule rate(5 minutes), the refresher would write the token secret more often than AWS's one write per secret every 10 minutes, to renew the tokens before they expire. Set Mautic's access token lifetime (Configuration, API Settings), and this setting with it, to 16 minutes or more [ack: ${TOKEN_SECRET_WRITES}]`,
    );
    // Where a faster schedule would do, the warning says so.
    expect(
      warnings({ mauticAccessTokenLifetimeMinutes: 15 }).map((w) => w.entry.data),
    ).toContainEqual(
      expect.stringMatching(/to 16 minutes or more, or refreshSchedule to rate\(1 minute\) \[ack/),
    );
  });

  it('warns exactly when the refresher’s policy cannot keep to 10 minutes between writes', () => {
    quietSynth();
    const cases: Array<[minutes: number, schedule: string, warns: boolean]> = [
      [20, 'rate(5 minutes)', false],
      [16, 'rate(5 minutes)', false],
      [15, 'rate(5 minutes)', true],
      [12, 'rate(1 minute)', false],
      [11, 'rate(1 minute)', true],
      [21, 'rate(10 minutes)', false],
      [20, 'rate(10 minutes)', true],
      [1, 'rate(1 minute)', true],
    ];
    for (const [minutes, refreshSchedule, warns] of cases) {
      const found = warnings({ mauticAccessTokenLifetimeMinutes: minutes, refreshSchedule });
      expect(found.length, `${minutes} minutes, ${refreshSchedule}`).toBe(warns ? 1 : 0);
    }
    for (const name of Object.keys(environments)) {
      expect(
        Annotations.fromStack(relayStack(name).stack).findWarning('*', Match.anyValue()),
      ).toEqual([]);
      expect(environments[name]?.mauticAccessTokenLifetimeMinutes).toBe(60);
    }
  });

  it('tells each scheduled run its period, for the refresher to leave recent tokens to the next', () => {
    for (const [refreshSchedule, seconds] of [
      ['rate(1 minute)', 60],
      ['rate(5 minutes)', 300],
      ['rate(10 minutes)', 600],
    ] as const) {
      template('dev', { refreshSchedule }).hasResourceProperties('AWS::Events::Rule', {
        ScheduleExpression: refreshSchedule,
        Targets: [Match.objectLike({ Input: JSON.stringify({ scheduleSeconds: seconds }) })],
      });
    }
  });

  it('keeps AccessTokenAlarm below what a healthy refresher reports: 600 s, less for short lifetimes', () => {
    expect(accessTokenThreshold(template('prod'))).toBe(600);
    expect(accessTokenThreshold(template('dev', { mauticAccessTokenLifetimeMinutes: 20 }))).toBe(
      600,
    );
    // Put off while more than the next run (300 s) and its slack (60 s) is left.
    expect(accessTokenThreshold(template('dev', { mauticAccessTokenLifetimeMinutes: 16 }))).toBe(
      360,
    );
  });
});
