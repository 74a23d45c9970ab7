import { describe, expect, it } from 'vitest';
import { errorBody, type Session, session } from './simulator-client.ts';

const NOT_FOUND = errorBody(404, 'Item was not found.');
const CONTACT_NOT_FOUND = errorBody(404, 'Contact not found.');
const DENIED = errorBody(403, 'You do not have access to the requested area/action.');

/** Contacts 1 and 2, segment 1 (published) and 2 (unpublished). */
async function withSegments(): Promise<Session> {
  const s = await session();
  s.sim.seed('contacts', { email: 'ann@x.com' });
  s.sim.seed('contacts', { email: 'bob@y.com' });
  s.sim.seed('segments', { name: 'VIP customers' });
  s.sim.seed('segments', { name: 'Drafts', isPublished: false });
  return s;
}

describe('POST /api/segments/{id}/contacts/add', () => {
  it('adds each id and answers one success flag per requested id', async () => {
    const s = await withSegments();

    const answer = await s.post('/api/segments/1/contacts/add', { ids: [2, 99, '1', 'abc'] });

    expect(answer.status).toBe(200);
    expect(answer.text).toBe(
      '{"success":1,"details":{"2":{"success":true},"99":{"success":false},"1":{"success":true},"abc":{"success":false}}}',
    );
    expect(s.sim.memberships(1)?.segments).toEqual([
      { id: 1, manuallyAdded: true, manuallyRemoved: false },
    ]);
    expect(s.sim.requests.at(-1)?.items).toBe(4);
  });

  it('takes the ids from a form body too, and answers [] details for no ids', async () => {
    const s = await withSegments();

    const form = await s.post(
      '/api/segments/1/contacts/add',
      'ids[]=1&ids[]=2',
      'application/x-www-form-urlencoded',
    );
    const empty = await s.post('/api/segments/1/contacts/add', { ids: [] });

    expect(form.text).toBe('{"success":1,"details":{"1":{"success":true},"2":{"success":true}}}');
    expect(empty.text).toBe('{"success":1,"details":[]}');
  });

  it('answers 400 without ids, before it looks at the segment', async () => {
    const s = await withSegments();

    const missing = await s.post('/api/segments/99/contacts/add', { contacts: [1] });
    const none = await s.post('/api/segments/1/contacts/add');

    expect(missing.status).toBe(400);
    expect(missing.text).toBe(errorBody(400, 'This is a bad request.'));
    expect(none.text).toBe(errorBody(400, 'This is a bad request.'));
  });

  it('answers 404 for an unknown segment and 403 for an unpublished one', async () => {
    const s = await withSegments();

    const unknown = await s.post('/api/segments/99/contacts/add', { ids: [1] });
    const unpublished = await s.post('/api/segments/2/contacts/add', { ids: [1] });

    expect(unknown.status).toBe(404);
    expect(unknown.text).toBe(NOT_FOUND);
    expect(unpublished.status).toBe(403);
    expect(unpublished.text).toBe(DENIED);
    expect(s.sim.memberships(1)?.segments).toEqual([]);
  });
});

