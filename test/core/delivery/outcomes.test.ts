import { describe, expect, it } from 'vitest';
import type { MessageOutcome } from '../../../functions/core/delivery/failure-policy.ts';
import { readMessages, settleBatch } from '../../../functions/core/delivery/outcomes.ts';
import { ConfigError } from '../../../functions/core/errors.ts';
import type { QueuedMessage } from '../../../functions/core/queue-ports.ts';
import {
  decideRequeue,
  NAMED_TIME_RECEIVES,
  type RetryPolicy,
  receivesForHorizon,
  retryDelaySeconds,
  retryPolicy,
} from '../../../functions/core/retry-policy.ts';
import { DEFAULTS } from '../../../functions/shared/config.ts';

const NOW = Date.parse('2026-11-24T12:00:00Z');

const POLICY: RetryPolicy = {
  baseSeconds: 30,
  maxDelaySeconds: 900,
  horizonSeconds: 86_400,
  maxReceiveCount: 200,
};

function message(n: number, body?: string, receives = 1, firstReceivedAt = NOW): QueuedMessage {
  return {
    messageId: `m${n}`,
    receiptHandle: `rh${n}`,
    body:
      body ??
      JSON.stringify({
        v: 1,
        eventId: `e${n}`,
        receivedAt: new Date(NOW).toISOString(),
        sender: 's',
        entity: 'contacts',
        action: 'create',
        data: { email: `c${n}@example.com` },
      }),
    attributes: {
      ApproximateReceiveCount: String(receives),
      ApproximateFirstReceiveTimestamp: String(firstReceivedAt),
    },
    messageAttributes: {},
  };
}

const settle = (
  messages: QueuedMessage[],
  outcomes: Array<[string, MessageOutcome]>,
  options: { maxDelaySeconds?: number; random?: number; policy?: RetryPolicy } = {},
) => {
  const policy = options.policy ?? POLICY;
  const read = readMessages(messages, policy.maxReceiveCount);
  const settled = settleBatch(messages, read, new Map(outcomes), {
    now: NOW,
    maxDelaySeconds: options.maxDelaySeconds ?? 3600,
    policy,
    random: () => options.random ?? 0,
  });
  // The batch's letters as the handler sends them: the unreadable first, then the settlement's.
  return { ...settled, deadLetters: [...read.unreadable, ...settled.deadLetters] };
};

describe('readMessages', () => {
  it('reads events and turns unreadable bodies into invalid_event dead letters', () => {
    const messages = [message(0), message(1, 'not json'), message(2, '{"v":1}')];

    const read = readMessages(messages);

    expect(read.incoming.map((i) => i.messageId)).toEqual(['m0']);
    expect(read.events.get('m0')?.eventId).toBe('e0');
    expect(read.unreadable.map((l) => [l.message.messageId, l.reason])).toEqual([
      ['m1', 'invalid_event'],
      ['m2', 'invalid_event'],
    ]);
    expect(read.unreadable[0]?.detail).toBe('The message body is not JSON');
    expect(read.unreadable[1]?.detail).not.toBe('');
  });
});

