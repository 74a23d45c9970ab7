import { describe, expect, it } from 'vitest';
import { errorBody, genericError, type Session, session } from './simulator-client.ts';

type Dnc = Record<string, unknown>;

async function withContact(): Promise<Session> {
  const s = await session();
  s.sim.seed('contacts', { email: 'ann@x.com' });
  return s;
}

const dncOf = (answer: { json: () => Record<string, unknown> }) =>
  (answer.json().contact as { doNotContact: Dnc[] }).doNotContact;

describe('POST /api/contacts/{id}/dnc/{channel}/add|remove', () => {
  it('adds a manual entry by default and shows it in the contact', async () => {
    const s = await withContact();

    const answer = await s.post('/api/contacts/1/dnc/email/add');

    expect(answer.status).toBe(200);
    expect(dncOf(answer)).toEqual([
      {
        id: 1,
        dateAdded: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00$/),
        reason: 3,
        comments: '',
        channel: 'email',
        channelId: null,
      },
    ]);
    expect(s.sim.records('contacts')[0]?.doNotContact).toEqual([
      { channel: 'email', reason: 3, comments: '', channelId: null },
    ]);
  });

  it('HTML-encodes the comments and keeps the channel id', async () => {
    const s = await withContact();

    const answer = await s.post('/api/contacts/1/dnc/sms/add', {
      reason: 2,
      comments: `Bounced <b>"hard"</b> & gone`,
      channelId: '12',
    });

    expect(dncOf(answer)).toMatchObject([
      {
        reason: 2,
        comments: 'Bounced &#60;b&#62;&#34;hard&#34;&#60;/b&#62; &#38; gone',
        channel: 'sms',
        channelId: 12,
      },
    ]);
  });

  it('refuses reason 0 (or what casts to 0) with the exact 400', async () => {
    const s = await withContact();

    const zero = await s.post('/api/contacts/1/dnc/email/add', { reason: 0 });
    const word = await s.post('/api/contacts/1/dnc/email/add', { reason: 'none' });

    for (const answer of [zero, word]) {
      expect(answer.status).toBe(400);
      expect(answer.text).toBe(
        errorBody(400, 'Invalid reason code given', [
          'Reason code needs to be an integer and higher than 0.',
        ]),
      );
    }
    expect(s.sim.records('contacts')[0]).not.toHaveProperty('doNotContact');
  });

  it('updates the reason of an entry, but never lifts an unsubscription', async () => {
    const s = await withContact();
    s.sim.seed('contacts', { email: 'bob@y.com' });

    await s.post('/api/contacts/1/dnc/email/add', { reason: 2, comments: 'bounce' });
    const updated = await s.post('/api/contacts/1/dnc/email/add', {
      reason: 3,
      comments: 'by hand',
    });
    await s.post('/api/contacts/2/dnc/email/add', { reason: 1 });
    const kept = await s.post('/api/contacts/2/dnc/email/add', { reason: 3 });

    expect(dncOf(updated)).toMatchObject([{ id: 1, reason: 3, comments: 'by hand' }]);
    expect(dncOf(kept)).toMatchObject([{ reason: 1, channel: 'email' }]);
  });

  it('removes the channel’s entry and says whether there was one', async () => {
    const s = await withContact();
    await s.post('/api/contacts/1/dnc/email/add');

    const removed = await s.post('/api/contacts/1/dnc/email/remove');
    const again = await s.post('/api/contacts/1/dnc/email/remove');

    expect(removed.json()).toMatchObject({ recordFound: true, contact: { doNotContact: [] } });
    expect(again.json().recordFound).toBe(false);
  });

  it('answers 404 for an unknown contact', async () => {
    const s = await session();

    const add = await s.post('/api/contacts/3/dnc/email/add');
    const remove = await s.post('/api/contacts/3/dnc/email/remove');

    expect([add.text, remove.text]).toEqual(Array(2).fill(errorBody(404, 'Item was not found.')));
  });
});

