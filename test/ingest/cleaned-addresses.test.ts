/**
 * An address Mautic's cleaning would change is refused at the ingest (contract §1, §5): Mautic
 * stores the cleaned address, so a create with it would update one contact while a `match` with
 * the same string looks up another, or no one. Surrounding ASCII white space is the one change
 * taken: Mautic drops it, and senders send it. Values Mautic's lookup cannot carry exactly are
 * refused the same way.
 */
import { describe, expect, it } from 'vitest';
import type { IngestLimits } from '../../functions/core/ingest/ingest-steps.ts';
import {
  httpApiEvent,
  INGEST_LIMITS,
  ingestHandler,
  recordingQueue,
  signedHeaders,
} from '../support/ingest.ts';

type Event = Record<string, unknown>;

const WITH_CRM_ID: IngestLimits = {
  ...INGEST_LIMITS,
  contactMatchFields: new Set(['email', 'crm_id']),
};

async function post(events: Event[], limits: IngestLimits = INGEST_LIMITS) {
  const queue = recordingQueue();
  const body = JSON.stringify(events);
  const response = await ingestHandler(queue, { limits })(
    httpApiEvent({ body, headers: signedHeaders(body, { id: 'msg_clean' }) }),
  );
  return { ...response, queued: queue.messages };
}

const CLEANED = [
  ['a KELVIN SIGN (U+212A), which toLowerCase() makes a k', '\u212Aate@example.com'],
  ['angle brackets', '<ann@example.com>'],
  ['a trailing zero-width space', 'ann@example.com\u200B'],
  ['a trailing semicolon', 'ann@example.com;'],
  ['a trailing comma', 'ann@example.com,'],
  ['an inner space', 'ann @example.com'],
  ['a no-break space around it', '\u00A0ann@example.com'],
  ['a byte order mark before it', '\uFEFFann@example.com'],
  ['quotes around the local part', '"ann"@example.com'],
];

describe('an address that Mautic’s cleaning would change', () => {
  it.each(CLEANED)(
    'is refused in match.email, data.email of a create and of an edit: %s',
    async (_, email) => {
      const response = await post([
        { entity: 'contacts', action: 'delete', match: { email } },
        { entity: 'contacts', action: 'addPoints', match: { email }, points: 10 },
        { entity: 'contacts', action: 'create', data: { email } },
        { entity: 'contacts', action: 'edit', id: 7, data: { email } },
      ]);

      expect(response.status).toBe(422);
      expect(response.body.error?.code).toBe('invalid_event');
      expect(response.queued).toEqual([]);
      const message =
        "must be an address as Mautic stores it: cleaning would change it (only ASCII letters, digits and !#$%&'*+-=?^_`{|}~@.[] are kept)";
      expect(response.body.error?.details).toEqual([
        { index: 0, path: '/match/email', message },
        { index: 1, path: '/match/email', message },
        { index: 2, path: '/data/email', message },
        { index: 3, path: '/data/email', message },
      ]);
      // The refusal names the field, never the value.
      expect(JSON.stringify(response.body)).not.toContain('example.com');
    },
  );

  it('takes surrounding ASCII white space and any case, keyed with the plain address', async () => {
    const response = await post([
      { entity: 'contacts', action: 'create', data: { email: ' Ann@Example.com\t' } },
      { entity: 'contacts', action: 'delete', match: { email: '\nANN@example.com ' } },
      { entity: 'contacts', action: 'delete', match: { email: 'ann@example.com' } },
    ]);

    expect(response.status).toBe(202);
    const groups = new Set(response.queued.map((message) => message.groupId));
    expect(groups.size).toBe(1);
  });
});

describe('a match value Mautic’s lookup cannot carry exactly', () => {
  it.each([
    ['a control character', 'C-1\u0001'],
    ['a line break inside', 'C-\n1'],
    ['a trailing backslash with a comma (it would escape the closing quote)', 'a,b\\'],
  ])('is refused: %s', async (_, crm) => {
    const response = await post(
      [{ entity: 'contacts', action: 'delete', match: { crm_id: crm } }],
      WITH_CRM_ID,
    );

    expect(response.status).toBe(422);
    expect(response.body.error?.details).toEqual([
      {
        index: 0,
        path: '/match/crm_id',
        message:
          "must not hold a control character, nor end in a backslash when it holds a comma or a double quote (Mautic's lookup cannot carry it)",
      },
    ]);
  });

  it('takes a backslash, a comma and a quote elsewhere', async () => {
    const response = await post(
      [{ entity: 'contacts', action: 'delete', match: { crm_id: 'x\\",K-2' } }],
      WITH_CRM_ID,
    );

    expect(response.status).toBe(202);
  });
});
