/**
 * The simulator plays each Mautic line as its source and functional tests say (docs/mautic.md
 * §8): the company upsert from 5.2.1, no rate limiter on 7, 7's 409 for a checked-out email, 7's
 * `companies/batch/addcontacts`, 5.2's null for a select value not in its list, and the
 * `Mautic-Version` header only where an API controller answers.
 */
import { describe, expect, it } from 'vitest';
import { DEFAULT_SIMULATOR_CLIENT, startMauticSimulator } from '../../mautic-simulator/server.ts';
import { errorBody, type Session, session } from './simulator-client.ts';

const LINES = [
  ['5.1', '5.1.1'],
  ['5.2', '5.2.9'],
  ['6', '6.0.0'],
  ['7', '7.0.0'],
] as const;

describe('Mautic-Version: only on the answers of an API controller', () => {
  it.each(LINES)(
    'on %s: on REST answers and their errors, never on a token answer, a 401 or a routing 404',
    async (line, version) => {
      const s: Session = await session({ mauticVersion: line });
      const token = (body: Record<string, string>) =>
        fetch(`${s.sim.url}/oauth/v2/token`, { method: 'POST', body: new URLSearchParams(body) });
      const granted = await token({
        grant_type: 'client_credentials',
        client_id: DEFAULT_SIMULATOR_CLIENT.clientId,
        client_secret: DEFAULT_SIMULATOR_CLIENT.clientSecret,
      });
      const refused = await token({
        grant_type: 'client_credentials',
        client_id: 'x_y',
        client_secret: 'z',
      });
      const unauthorized = await fetch(`${s.sim.url}/api/contacts`);
      const unrouted = await s.get('/api/nothing');
      const listed = await s.get('/api/contacts');
      const notFound = await s.get('/api/contacts/99');
      const created = await s.post('/api/contacts/batch/new', [{ email: 'ann@example.com' }]);

      expect([granted, refused, unauthorized, unrouted].map((a) => a.status)).toEqual([
        200, 400, 401, 404,
      ]);
      for (const answer of [granted, refused, unauthorized, unrouted])
        expect(answer.headers.get('mautic-version')).toBeNull();
      expect([listed, notFound, created].map((a) => a.status)).toEqual([200, 404, 201]);
      for (const answer of [listed, notFound, created])
        expect(answer.headers.get('mautic-version')).toBe(version);
    },
  );

  it('plays a version given in full, and refuses one it does not know', async () => {
    const s = await session({ mauticVersion: '5.2.0' });
    expect((await s.get('/api/contacts')).headers.get('mautic-version')).toBe('5.2.0');
    for (const mauticVersion of ['8', '4.4.0', '7.1', 'latest'])
      await expect(startMauticSimulator({ mauticVersion })).rejects.toThrow(/mauticVersion/);
  });
});

describe('a company created twice: refused up to 5.2.0, upserted from 5.2.1', () => {
  it.each(['5.1', '5.2.0'])(
    'on %s the second create is refused per item (422 must be unique)',
    async (line) => {
      const s = await session({ mauticVersion: line });
      await s.post('/api/companies/batch/new', [{ companyname: 'Acme' }]);

      const again = await s.post('/api/companies/batch/new', [{ companyname: 'acme ' }]);

      expect(again.json()).toMatchObject({
        statusCodes: [422],
        errors: [{ code: 422, message: 'companyname: This field must be unique.' }],
      });
      expect(s.sim.records('companies')).toHaveLength(1);
    },
  );

  it.each(['5.2.1', '5.2', '6', '7'])(
    'on %s the second create answers 200 with the same id',
    async (line) => {
      const s = await session({ mauticVersion: line });
      const first = await s.post('/api/companies/batch/new', [
        { companyname: 'Acme', companycity: 'Oslo' },
      ]);

      const again = await s.post('/api/companies/batch/new', [
        { companyname: 'Acme', companycity: 'Bergen' },
      ]);

      expect(first.json()).toMatchObject({ statusCodes: [201], companies: [{ id: 1 }] });
      expect(again.json()).toMatchObject({ statusCodes: [200], companies: [{ id: 1 }] });
      expect(again.json().errors).toBeUndefined();
      expect(s.sim.records('companies')).toMatchObject([
        { id: 1, companyname: 'Acme', companycity: 'Bergen' },
      ]);
    },
  );

  it('on 7 a duplicate name within one call gives 201, 201, 200', async () => {
    const s = await session({ mauticVersion: '7' });

    const answer = await s.post('/api/companies/batch/new', [
      { companyname: 'Company A' },
      { companyname: 'Company B' },
      { companyname: 'Company B' },
    ]);

    expect(answer.json()).toMatchObject({
      statusCodes: [201, 201, 200],
      companies: [{ id: 1 }, { id: 2 }, { id: 2 }],
    });
  });
});