describe('POST /api/segments/{id}/contact/{contactId}/add|remove', () => {
  it('adds and removes one contact; a row added by hand is deleted on removal', async () => {
    const s = await withSegments();

    const added = await s.post('/api/segments/1/contact/1/add');
    const again = await s.post('/api/segments/1/contact/1/add');
    const listed = await s.get('/api/contacts/1/segments');
    const removed = await s.post('/api/segments/1/contact/1/remove');

    expect([added.text, again.text, removed.text]).toEqual(Array(3).fill('{"success":1}'));
    expect(listed.json()).toEqual({
      total: 1,
      lists: {
        1: {
          id: 1,
          alias: 'vip-customers',
          name: 'VIP customers',
          dateAdded: expect.stringMatching(/\+00:00$/),
          manuallyAdded: true,
          manuallyRemoved: false,
        },
      },
    });
    expect(s.sim.memberships(1)?.segments).toEqual([]);
    expect((await s.get('/api/contacts/1/segments')).text).toBe('{"total":0,"lists":[]}');
  });

  it('keeps a row its filters added as manually removed, and takes it back on a manual add', async () => {
    const s = await withSegments();
    s.sim.addBySegmentFilters(1, 2);

    await s.post('/api/segments/1/contact/2/remove');
    const afterRemove = s.sim.memberships(2)?.segments;
    const listed = await s.get('/api/contacts/2/segments');
    await s.post('/api/segments/1/contact/2/add');

    expect(afterRemove).toEqual([{ id: 1, manuallyAdded: false, manuallyRemoved: true }]);
    expect(listed.json()).toEqual({ total: 0, lists: [] });
    expect(s.sim.memberships(2)?.segments).toEqual([
      { id: 1, manuallyAdded: true, manuallyRemoved: false },
    ]);
  });

  it('answers the segment 404, then the contact 404, then the 403', async () => {
    const s = await withSegments();

    const unknownBoth = await s.post('/api/segments/99/contact/99/add');
    const unknownContact = await s.post('/api/segments/1/contact/99/remove');
    const unpublishedUnknownContact = await s.post('/api/segments/2/contact/99/add');
    const unpublished = await s.post('/api/segments/2/contact/1/add');

    expect(unknownBoth.text).toBe(NOT_FOUND);
    expect(unknownContact.status).toBe(404);
    expect(unknownContact.text).toBe(CONTACT_NOT_FOUND);
    expect(unpublishedUnknownContact.text).toBe(CONTACT_NOT_FOUND);
    expect(unpublished.text).toBe(DENIED);
  });

  it('finds segment members with search segment:<alias>', async () => {
    const s = await withSegments();
    await s.post('/api/segments/1/contacts/add', { ids: [2] });

    const answer = await s.get('/api/contacts?search=segment:vip-customers');

    expect(Object.keys(answer.json().contacts as object)).toEqual(['2']);
  });
});

describe('campaigns', () => {
  it('are created with batch/new and listed as an ORM list', async () => {
    const s = await session();

    const created = await s.post('/api/campaigns/batch/new', [{ name: 'Welcome' }, { name: '' }]);
    const listed = await s.get('/api/campaigns');

    expect(created.status).toBe(201);
    expect(created.json()).toMatchObject({
      statusCodes: [201, 400],
      campaigns: { 0: { id: 1, name: 'Welcome', isPublished: true } },
      errors: {
        1: {
          code: 400,
          message: 'name: A name is required.',
          details: { name: ['A name is required.'] },
        },
      },
    });
    expect(listed.json()).toMatchObject({ total: 1, campaigns: [{ id: 1, name: 'Welcome' }] });
  });

  it('add and remove one contact; the member is marked manually removed', async () => {
    const s = await session();
    s.sim.seed('contacts', { email: 'ann@x.com' });
    s.sim.seed('campaigns', { name: 'Welcome' });

    const added = await s.post('/api/campaigns/1/contact/1/add');
    const listed = await s.get('/api/contacts/1/campaigns');
    const removed = await s.post('/api/campaigns/1/contact/1/remove');

    expect(added.text).toBe('{"success":1}');
    expect(removed.text).toBe('{"success":1}');
    expect(listed.json()).toEqual({
      total: 1,
      campaigns: {
        1: {
          id: 1,
          name: 'Welcome',
          lists: [],
          dateAdded: expect.stringMatching(/\+00:00$/),
          manuallyAdded: true,
          manuallyRemoved: false,
        },
      },
    });
    expect(s.sim.memberships(1)?.campaigns).toEqual([
      { id: 1, manuallyAdded: false, manuallyRemoved: true },
    ]);
    expect((await s.get('/api/contacts/1/campaigns')).json()).toEqual({ total: 0, campaigns: [] });
  });

  it('answer each 404 with its controller’s message', async () => {
    const s = await session();
    s.sim.seed('contacts', { email: 'ann@x.com' });
    s.sim.seed('campaigns', { name: 'Welcome' });

    const unknownCampaign = await s.post('/api/campaigns/9/contact/1/add');
    const addUnknownContact = await s.post('/api/campaigns/1/contact/9/add');
    const removeUnknownContact = await s.post('/api/campaigns/1/contact/9/remove');

    expect(unknownCampaign.text).toBe(NOT_FOUND);
    expect(addUnknownContact.text).toBe(NOT_FOUND);
    expect(removeUnknownContact.text).toBe(CONTACT_NOT_FOUND);
  });
});

