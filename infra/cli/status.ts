import { GetMetricDataCommand } from '@aws-sdk/client-cloudwatch';
import { GetSecretValueCommand } from '@aws-sdk/client-secrets-manager';
import type { Command } from './command.ts';
import { queueAttributes } from './dead-letter-queue.ts';
import { EXIT } from './errors.ts';
import { TARGET_HELP, targetOptions, withTarget } from './options.ts';
import type { Target } from './target.ts';

export const statusCommand: Command = {
  name: 'status',
  usage: 'status (--env NAME | --local) [--json]',
  summary: 'ingest URL, queue depth, dead letters, token time left',
  details: `Prints the ingest URL, the events queue (waiting, in flight, delayed, oldest event's
age: from CloudWatch, so not known locally), the dead-letter count, the access and refresh
tokens' time left and the last refresh (never a token), and the dashboard link for --env.
${TARGET_HELP}`,
  options: targetOptions,
  positionals: 0,
  run: (values, _, io) =>
    withTarget(values, io, async (target) => {
      const status = await collectStatus(target, io.now);
      if (values.json) io.stdout(JSON.stringify(status));
      else for (const line of statusLines(status, target)) io.stdout(line);
      return EXIT.ok;
    }),
};

/** `status --json` (contract §4); unknown values are null. */
interface Status {
  ingestUrl: string;
  queue: {
    visible: number | null;
    inFlight: number | null;
    delayed: number | null;
    oldestAgeSeconds: number | null;
  };
  deadLetters: { count: number | null };
  token: {
    accessTokenSecondsLeft: number | null;
    refreshTokenSecondsLeft: number | null;
    updatedAt: string | null;
    /** Beyond the contract's shape: Mautic's version as an API answer last named it. */
    mauticVersion: string | null;
  };
  /** Beyond the contract's shape: the CloudWatch dashboard of an environment, else null. */
  dashboardUrl: string | null;
}

async function collectStatus(target: Target, now: () => number): Promise<Status> {
  const [queue, dead, token, oldest] = await Promise.all([
    queueAttributes(target.sqs, target.eventsQueueUrl),
    queueAttributes(target.sqs, target.deadLetterQueueUrl),
    tokenTimes(target, now()),
    oldestAgeSeconds(target, now()),
  ]);
  return {
    ingestUrl: target.ingestUrl,
    queue: {
      visible: queue.visible,
      inFlight: queue.inFlight,
      delayed: queue.delayed,
      oldestAgeSeconds: oldest,
    },
    deadLetters: { count: dead.visible + dead.inFlight + dead.delayed },
    token,
    dashboardUrl: target.dashboardUrl,
  };
}

/**
 * Seconds left and the last refresh, read from the token secret; the tokens themselves are
 * never kept, printed or returned. An empty or unreadable secret (no credential yet) gives nulls.
 */
async function tokenTimes(target: Target, now: number): Promise<Status['token']> {
  const { SecretString } = await target.secrets.send(
    new GetSecretValueCommand({ SecretId: target.tokenSecretId }),
  );
  let stored: Record<string, unknown> = {};
  try {
    const parsed: unknown = JSON.parse(SecretString ?? '{}');
    if (typeof parsed === 'object' && parsed !== null) stored = parsed as Record<string, unknown>;
  } catch {
    // Not JSON: nothing known.
  }
  const secondsLeft = (value: unknown) => {
    const time = typeof value === 'string' ? Date.parse(value) : Number.NaN;
    return Number.isNaN(time) ? null : Math.round((time - now) / 1000);
  };
  const updated = typeof stored.updatedAt === 'string' ? Date.parse(stored.updatedAt) : Number.NaN;
  return {
    accessTokenSecondsLeft: secondsLeft(stored.accessTokenExpiresAt),
    refreshTokenSecondsLeft: secondsLeft(stored.refreshTokenExpiresAt),
    updatedAt: Number.isNaN(updated) ? null : new Date(updated).toISOString(),
    mauticVersion: typeof stored.mauticVersion === 'string' ? stored.mauticVersion : null,
  };
}

/**
 * The age of the oldest event, which SQS publishes only as a CloudWatch metric (the last
 * minute with data in the past 15). Receiving from the events queue to look would cost events
 * a receive; so locally, where there is no CloudWatch, it is null.
 */
async function oldestAgeSeconds(target: Target, now: number): Promise<number | null> {
  if (!target.cloudwatch) return null;
  const queueName = target.eventsQueueUrl.split('/').pop() ?? '';
  const { MetricDataResults = [] } = await target.cloudwatch.send(
    new GetMetricDataCommand({
      StartTime: new Date(now - 15 * 60_000),
      EndTime: new Date(now),
      ScanBy: 'TimestampDescending',
      MetricDataQueries: [
        {
          Id: 'oldest',
          MetricStat: {
            Metric: {
              Namespace: 'AWS/SQS',
              MetricName: 'ApproximateAgeOfOldestMessage',
              Dimensions: [{ Name: 'QueueName', Value: queueName }],
            },
            Period: 60,
            Stat: 'Maximum',
          },
        },
      ],
    }),
  );
  const latest = MetricDataResults[0]?.Values?.[0];
  return latest === undefined ? null : Math.round(latest);
}

/** The human-readable status. */
function statusLines(status: Status, target: Target): string[] {
  const value = (n: number | null, unit = '') => (n === null ? 'unknown' : `${n}${unit}`);
  const duration = (seconds: number | null) => {
    if (seconds === null) return 'unknown';
    const sign = seconds < 0 ? 'expired ' : '';
    const s = Math.abs(seconds);
    const text =
      s >= 86_400
        ? `${Math.floor(s / 86_400)} d ${Math.floor((s % 86_400) / 3600)} h`
        : s >= 3600
          ? `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`
          : s >= 60
            ? `${Math.floor(s / 60)} min ${s % 60} s`
            : `${s} s`;
    return seconds < 0 ? `${sign}${text} ago` : `${text} left`;
  };
  const { queue, token } = status;
  const lines = [
    `Mautic batch relay, ${target.local ? 'local stack' : `environment ${target.name}`}`,
    `  ingest URL:     ${status.ingestUrl}`,
    `  events queue:   ${value(queue.visible)} waiting, ${value(queue.inFlight)} in flight, ${value(queue.delayed)} delayed; oldest ${queue.oldestAgeSeconds === null ? (target.local ? 'not known locally' : 'unknown') : `${queue.oldestAgeSeconds} s`}`,
    `  dead letters:   ${value(status.deadLetters.count)}${status.deadLetters.count ? ' (npx mautic-relay dead-letters to see why)' : ''}`,
    `  access token:   ${duration(token.accessTokenSecondsLeft)}`,
    `  refresh token:  ${token.refreshTokenSecondsLeft === null ? 'none (client credentials) or unknown' : duration(token.refreshTokenSecondsLeft)}`,
    `  last refresh:   ${token.updatedAt ?? 'never'}`,
    `  Mautic version: ${token.mauticVersion ?? 'unknown (Mautic has not said yet)'}`,
  ];
  if (status.dashboardUrl) lines.push(`  dashboard:      ${status.dashboardUrl}`);
  return lines;
}