describe('doNotContact in batch items', () => {
  it('creates entries on batch/new, email and reason 3 by default, and is no field', async () => {
    const s = await session();

    const answer = await s.post('/api/contacts/batch/new', [
      { email: 'ann@x.com', doNotContact: [{}, { channel: 'sms', reason: 2, comments: 'a<b' }] },
    ]);

    const contact = (
      answer.json().contacts as Array<{ doNotContact: Dnc[]; fields: { all: Dnc } }>
    )[0];
    expect(contact?.doNotContact).toMatchObject([
      { reason: 3, channel: 'email', comments: '' },
      { reason: 2, channel: 'sms', comments: 'a<b' },
    ]);
    expect(contact?.fields.all).not.toHaveProperty('doNotContact');
    expect(s.sim.records('contacts')[0]?.doNotContact).toHaveLength(2);
  });

  it('removes a channel with reason 0 when batch/new upserts an existing contact', async () => {
    const s = await withContact();
    await s.post('/api/contacts/1/dnc/email/add');

    const answer = await s.post('/api/contacts/batch/new', [
      { email: 'ANN@x.com', doNotContact: [{ channel: 'email', reason: 0 }] },
    ]);

    expect(answer.json()).toMatchObject({
      statusCodes: [200],
      contacts: [{ id: 1, doNotContact: [] }],
    });
  });

  it('adds and removes with PUT and PATCH batch/edit, and ignores reason 0 on a new contact', async () => {
    const s = await withContact();

    const put = await s.send('PUT', '/api/contacts/batch/edit', [
      { id: 1, email: 'ann@x.com', doNotContact: [{ reason: 3 }] },
      { id: 'rubbish', email: 'new@x.com', doNotContact: [{ reason: 0 }] },
    ]);
    const patch = await s.send('PATCH', '/api/contacts/batch/edit', [
      { id: 1, doNotContact: [{ reason: 0 }] },
    ]);

    expect(put.json()).toMatchObject({
      statusCodes: [200, 201],
      contacts: [{ doNotContact: [{ reason: 3, channel: 'email' }] }, { doNotContact: [] }],
    });
    expect(patch.json()).toMatchObject({ contacts: [{ doNotContact: [] }] });
  });

  it('applies nothing for an item whose form is invalid', async () => {
    const s = await session();

    await s.post('/api/contacts/batch/new', [{ email: 'bad', doNotContact: [{ reason: 1 }] }]);

    expect(s.sim.records('contacts')).toEqual([]);
  });

  it('answers the generic 500 for an entry that is not an object', async () => {
    const s = await session();

    const answer = await s.post('/api/contacts/batch/new', [
      { email: 'ann@x.com' },
      { email: 'bob@y.com', doNotContact: ['email'] },
    ]);

    expect(answer.status).toBe(500);
    expect(answer.text).toBe(genericError(500));
    // Mautic saves item by item: the first contact is there.
    expect(s.sim.records('contacts').map((record) => record.email)).toEqual([
      'ann@x.com',
      'bob@y.com',
    ]);
  });
});

describe('POST /api/contacts/{id}/points/{operator}/{delta}', () => {
  const points = (s: Session) => s.sim.records('contacts')[0]?.points;

  it('applies plus, minus, times and divide, each call again', async () => {
    const s = await withContact();
    const steps: Array<[string, number]> = [
      ['plus/10', 10],
      ['plus/10', 20],
      ['minus/5', 15],
      ['times/3', 45],
      ['divide/2', 23],
      ['plus/-2', 21],
      ['divide/-2', -11],
    ];

    for (const [path, expected] of steps) {
      const answer = await s.post(`/api/contacts/1/points/${path}`);
      expect(answer.text).toBe('{"success":1}');
      expect(points(s)).toBe(expected);
    }
    expect((await s.get('/api/contacts/1')).json().contact).toMatchObject({ points: -11 });
  });

  it('casts the delta as PHP does: 0 or a non-number changes nothing, before the operator', async () => {
    const s = await withContact();

    const zero = await s.post('/api/contacts/1/points/plus/0');
    const word = await s.post('/api/contacts/1/points/set/abc');
    const decimal = await s.post('/api/contacts/1/points/plus/2.9');

    expect([zero.text, word.text, decimal.text]).toEqual(Array(3).fill('{"success":1}'));
    expect(points(s)).toBe(2);
  });

  it('refuses another operator with 400 and an unknown contact with 404', async () => {
    const s = await withContact();

    const set = await s.post('/api/contacts/1/points/set/5');
    const unknown = await s.post('/api/contacts/8/points/plus/5');

    expect(set.status).toBe(400);
    expect(set.text).toBe(errorBody(400, 'Invalid operator'));
    expect(unknown.status).toBe(404);
    expect(unknown.text).toBe(errorBody(404, 'Contact not found.'));
    expect(points(s)).toBeUndefined();
  });
});