describe('company links', () => {
  /** Contact 1; companies 1 (Acme) and 2 (Globex). */
  async function withCompanies(): Promise<Session> {
    const s = await session();
    s.sim.seed('contacts', { email: 'ann@x.com' });
    s.sim.seed('companies', { companyname: 'Acme' });
    s.sim.seed('companies', { companyname: 'Globex' });
    return s;
  }
  const companyField = async (s: Session) =>
    ((await s.get('/api/contacts/1')).json().contact as { fields: { all: { company: unknown } } })
      .fields.all.company;

  it('make the newest link primary and its name the contact’s company', async () => {
    const s = await withCompanies();

    const first = await s.post('/api/companies/1/contact/1/add');
    const second = await s.post('/api/companies/2/contact/1/add');
    const again = await s.post('/api/companies/1/contact/1/add');

    expect([first.text, second.text, again.text]).toEqual(Array(3).fill('{"success":1}'));
    expect(s.sim.memberships(1)?.companies).toEqual([
      { id: 1, primary: false },
      { id: 2, primary: true },
    ]);
    expect(await companyField(s)).toBe('Globex');
  });

  it('pass the primary role on when the primary link goes, and empty company at the end', async () => {
    const s = await withCompanies();
    await s.post('/api/companies/1/contact/1/add');
    await s.post('/api/companies/2/contact/1/add');

    await s.post('/api/companies/2/contact/1/remove');
    const afterPrimary = await companyField(s);
    const listed = await s.get('/api/contacts/1/companies');
    await s.post('/api/companies/1/contact/1/remove');

    expect(afterPrimary).toBe('Acme');
    expect(listed.json()).toMatchObject({
      total: 1,
      companies: [{ company_id: '1', is_primary: '1', id: '1', companyname: 'Acme' }],
    });
    expect(await companyField(s)).toBe('');
    expect(s.sim.memberships(1)?.companies).toEqual([]);
  });

  it('answer each 404 with its controller’s message', async () => {
    const s = await withCompanies();

    const unknownCompany = await s.post('/api/companies/9/contact/1/add');
    const addUnknownContact = await s.post('/api/companies/1/contact/9/add');
    const removeUnknownContact = await s.post('/api/companies/1/contact/9/remove');

    expect(unknownCompany.text).toBe(NOT_FOUND);
    expect(addUnknownContact.text).toBe(CONTACT_NOT_FOUND);
    expect(removeUnknownContact.text).toBe(NOT_FOUND);
  });

  it('are found by search company:', async () => {
    const s = await withCompanies();
    s.sim.seed('contacts', { email: 'bob@y.com' });
    await s.post('/api/companies/2/contact/2/add');

    const answer = await s.get('/api/contacts?search=company:glo');

    expect(Object.keys(answer.json().contacts as object)).toEqual(['2']);
  });
});

describe('reading a contact’s memberships', () => {
  it('answers 404 for an unknown contact', async () => {
    const s = await session();

    const answers = await Promise.all(
      ['segments', 'campaigns', 'companies'].map((kind) => s.get(`/api/contacts/7/${kind}`)),
    );

    expect(answers.map((answer) => answer.text)).toEqual(Array(3).fill(NOT_FOUND));
  });
});

describe('the harness around the new routes', () => {
  it('rate-limits, injects and drops them as it does the batch routes', async () => {
    const s = await withSegments();
    s.sim.inject({ method: 'POST', path: /\/contacts\/add$/ }, { status: 503, body: 'down' });

    const injected = await s.post('/api/segments/1/contacts/add', { ids: [1] });
    s.sim.setRateLimit({ limit: 1 });
    const counted = await s.post('/api/contacts/1/points/plus/5');
    const limited = await s.post('/api/segments/1/contact/1/add');
    s.sim.setRateLimit(undefined);
    s.sim.failAfterApply({ path: '/api/contacts/1/points/plus/5' }, 'gateway_timeout');
    const lost = await s.post('/api/contacts/1/points/plus/5');

    expect([injected.status, counted.status, limited.status, lost.status]).toEqual([
      503, 200, 429, 504,
    ]);
    expect(counted.headers.get('x-ratelimit-remaining')).toBe('0');
    expect(s.sim.memberships(1)?.segments).toEqual([]);
    expect(s.sim.records('contacts')[0]?.points).toBe(10);
  });

  it('answers them the fault sequence of a seed', async () => {
    const s = await withSegments();
    s.sim.setFaults({ seed: 7, errorRate: 1 });

    const answer = await s.post('/api/segments/1/contact/1/add');

    expect([500, 502, 503]).toContain(answer.status);
    expect(s.sim.memberships(1)?.segments).toEqual([]);
  });
});
