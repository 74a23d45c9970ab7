/**
 * Contract §5 at the ingest: contacts named by `id` or by `match`, and the integrator actions
 * with their own fields. Every refusal is checked detail for detail; every accepted event is
 * checked as queued, field for field.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CONTACT_ACTIONS, queuedEventSchema } from '../../functions/core/events.ts';
import type { IngestLimits } from '../../functions/core/ingest/ingest-steps.ts';
import {
  httpApiEvent,
  INGEST_LIMITS,
  ingestHandler,
  NOW,
  recordingQueue,
  signedHeaders,
  WEBHOOK_SENDER,
} from '../support/ingest.ts';

type Event = Record<string, unknown>;

/** Posts `events` signed, as webhook `msg_refs`, to an ingest with `limits`. */
async function post(events: Event | Event[], limits: IngestLimits = INGEST_LIMITS) {
  const queue = recordingQueue();
  const body = JSON.stringify(events);
  const response = await ingestHandler(queue, { limits })(
    httpApiEvent({ body, headers: signedHeaders(body, { id: 'msg_refs' }) }),
  );
  return { ...response, queued: queue.messages };
}

/** The details of the 422 that `event` gets; nothing may have been queued. */
async function refusal(event: Event, limits?: IngestLimits) {
  const response = await post(event, limits);
  expect(response.status).toBe(422);
  expect(response.body.error?.code).toBe('invalid_event');
  expect(response.queued).toEqual([]);
  return response.body.error?.details;
}

const ANN = { email: 'ann@example.com' };
const WITH_CRM_ID: IngestLimits = {
  ...INGEST_LIMITS,
  contactMatchFields: new Set(['email', 'crm_id']),
};

describe('naming a contact by id or by match (contract §5)', () => {
  it.each<[string, Event, string]>([
    [
      'both id and match',
      { entity: 'contacts', action: 'edit', id: 7, match: ANN, data: { city: 'Oslo' } },
      'give exactly one of id and match to name the contact of edit',
    ],
    [
      'neither id nor match on an edit',
      { entity: 'contacts', action: 'edit', data: { city: 'Oslo' } },
      'give exactly one of id and match to name the contact of edit',
    ],
    [
      'neither id nor match on a delete',
      { entity: 'contacts', action: 'delete' },
      'give exactly one of id and match to name the contact of delete',
    ],
    [
      'neither id nor match on an action',
      { entity: 'contacts', action: 'addToSegment', segmentId: 4 },
      'give exactly one of id and match to name the contact of addToSegment',
    ],
    [
      'a match with two keys',
      { entity: 'contacts', action: 'delete', match: { email: 'ann@example.com', crm_id: 'C1' } },
      'must have exactly one key: email, or a field in CONTACT_MATCH_FIELDS',
    ],
    [
      'a match with no key',
      { entity: 'contacts', action: 'delete', match: {} },
      'must have exactly one key: email, or a field in CONTACT_MATCH_FIELDS',
    ],
    [
      'a match on a record other than a contact',
      { entity: 'companies', action: 'edit', match: ANN, data: { companyname: 'Acme' } },
      'names contacts only; name other records by id',
    ],
    [
      'a match on a create',
      { entity: 'contacts', action: 'create', match: ANN, data: ANN },
      'is not taken by create',
    ],
  ])('refuses %s with one detail at /match', async (_, event, message) => {
    expect(await refusal(event)).toEqual([{ index: 0, path: '/match', message }]);
  });

  it('refuses a match on a field not in CONTACT_MATCH_FIELDS, and accepts it once listed', async () => {
    const event = { entity: 'contacts', action: 'delete', match: { crm_id: 'C-1' } };

    expect(await refusal(event)).toEqual([
      {
        index: 0,
        path: '/match/crm_id',
        message: 'is not a field contacts may be matched on (CONTACT_MATCH_FIELDS)',
      },
    ]);
    const listed = await post(event, WITH_CRM_ID);
    expect(listed.status).toBe(202);
    expect(JSON.parse(listed.queued[0]?.body ?? '').match).toEqual({ crm_id: 'C-1' });
  });

  it('accepts a match on email whatever CONTACT_MATCH_FIELDS lists', async () => {
    const onlyCrm = { ...INGEST_LIMITS, contactMatchFields: new Set(['crm_id', 'email']) };

    expect((await post({ entity: 'contacts', action: 'delete', match: ANN }, onlyCrm)).status).toBe(
      202,
    );
  });

  it.each<[string, unknown, string]>([
    ['a number', 42, 'must be a non-empty string of at most 255 characters'],
    ['null', null, 'must be a non-empty string of at most 255 characters'],
    [
      'an object',
      { value: 'ann@example.com' },
      'must be a non-empty string of at most 255 characters',
    ],
    ['an empty string', '', 'must be a non-empty string of at most 255 characters'],
    ['blanks only', '   ', 'must be a non-empty string of at most 255 characters'],
    [
      '256 characters',
      `${'a'.repeat(244)}@example.com`,
      'must be a non-empty string of at most 255 characters',
    ],
    ['not an address', 'not-an-email', 'must be a valid email address'],
    ['two addresses', 'ann@example.com,bob@example.com', 'must be a valid email address'],
  ])('refuses match.email as %s at /match/email', async (_, value, message) => {
    const event = { entity: 'contacts', action: 'addPoints', points: 5, match: { email: value } };

    expect(await refusal(event)).toEqual([{ index: 0, path: '/match/email', message }]);
  });

  it('refuses an empty value on an allowed field, and says both problems of a field not allowed', async () => {
    const empty = { entity: 'contacts', action: 'delete', match: { crm_id: '' } };

    expect(await refusal(empty, WITH_CRM_ID)).toEqual([
      {
        index: 0,
        path: '/match/crm_id',
        message: 'must be a non-empty string of at most 255 characters',
      },
    ]);
    expect(await refusal(empty)).toEqual([
      {
        index: 0,
        path: '/match/crm_id',
        message: 'is not a field contacts may be matched on (CONTACT_MATCH_FIELDS)',
      },
      {
        index: 0,
        path: '/match/crm_id',
        message: 'must be a non-empty string of at most 255 characters',
      },
    ]);
  });

  it('refuses a match key that is not a field alias, once', async () => {
    expect(
      await refusal({ entity: 'contacts', action: 'delete', match: { 'CRM-ID': 'C-1' } }),
    ).toEqual([
      {
        index: 0,
        path: '/match/CRM-ID',
        message: 'is not a contact field alias (/^[a-z][a-z0-9_]{0,63}$/)',
      },
    ]);
  });

  it('still asks other records for their id', async () => {
    const details = await post([
      { entity: 'companies', action: 'edit', data: { companyname: 'Acme' } },
      { entity: 'companies', action: 'delete' },
    ]);

    expect(details.body.error?.details).toEqual([
      { index: 0, path: '/id', message: 'is required for edit' },
      { index: 1, path: '/id', message: 'is required for delete' },
    ]);
  });
});

