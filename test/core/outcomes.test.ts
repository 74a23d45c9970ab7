import { describe, expect, it } from 'vitest';
import type { MessageOutcome } from '../../functions/core/delivery.ts';
import { readMessages, settleBatch } from '../../functions/core/outcomes.ts';
import type { QueuedMessage } from '../../functions/core/ports.ts';

const NOW = Date.parse('2026-11-24T12:00:00Z');

function message(n: number, body?: string): QueuedMessage {
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
    attributes: { ApproximateReceiveCount: '1' },
    messageAttributes: {},
  };
}

const settle = (
  messages: QueuedMessage[],
  outcomes: Array<[string, MessageOutcome]>,
  maxDelaySeconds = 900,
) =>
  settleBatch(messages, readMessages(messages), new Map(outcomes), { now: NOW, maxDelaySeconds });

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
    expect(settled.delays).toEqual([]);
  });

  it('retries a message delivery never reached, and never acknowledges it', () => {
    const settled = settle([message(0)], []);

    expect(settled.retry.map((m) => m.messageId)).toEqual(['m0']);
    expect(settled.retryReasons).toEqual({ no_outcome: 1 });
    expect(settled.delivered).toBe(0);
    expect(settled.deadLetters).toEqual([]);
  });

  it('delays rate-limited messages until the reset, grouped by seconds and capped', () => {
    const messages = [message(0), message(1), message(2), message(3)];
    const at = (seconds: number): MessageOutcome => ({
      kind: 'retry',
      reason: 'rate_limited',
      notBefore: NOW + seconds * 1000,
    });

    const settled = settle(
      messages,
      [
        ['m0', at(30)],
        ['m1', at(29.2)],
        ['m2', at(5000)],
        ['m3', at(-10)],
      ],
      600,
    );

    expect(settled.retry).toHaveLength(4);
    expect(settled.delays.map((d) => [d.seconds, d.messages.map((m) => m.messageId)])).toEqual([
      [30, ['m0', 'm1']],
      [600, ['m2']],
    ]);
  });
});