describe('the rate limiter: optional up to 6, removed in 7', () => {
  it('answers 429 over the limit on 6', async () => {
    const s = await session({ mauticVersion: '6', rateLimit: { limit: 1 } });
    expect((await s.get('/api/contacts')).status).toBe(200);
    expect((await s.get('/api/contacts')).status).toBe(429);
  });

  it('cannot be set on 7, at start or later: Mautic 7 never answers 429', async () => {
    await expect(
      startMauticSimulator({ mauticVersion: '7', rateLimit: { limit: 1 } }),
    ).rejects.toThrow(/no API rate limiter/);
    const s = await session({ mauticVersion: '7' });
    expect(() => s.sim.setRateLimit({ limit: 1 })).toThrow(/no API rate limiter/);
  });
});

describe('a record a user has checked out for editing', () => {
  it('on 7, an email checked out is refused per item with 409, the others are edited', async () => {
    const s = await session({ mauticVersion: '7' });
    await s.post('/api/emails/batch/new', [
      { name: 'Welcome', subject: 'Welcome' },
      { name: 'News', subject: 'News' },
    ]);
    s.sim.checkOut('emails', 1);

    const answer = await s.send('PATCH', '/api/emails/batch/edit', [
      { id: 1, subject: 'Hi' },
      { id: 2, subject: 'Hello' },
    ]);

    const body = answer.json();
    expect(answer.status).toBe(200);
    expect(body.statusCodes).toEqual([409, 200]);
    // Keyed 0 only, so PHP serialises errors as a list.
    expect(body.errors).toEqual([
      {
        message: expect.stringMatching(/^Welcome is currently checked out by Admin User/),
        code: 409,
        type: 'api',
      },
    ]);
    expect(s.sim.records('emails').map((e) => e.subject)).toEqual(['Welcome', 'Hello']);

    s.sim.checkIn('emails', 1);
    const later = await s.send('PATCH', '/api/emails/batch/edit', [{ id: 1, subject: 'Hi' }]);
    expect(later.json().statusCodes).toEqual([200]);
  });

  it('on 7 the single edit answers 409 too; a contact is never locked; 6 edits a checked-out email', async () => {
    const seven = await session({ mauticVersion: '7' });
    await seven.post('/api/emails/batch/new', [{ name: 'Welcome', subject: 'Welcome' }]);
    await seven.post('/api/contacts/batch/new', [{ email: 'ann@example.com' }]);
    seven.sim.checkOut('emails', 1);
    seven.sim.checkOut('contacts', 1);
    const six = await session({ mauticVersion: '6' });
    await six.post('/api/emails/batch/new', [{ name: 'Welcome', subject: 'Welcome' }]);
    six.sim.checkOut('emails', 1);

    expect((await seven.send('PATCH', '/api/emails/1/edit', { subject: 'Hi' })).status).toBe(409);
    expect(
      (await seven.send('PATCH', '/api/contacts/batch/edit', [{ id: 1, city: 'Oslo' }])).json()
        .statusCodes,
    ).toEqual([200]);
    expect(
      (await six.send('PATCH', '/api/emails/batch/edit', [{ id: 1, subject: 'Hi' }])).json()
        .statusCodes,
    ).toEqual([200]);
  });
});

