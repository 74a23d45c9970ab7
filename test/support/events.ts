import type { IncomingEvent } from '../../functions/core/delivery/batch-plan.ts';
import type { QueuedEvent } from '../../functions/core/events.ts';

let sequence = 0;

/** A queued event in a message of its own, with ids unique across the test run. */
export function incoming(
  event: Pick<QueuedEvent, 'entity' | 'action'> & Partial<QueuedEvent>,
): IncomingEvent {
  sequence++;
  return {
    messageId: `m${sequence}`,
    event: {
      v: 1,
      eventId: `e${sequence}`,
      receivedAt: '2026-11-21T00:00:00.000Z',
      sender: 'test',
      ...event,
    },
  };
}
