import { describe, expect, it } from 'vitest';
import { IngestRefusal } from '../../../functions/core/errors.ts';
import { envelope } from '../../../functions/core/ingest/ingest-steps.ts';

const event = { entity: 'contacts', action: 'delete', id: 3 } as const;
const sender = (eventIdBase: string) => ({
  name: 'webhook#1',
  identity: () => undefined,
  eventIdBase,
});

describe('envelope', () => {
  it('holds an id the ingest makes to the rule of §1.4, as a sender-given one', () => {
    const refuse = () => envelope([event, event], sender('base\u0001'), 0, () => 'new');

    expect(refuse).toThrow(IngestRefusal);
    expect(refuse).toThrow(
      expect.objectContaining({
        status: 422,
        details: [0, 1].map((index) => ({
          index,
          path: '/eventId',
          message: 'must not hold a control character, an unpaired surrogate, U+FFFE or U+FFFF',
        })),
      }),
    );
    expect(envelope([event], sender('msg_1'), 0, () => 'new')[0]?.eventId).toBe('msg_1:0');
  });
});