describe('the integrator actions (contract §5)', () => {
  it.each<[string, Event, Array<[string, string]>]>([
    [
      'addToSegment without segmentId',
      { action: 'addToSegment' },
      [['/segmentId', 'is required for addToSegment']],
    ],
    [
      'removeFromSegment without segmentId',
      { action: 'removeFromSegment' },
      [['/segmentId', 'is required for removeFromSegment']],
    ],
    [
      'addToCampaign without campaignId',
      { action: 'addToCampaign' },
      [['/campaignId', 'is required for addToCampaign']],
    ],
    [
      'removeFromCampaign without campaignId',
      { action: 'removeFromCampaign' },
      [['/campaignId', 'is required for removeFromCampaign']],
    ],
    [
      'linkCompany without companyId',
      { action: 'linkCompany' },
      [['/companyId', 'is required for linkCompany']],
    ],
    [
      'unlinkCompany without companyId',
      { action: 'unlinkCompany' },
      [['/companyId', 'is required for unlinkCompany']],
    ],
    [
      'addPoints without points',
      { action: 'addPoints' },
      [['/points', 'is required for addPoints']],
    ],
    ['points 0', { action: 'addPoints', points: 0 }, [['/points', 'must not be 0']]],
    [
      'segmentId on addPoints',
      { action: 'addPoints', points: 3, segmentId: 4 },
      [['/segmentId', 'is not taken by addPoints']],
    ],
    [
      'data on addToSegment',
      { action: 'addToSegment', segmentId: 4, data: { city: 'Oslo' } },
      [['/data', 'is not taken by addToSegment']],
    ],
    [
      'points on removeDoNotContact',
      { action: 'removeDoNotContact', points: 3 },
      [['/points', 'is not taken by removeDoNotContact']],
    ],
    [
      'campaignId on an edit',
      { action: 'edit', data: { city: 'Oslo' }, campaignId: 2 },
      [['/campaignId', 'is not taken by edit']],
    ],
    [
      'a field no action takes',
      { action: 'addToSegment', segmentId: 4, listId: 4 },
      [['/listId', 'is not a known field']],
    ],
    [
      'a channel that is not a channel name',
      { action: 'addDoNotContact', channel: 'E-mail' },
      [['/channel', 'must be a Mautic channel name such as "email"']],
    ],
  ])('refuses %s', async (_, fields, expected) => {
    const event = { entity: 'contacts', match: ANN, ...fields };

    expect(await refusal(event)).toEqual(
      expected.map(([path, message]) => ({ index: 0, path, message })),
    );
  });

  it.each<[string, Event]>([
    ['a segment id that is not a positive integer', { action: 'addToSegment', segmentId: 0 }],
    ['a campaign id given as a string', { action: 'addToCampaign', campaignId: '2' }],
    ['a company id with a fraction', { action: 'linkCompany', companyId: 1.5 }],
    ['points with a fraction', { action: 'addPoints', points: 1.5 }],
    ['points beyond a 32-bit integer', { action: 'addPoints', points: 2 ** 31 }],
    ['a reason Mautic does not have', { action: 'addDoNotContact', reason: 'spam' }],
    ['comments over 255 characters', { action: 'addDoNotContact', comments: 'x'.repeat(256) }],
  ])('refuses %s at that field', async (_, fields) => {
    const [field] = Object.keys(fields).filter((key) => key !== 'action');
    const details = await refusal({ entity: 'contacts', id: 7, ...fields });

    expect(details).toHaveLength(1);
    expect(details?.[0]).toMatchObject({ index: 0, path: `/${field}` });
  });

  it('refuses an action on an entity other than contacts', async () => {
    expect(
      await refusal({ entity: 'companies', action: 'addToSegment', id: 3, segmentId: 4 }),
    ).toEqual([
      {
        index: 0,
        path: '/action',
        message: 'is an action on contacts; the entity must be "contacts"',
      },
    ]);
  });

  it('lists the problems of each event of a request, by index, and queues none of it', async () => {
    const response = await post([
      { entity: 'contacts', action: 'addToSegment', match: ANN, segmentId: 4 },
      { entity: 'contacts', action: 'addPoints', match: ANN, points: 0 },
      { entity: 'contacts', action: 'edit', data: { city: 'Oslo' } },
    ]);

    expect(response.status).toBe(422);
    expect(response.body.error?.details).toEqual([
      { index: 1, path: '/points', message: 'must not be 0' },
      {
        index: 2,
        path: '/match',
        message: 'give exactly one of id and match to name the contact of edit',
      },
    ]);
    expect(response.queued).toEqual([]);
  });
});