describe('POST /api/companies/batch/addcontacts (7.x)', () => {
  async function seeded(line = '7') {
    const s = await session({ mauticVersion: line });
    s.sim.seed('contacts', { email: 'ann@example.com' });
    s.sim.seed('contacts', { email: 'bob@example.com' });
    s.sim.seed('companies', { companyname: 'Acme' });
    s.sim.seed('companies', { companyname: 'Globex' });
    return s;
  }

  it('links each pair and answers a result per pair, in order, and a summary', async () => {
    const s = await seeded();

    const answer = await s.post('/api/companies/batch/addcontacts', {
      assignments: [
        { contactId: 1, companyId: 2 },
        { contactId: 1, companyId: 99 },
        { contactId: 98, companyId: 1 },
        { contactId: 2, companyId: 1 },
        { contactId: 2, companyId: 1 },
        { contactId: 1, companyId: 1 },
      ],
    });

    expect(answer.status).toBe(200);
    expect(answer.headers.get('mautic-version')).toBe('7.0.0');
    expect(answer.json()).toEqual({
      results: [
        { contactId: 1, companyId: 2, status: 200, message: 'Contact added to company' },
        { contactId: 1, companyId: 99, status: 404, message: 'Company not found' },
        { contactId: 98, companyId: 1, status: 404, message: 'Contact not found' },
        { contactId: 2, companyId: 1, status: 200, message: 'Contact added to company' },
        { contactId: 2, companyId: 1, status: 200, message: 'Contact added to company' },
        { contactId: 1, companyId: 1, status: 200, message: 'Contact added to company' },
      ],
      summary: { total: 6, succeeded: 4, failed: 2 },
    });
    // A contact's companies are linked in ascending id order: the first new one is primary.
    expect(s.sim.memberships(1)?.companies).toEqual([
      { id: 1, primary: true },
      { id: 2, primary: false },
    ]);
    expect(s.sim.memberships(2)?.companies).toEqual([{ id: 1, primary: true }]);
    expect(s.sim.records('contacts').map((c) => c.company)).toEqual(['Acme', 'Acme']);
  });

  it('answers an already linked pair 200 and changes nothing', async () => {
    const s = await seeded();
    await s.post('/api/companies/2/contact/1/add');

    const answer = await s.post('/api/companies/batch/addcontacts', {
      assignments: [{ contactId: 1, companyId: 2 }],
    });

    expect(answer.json()).toMatchObject({ results: [{ status: 200 }], summary: { succeeded: 1 } });
    expect(s.sim.memberships(1)?.companies).toEqual([{ id: 2, primary: true }]);
  });

  it('refuses an empty body, a bad entry and more pairs than the batch limit with 400', async () => {
    const s = await session({ mauticVersion: '7', batchMaxLimit: 2 });
    const pair = { contactId: 1, companyId: 1 };

    const empty = await s.post('/api/companies/batch/addcontacts', {});
    const scalar = await s.post('/api/companies/batch/addcontacts', { assignments: [pair, 3] });
    const over = await s.post('/api/companies/batch/addcontacts', {
      assignments: [pair, pair, pair],
    });

    expect(empty.status).toBe(400);
    expect(empty.text).toBe(
      errorBody(400, '"assignments" parameter is required and must be a non-empty array'),
    );
    expect(scalar.text).toBe(errorBody(400, 'Assignments entries must be a non-empty array'));
    expect(over.status).toBe(400);
    expect(over.text).toBe(errorBody(400, 'A max of 2 entities are supported at a time.'));
    expect(s.sim.requests.at(-1)).toMatchObject({ items: 3, status: 400 });
  });

  it.each(['5.1', '5.2', '6'])('does not exist on %s: a routing 404', async (line) => {
    const s = await seeded(line);

    const answer = await s.post('/api/companies/batch/addcontacts', {
      assignments: [{ contactId: 1, companyId: 1 }],
    });

    expect(answer.status).toBe(404);
    expect(answer.json()).toMatchObject({
      errors: [{ code: 404, message: 'Requested URL not found: /api/companies/batch/addcontacts' }],
    });
    expect(s.sim.memberships(1)?.companies).toEqual([]);
  });
});

describe('a select value not in its list', () => {
  it.each(['5.2', '6', '7'])('is stored as null on %s, answered 200', async (line) => {
    const s = await session({ mauticVersion: line });

    const answer = await s.post('/api/companies/batch/new', [
      { companyname: 'Acme', companyindustry: 'Space piracy' },
      { companyname: 'Globex', companyindustry: 'Banking' },
    ]);

    expect(answer.json().statusCodes).toEqual([201, 201]);
    expect(s.sim.records('companies').map((c) => c.companyindustry)).toEqual([null, 'Banking']);
  });
});
