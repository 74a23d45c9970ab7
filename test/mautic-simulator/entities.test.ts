import { describe, expect, it } from 'vitest';
import { DEFAULT_ENTITIES } from '../../functions/shared/config.ts';
import { ENTITIES } from '../../mautic-simulator/entities.ts';
import { errorBody, session } from './simulator-client.ts';

/** docs/mautic.md §7: each default entity's list and single keys. */
const KEYS: Record<string, [string, string]> = {
  contacts: ['contacts', 'contact'],
  companies: ['companies', 'company'],
  segments: ['lists', 'list'],
  dynamiccontents: ['dynamicContents', 'dynamicContent'],
  categories: ['categories', 'category'],
  smses: ['smses', 'sms'],
  focus: ['focus', 'focus'],
};

/** A valid item of each entity: the fields its validator requires. */
function validItem(entity: string, n: number): Record<string, unknown> {
  const item: Record<string, unknown> = {};
  for (const [field] of ENTITIES[entity as keyof typeof ENTITIES].required)
    item[field] = `${field} ${n}`;
  if (entity === 'contacts') item.email = `c${n}@example.com`;
  if (entity === 'tags') item.tag = `tag ${n}`;
  return item;
}

describe('every default entity (issue 25: the simulator knew 4 of 24)', () => {
  it('serves batch new, edit and delete for each, under the keys of docs/mautic.md §7', async () => {
    const s = await session();
    expect(Object.keys(ENTITIES).sort()).toEqual([...DEFAULT_ENTITIES].sort());

    for (const entity of DEFAULT_ENTITIES) {
      const [multi, one] = KEYS[entity] ?? [entity, entity.replace(/s$/, '')];
      const created = await s.post(`/api/${entity}/batch/new`, [
        validItem(entity, 1),
        validItem(entity, 2),
      ]);
      const edited = await s.send('PATCH', `/api/${entity}/batch/edit`, [{ id: 1, note: 'x' }]);
      const read = await s.get(`/api/${entity}/2`);
      const deleted = await s.send('DELETE', `/api/${entity}/batch/delete?ids=1,2,3`);

      expect({ entity, status: created.status }).toEqual({ entity, status: 201 });
      expect(created.json(), entity).toMatchObject({
        [multi]: [{ id: 1 }, { id: 2 }],
        statusCodes: [201, 201],
      });
      expect(edited.json(), entity).toMatchObject({ [multi]: [{ id: 1 }], statusCodes: [200] });
      expect(read.json(), entity).toMatchObject({ [one]: { id: 2 } });
      expect(deleted.json(), entity).toEqual({ [multi]: [expect.anything(), expect.anything()] });
      expect(s.sim.records(entity), entity).toEqual([]);
    }
  });

  it("refuses an item without a field its entity's validator requires", async () => {
    const s = await session();

    const notes = await s.post('/api/notes/batch/new', [{ type: 'general' }, { text: 'Called' }]);
    const emails = await s.post('/api/emails/batch/new', [{ subject: 'Hi' }]);

    expect(notes.json()).toMatchObject({
      statusCodes: [400, 201],
      notes: { 1: { text: 'Called' } },
      errors: [
        {
          code: 400,
          message: 'text: Note text cannot be empty',
          details: { text: ['Note text cannot be empty'] },
          type: null,
        },
      ],
    });
    expect(emails.json()).toMatchObject({
      statusCodes: [400],
      errors: [{ message: 'name: A name is required.' }],
    });
  });

  it('finds a tag by name on batch/new, and needs a name', async () => {
    const s = await session();

    const first = await s.post('/api/tags/batch/new', [{ tag: 'News' }, { tag: 'news' }]);
    const nameless = await s.post('/api/tags/batch/new', [{ tag: 'Other' }, { description: 'x' }]);

    expect(first.json()).toMatchObject({ statusCodes: [201, 200], tags: [{ id: 1 }, { id: 1 }] });
    // TagApiController::getNewEntity throws: the generic 500, after the items before it.
    expect(nameless.status).toBe(500);
    expect(s.sim.records('tags').map((tag) => tag.tag)).toEqual(['news', 'Other']);
  });

  it('serves the single-record routes: new, edit and delete', async () => {
    const s = await session();

    const created = await s.post('/api/contacts/new', { email: 'ann@example.com' });
    const again = await s.post('/api/contacts/new', { email: 'ANN@example.com', city: 'Oslo' });
    const edited = await s.send('PATCH', '/api/contacts/1/edit', { firstname: 'Ann' });
    const missing = await s.send('PATCH', '/api/contacts/9/edit', { firstname: 'Bo' });
    const invalid = await s.post('/api/companies/new', { companycity: 'Oslo' });
    const deleted = await s.send('DELETE', '/api/contacts/1/delete');

    expect([created.status, again.status, edited.status]).toEqual([201, 200, 200]);
    expect(again.json()).toMatchObject({ contact: { id: 1, fields: { all: { city: 'Oslo' } } } });
    expect(missing.text).toBe(errorBody(404, 'Item was not found.'));
    expect(invalid.text).toBe(
      errorBody(400, 'companyname: This field is required.', {
        companyname: ['This field is required.'],
      }),
    );
    expect(deleted.json()).toMatchObject({
      contact: { id: 1, fields: { all: { firstname: 'Ann' } } },
    });
    expect(s.sim.records('contacts')).toEqual([]);
  });
});

