/**
 * `dead-letters` shows no record value without `--show-data` (contract §4): a detail the relay
 * writes names the field, never the value (a `duplicate` letter's), and a value Mautic's own
 * message quotes (`email: ann@example.com is invalid.`) is masked in the listing. Letters written
 * by the batch function's own adapter into fauxqs, listed as the command lists them.
 */
import { CreateQueueCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SqsDeliveryQueues } from '../../functions/adapters/sqs-delivery-queues.ts';
import { decideItem } from '../../functions/core/delivery/answer-policy.ts';
import type { DeadLetter } from '../../functions/core/queue-ports.ts';
import { listDeadLetters } from '../../infra/cli/dead-letters.ts';
import { type LocalSqs, startLocalSqs, uniqueQueueName } from '../support/local-sqs.ts';

let local: LocalSqs;

beforeAll(async () => {
  local = await startLocalSqs();
});

afterAll(async () => {
  await local.stop();
});

async function fifoQueue(name: string): Promise<string> {
  const { QueueUrl } = await local.sqs.send(
    new CreateQueueCommand({
      QueueName: `${uniqueQueueName(name)}.fifo`,
      Attributes: { FifoQueue: 'true', ContentBasedDeduplication: 'false' },
    }),
  );
  if (!QueueUrl) throw new Error('CreateQueue answered no URL');
  return QueueUrl;
}

/** A letter for an event as the batch function reads it from the events queue. */
function letter(n: number, outcome: { reason: string; detail: string; status: number }) {
  const body = JSON.stringify({
    v: 1,
    eventId: `e${n}`,
    receivedAt: new Date().toISOString(),
    sender: 'webhook#crm',
    entity: 'companies',
    action: 'create',
    data: { companyname: 'Acme Hidden Holdings', email: 'ann@example.com' },
  });
  const dead: DeadLetter = {
    message: {
      messageId: `m${n}`,
      receiptHandle: `rh${n}`,
      body,
      attributes: { MessageGroupId: `g${n}` },
      messageAttributes: {},
    },
    ...outcome,
    eventId: `e${n}`,
    entity: 'companies',
    action: 'create',
  };
  return dead;
}

async function listed(showData: boolean) {
  const deadLetterQueueUrl = await fifoQueue('details-dlq');
  const queues = new SqsDeliveryQueues(local.sqs, {
    eventsQueueUrl: await fifoQueue('details-events'),
    deadLetterQueueUrl,
  });
  // What the relay makes of Mautic's refusal of a company name another company holds.
  const duplicate = decideItem(
    { kind: 'rejected', status: 422, message: 'companyname: This field must be unique.' },
    { merged: false, unrepeatable: false },
  );
  if (duplicate.kind !== 'settle' || duplicate.outcome.kind !== 'rejected') {
    throw new Error('expected a duplicate letter');
  }
  const failed = await queues.deadLetter(
    [
      letter(1, {
        reason: duplicate.outcome.reason,
        detail: duplicate.outcome.message,
        status: 422,
      }),
      letter(2, {
        reason: 'mautic_rejected_item',
        detail: 'email: ann@example.com is invalid.',
        status: 400,
      }),
      letter(3, {
        reason: 'mautic_rejected_item',
        detail: 'firstname: "Ann Secret" is not a valid value.',
        status: 400,
      }),
    ],
    Date.now() + 10_000,
  );
  expect(failed).toEqual([]);
  const list = await listDeadLetters(
    local.sqs,
    deadLetterQueueUrl,
    { limit: 10 },
    { showData, now: Date.now, hideSeconds: 30 },
  );
  return new Map(list.items.map((item) => [item.eventId, item.detail]));
}

describe('dead-letters without --show-data', () => {
  it('names the field of a duplicate, and masks the values Mautic quotes', async () => {
    const details = await listed(false);

    expect(details.get('e1')).toBe(
      "companyname: This field must be unique. Another record has this companyname (ignoring case and trailing spaces), perhaps this event's own earlier try.",
    );
    expect(details.get('e2')).toBe('email: … is invalid.');
    expect(details.get('e3')).toBe('firstname: "…" is not a valid value.');
    const shown = JSON.stringify([...details.values()]);
    for (const value of ['Acme', 'ann@', 'Ann Secret']) expect(shown).not.toContain(value);
  });

  it('shows Mautic’s own message as it came with --show-data', async () => {
    const details = await listed(true);

    expect(details.get('e2')).toBe('email: ann@example.com is invalid.');
    expect(details.get('e3')).toBe('firstname: "Ann Secret" is not a valid value.');
  });
});