describe('settleBatch', () => {
  it('counts deliveries, dead-letters refusals with the event’s id, entity and action, and retries the rest', () => {
    const messages = [message(0), message(1), message(2), message(3, 'garbage')];

    const settled = settle(messages, [
      ['m0', { kind: 'delivered', status: 201, id: 7 }],
      ['m1', { kind: 'rejected', reason: 'mautic_rejected_item', status: 400, message: 'bad' }],
      ['m2', { kind: 'retry', reason: 'mautic_server_error' }],
    ]);

    expect(settled.delivered).toBe(1);
    expect(settled.deadLetters.map((l) => [l.message.messageId, l.reason])).toEqual([
      ['m3', 'invalid_event'],
      ['m1', 'mautic_rejected_item'],
    ]);
    expect(settled.deadLetters[1]).toMatchObject({
      eventId: 'e1',
      entity: 'contacts',
      action: 'create',
      status: 400,
      detail: 'bad',
    });
    expect(settled.retry.map((m) => m.messageId)).toEqual(['m2']);
    expect(settled.retryReasons).toEqual({ mautic_server_error: 1 });
    expect(settled.delays).toEqual([{ seconds: 15, messages: [messages[2]] }]);
  });

  it('retries a message delivery never reached, and never acknowledges it', () => {
    const settled = settle([message(0)], []);

    expect(settled.retry.map((m) => m.messageId)).toEqual(['m0']);
    expect(settled.retryReasons).toEqual({ no_outcome: 1 });
    expect(settled.delivered).toBe(0);
    expect(settled.deadLetters).toEqual([]);
  });

  it('hides each retried message for its backoff: half a step plus jitter, doubling per receive, capped', () => {
    const messages = [1, 2, 3, 6, 12].map((receives, n) => message(n, undefined, receives));
    const retryAll = messages.map((m): [string, MessageOutcome] => [
      m.messageId,
      { kind: 'retry', reason: 'mautic_server_error' },
    ]);

    const low = settle(messages, retryAll, { random: 0 });
    const high = settle(messages, retryAll, { random: 0.999 });

    const seconds = (settled: typeof low) =>
      messages.map(
        (m) => settled.delays.find((d) => d.messages.includes(m))?.seconds ?? Number.NaN,
      );
    // Steps 30, 60, 120, 960→900, capped: the delay is in [step/2, step].
    expect(seconds(low)).toEqual([15, 30, 60, 450, 450]);
    expect(seconds(high)).toEqual([30, 60, 120, 900, 900]);
  });

  it('hides a message held back behind an earlier event for the longest delay of the batch, never less', () => {
    // m0 failed on its third receive (60 s); m1 waits behind it but was received once (15 s).
    const messages = [message(0, undefined, 3), message(1), message(2)];

    const settled = settle(messages, [
      ['m0', { kind: 'retry', reason: 'mautic_server' }],
      ['m1', { kind: 'retry', reason: 'earlier_event_pending' }],
      ['m2', { kind: 'retry', reason: 'mautic_server' }],
    ]);

    expect(settled.delays).toEqual([
      { seconds: 60, messages: [messages[0], messages[1]] },
      { seconds: 15, messages: [messages[2]] },
    ]);
  });

  it('brings a rate-limited message back at the reset Mautic named, capped at maxDelaySeconds; a past reset after the backoff, never at once', () => {
    const messages = [message(0), message(1), message(2)];
    const at = (seconds: number): MessageOutcome => ({
      kind: 'retry',
      reason: 'rate_limited',
      notBefore: NOW + seconds * 1000,
    });

    const settled = settle(
      messages,
      [
        ['m0', at(300)],
        ['m1', at(5000)],
        ['m2', at(-10)],
      ],
      { maxDelaySeconds: 600, random: 0 },
    );

    expect(settled.retry).toHaveLength(3);
    expect(settled.delays.map((d) => [d.seconds, d.messages.map((m) => m.messageId)])).toEqual([
      [300, ['m0']],
      [600, ['m1']],
      [15, ['m2']],
    ]);
  });

  it('never asks SQS for a visibility beyond its 12 hours from the receive', () => {
    const settled = settle(
      [message(0, undefined, 30)],
      [['m0', { kind: 'retry', reason: 'rate_limited', notBefore: NOW + 86_400_000 }]],
      {
        maxDelaySeconds: 43_200,
        policy: { ...POLICY, maxDelaySeconds: 43_200, horizonSeconds: 13 * 86_400 },
      },
    );

    expect(settled.delays.map((d) => d.seconds)).toEqual([12 * 3600 - 15 * 60]);
  });

  it('dead-letters a message past its retry horizon with retry_horizon_exceeded and the last failure', () => {
    const old = message(0, undefined, 40, NOW - 86_400_000);
    const young = message(1, undefined, 40, NOW - 86_399_000);

    const settled = settle(
      [old, young],
      [
        [
          'm0',
          {
            kind: 'retry',
            reason: 'mautic_server_error',
            status: 503,
            message: 'MauticTransientError: POST /api/contacts/batch/new failed with status 503',
          },
        ],
        ['m1', { kind: 'retry', reason: 'mautic_server_error', status: 503 }],
      ],
    );

    expect(settled.deadLetters).toEqual([
      expect.objectContaining({
        reason: 'retry_horizon_exceeded',
        status: 503,
        eventId: 'e0',
        entity: 'contacts',
        action: 'create',
        detail: expect.stringContaining('last failure: MauticTransientError: POST /api/contacts'),
      }),
    ]);
    expect(settled.retry.map((m) => m.messageId)).toEqual(['m1']);
  });

  it('dead-letters a message on its last allowed receive with too_many_receives, without delivering it', () => {
    const messages = [message(0, undefined, 200), message(1, undefined, 199)];

    const read = readMessages(messages, 200);

    expect(read.incoming.map((i) => i.messageId)).toEqual(['m1']);
    expect(read.unreadable).toEqual([
      expect.objectContaining({ reason: 'too_many_receives', eventId: 'e0', action: 'create' }),
    ]);
  });
});