/** Each of the nine actions, with its fields, and edit and delete: by id and by match. */
const ACCEPTED: Event[] = [
  { action: 'addToSegment', segmentId: 4 },
  { action: 'removeFromSegment', segmentId: 4 },
  { action: 'addToCampaign', campaignId: 2 },
  { action: 'removeFromCampaign', campaignId: 2 },
  { action: 'addDoNotContact' },
  { action: 'addDoNotContact', channel: 'sms', reason: 'unsubscribed', comments: 'asked by phone' },
  { action: 'removeDoNotContact' },
  { action: 'removeDoNotContact', channel: 'email' },
  { action: 'removeDoNotContact', channel: 'email', reason: 'unsubscribed', comments: 'back' },
  { action: 'addPoints', points: 10 },
  { action: 'addPoints', points: -3 },
  { action: 'linkCompany', companyId: 9 },
  { action: 'unlinkCompany', companyId: 9 },
  { action: 'edit', data: { city: 'Oslo' } },
  { action: 'delete' },
].flatMap((fields) => [
  { entity: 'contacts', ...fields, id: 7 },
  { entity: 'contacts', ...fields, match: { email: 'Ann@Example.com' } },
  { entity: 'contacts', ...fields, match: { crm_id: 'C-1' } },
]);

describe('accepted events', () => {
  it('queues every action by id and by match, with its fields as given', async () => {
    const response = await post(ACCEPTED, WITH_CRM_ID);

    expect(response.status).toBe(202);
    expect(response.body.accepted).toBe(ACCEPTED.length);
    const bodies = response.queued.map((message) => JSON.parse(message.body));
    expect(bodies).toEqual(
      ACCEPTED.map((event, index) => ({
        v: 1,
        eventId: `msg_refs:${index}`,
        receivedAt: new Date(NOW).toISOString(),
        sender: WEBHOOK_SENDER,
        ...event,
      })),
    );
    // What the batch function reads back is what was sent.
    for (const body of bodies) expect(queuedEventSchema().parse(body)).toEqual(body);
  });

  it('puts a contact created and then named by match.email in one message group, in any case', async () => {
    const response = await post([
      { entity: 'contacts', action: 'create', data: { email: 'ann@example.com' } },
      {
        entity: 'contacts',
        action: 'addToSegment',
        match: { email: ' ANN@example.com' },
        segmentId: 4,
      },
      { entity: 'contacts', action: 'addToSegment', id: 7, segmentId: 4 },
      {
        entity: 'contacts',
        action: 'addToSegment',
        match: { email: 'bob@example.com' },
        segmentId: 4,
      },
    ]);

    expect(response.status).toBe(202);
    const [created, matched, byId, other] = response.queued.map((message) => message.groupId);
    expect(matched).toBe(created);
    // A contact named by its id is another reference: the queue orders it on its own.
    expect(byId).not.toBe(created);
    expect(other).not.toBe(created);
  });
});

describe('docs/ingest.md', () => {
  it('shows examples of every shape that the ingest accepts as written', async () => {
    const page = readFileSync(new URL('../../docs/ingest.md', import.meta.url), 'utf8');
    const block = /```jsonl\n([\s\S]*?)```/.exec(page)?.[1] ?? '';
    const examples = block
      .split('\n')
      .filter((line) => line.trim() !== '')
      .map((line) => JSON.parse(line) as Event);
    const actions = new Set(examples.map((example) => example.action));

    expect(actions).toEqual(new Set(['create', 'edit', 'delete', ...Object.keys(CONTACT_ACTIONS)]));
    const response = await post(examples, WITH_CRM_ID);
    expect(response.status).toBe(202);
    expect(response.body.accepted).toBe(examples.length);
  });
});