describe('contact items as Mautic 5.1.1 saves them (issue 25)', () => {
  it('refuses an edit that gives a contact another one’s email, and merges nothing', async () => {
    const s = await session();
    s.sim.seed('contacts', { email: 'ann@example.com', firstname: 'Ann' });
    s.sim.seed('contacts', { email: 'bo@example.com', firstname: 'Bo' });

    const answer = await s.send('PATCH', '/api/contacts/batch/edit', [
      { id: 2, email: 'ANN@example.com ', firstname: 'Bob' },
      { id: 1, city: 'Oslo' },
    ]);

    expect(answer.json()).toMatchObject({
      statusCodes: [422, 200],
      // The refused item is still listed at its position, unchanged.
      contacts: [{ id: 2, fields: { all: { firstname: 'Bo' } } }, { id: 1 }],
      errors: [
        {
          code: 422,
          message: 'email: This field must be unique.',
          details: { email: ['This field must be unique.'] },
          type: null,
        },
      ],
    });
    expect(s.sim.records('contacts')).toMatchObject([
      { id: 1, email: 'ann@example.com', city: 'Oslo' },
      { id: 2, email: 'bo@example.com', firstname: 'Bo' },
    ]);
  });

  it('replaces the company links on `companies` and adds one by name on `company`', async () => {
    const s = await session();
    s.sim.seed('companies', { companyname: 'Acme' });
    s.sim.seed('companies', { companyname: 'Globex' });
    s.sim.seed('companies', { companyname: 'Initech' });

    await s.post('/api/contacts/batch/new', [{ email: 'ann@example.com', companies: [1, 2] }]);
    const afterCreate = s.sim.memberships(1)?.companies;
    await s.send('PATCH', '/api/contacts/batch/edit', [{ id: 1, companies: [3, 2] }]);
    const afterReplace = s.sim.memberships(1)?.companies;
    await s.send('PATCH', '/api/contacts/batch/edit', [{ id: 1, company: 'ACME' }]);
    const afterAcme = s.sim.memberships(1)?.companies;
    await s.send('PATCH', '/api/contacts/batch/edit', [{ id: 1, company: 'Umbrella' }]);

    expect(afterCreate).toEqual([
      { id: 1, primary: true },
      { id: 2, primary: false },
    ]);
    expect(afterReplace).toEqual([
      { id: 2, primary: false },
      { id: 3, primary: true },
    ]);
    // `company` links the company of that name (compared as MySQL does) and makes it primary.
    expect(afterAcme).toEqual([
      { id: 2, primary: false },
      { id: 3, primary: false },
      { id: 1, primary: true },
    ]);
    expect(s.sim.memberships(1)?.companies).toContainEqual({ id: 4, primary: true });
    expect(s.sim.records('companies').map((company) => company.companyname)).toEqual([
      'Acme',
      'Globex',
      'Initech',
      'Umbrella',
    ]);
    expect(s.sim.records('contacts')[0]).toMatchObject({ company: 'Umbrella' });
  });

  it('removes tags case-sensitively, and keeps a new tag an item adds and removes', async () => {
    const s = await session();
    s.sim.seed('contacts', { email: 'ann@example.com', tags: ['Newsletter'] });

    await s.send('PATCH', '/api/contacts/batch/edit', [
      { id: 1, tags: ['-newsletter', 'x', '-x'] },
    ]);
    const kept = s.sim.records('contacts')[0]?.tags;
    await s.send('PATCH', '/api/contacts/batch/edit', [{ id: 1, tags: ['-Newsletter', '-x'] }]);

    expect(kept).toEqual(['Newsletter', 'x']);
    expect(s.sim.records('contacts')[0]?.tags).toEqual([]);
    expect(s.sim.records('tags').map((tag) => tag.tag)).toEqual(['Newsletter', 'x']);
  });

  it('writes blanks under overwriteWithBlank, but never points 0', async () => {
    const s = await session();
    s.sim.seed('contacts', { email: 'ann@example.com', city: 'Oslo', points: 7 });

    await s.send('PATCH', '/api/contacts/batch/edit', [
      { id: 1, city: '', points: 0, overwriteWithBlank: true },
    ]);

    expect(s.sim.records('contacts')).toMatchObject([{ city: '', points: 7 }]);
  });
});