describe('retry policy', () => {
  it('derives a maxReceiveCount that outlasts the horizon even when every delay is the shortest', () => {
    const needed = receivesForHorizon(POLICY);
    let elapsed = 0;
    let receives = 1;
    while (elapsed < POLICY.horizonSeconds) {
      elapsed += retryDelaySeconds(POLICY, receives, 0);
      receives++;
    }
    // `receives` is the first receive at or past the horizon: the one that dead-letters.
    expect(needed).toBeGreaterThan(receives);
    // And receives to spare for returns at a time Mautic named, sooner than the backoff.
    expect(retryPolicy({ ...POLICY, maxReceiveCount: undefined }).maxReceiveCount).toBe(
      Math.min(1000, needed + NAMED_TIME_RECEIVES),
    );
  });

  it('brings a message back at the times Mautic names only while the receives left still carry the horizon on the backoff', () => {
    const policy = retryPolicy({ baseSeconds: 30, maxDelaySeconds: 900, horizonSeconds: 86_400 });
    // A maintenance page answering "Retry-After: 30" for a whole day, receive after receive.
    let receives = 1;
    let elapsed = 0;
    let named = 0;
    for (;;) {
      const requeue = decideRequeue(
        { reason: 'mautic_server', notBefore: NOW + 30_000 },
        { receives, firstReceivedAt: NOW - elapsed * 1000 },
        { now: NOW, policy, maxDelaySeconds: 900, random: () => 0 },
      );
      if (requeue.kind === 'dead_letter') break;
      if (requeue.seconds === 30) named++;
      elapsed += requeue.seconds;
      receives++;
      expect(receives).toBeLessThan(policy.maxReceiveCount);
    }
    // The horizon, not the receive count, ended it; and the named time held for many receives.
    expect(elapsed).toBeGreaterThanOrEqual(86_400);
    expect(named).toBeGreaterThan(50);
  });

  it('has defaults that fit SQS and refuses settings that do not', () => {
    const defaults = retryPolicy({
      baseSeconds: DEFAULTS.retryBaseSeconds,
      maxDelaySeconds: DEFAULTS.retryMaxDelaySeconds,
      horizonSeconds: DEFAULTS.retryHorizonSeconds,
    });
    expect(defaults.maxReceiveCount).toBeGreaterThan(5);
    expect(defaults.maxReceiveCount).toBeLessThanOrEqual(1000);
    expect(() =>
      retryPolicy({ baseSeconds: 30, maxDelaySeconds: 60, horizonSeconds: 13 * 86_400 }),
    ).toThrow(/raise RETRY_MAX_DELAY_SECONDS or lower RETRY_HORIZON_SECONDS/);
    expect(() => retryPolicy({ ...POLICY, maxReceiveCount: 10 })).toThrow(ConfigError);
    expect(() => retryPolicy({ ...POLICY, maxReceiveCount: 10 })).toThrow(/MAX_RECEIVE_COUNT/);
  });
});
