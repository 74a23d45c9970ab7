import { describe, expect, it } from 'vitest';
import { errorBody, genericError, idsOf, type Session, session } from './simulator-client.ts';

/** `where[0]…` as a query string, each part URL-encoded. */
function where(...clauses: Array<Record<string, string>>): string {
  return clauses
    .flatMap((clause, index) =>
      Object.entries(clause).map(
        ([key, value]) => `where[${index}][${key}]=${encodeURIComponent(value)}`,
      ),
    )
    .join('&');
}

/** Contacts that look alike: a lookup must tell them apart. */
async function lookAlikes(): Promise<Session> {
  const s = await session();
  for (const contact of [
    { email: 'ann@x.com', firstname: 'Ann' }, // 1
    { email: 'ann@x.com.au', firstname: 'Annie' }, // 2
    { email: 'john_doe@x.com', crm_id: 'a,b' }, // 3
    { email: 'johnXdoe@x.com', crm_id: 'AB-1' }, // 4
    { email: "o'hara@x.com", lastname: "O'Hara" }, // 5
    { email: 'BOB@Y.COM', crm_id: 'ab-2' }, // 6
  ]) {
    s.sim.seed('contacts', contact);
  }
  return s;
}

describe('GET /api/contacts with where', () => {
  it('finds exactly the listed values with `in`, ignoring case and trailing spaces only', async () => {
    const s = await lookAlikes();

    const two = await s.get(
      `/api/contacts?${where({ col: 'email', expr: 'in', val: 'ann@x.com,bob@y.com' })}`,
    );
    const spaced = await s.get(
      `/api/contacts?${where({ col: 'email', expr: 'in', val: 'ann@x.com , bob@y.com' })}`,
    );

    expect(two.status).toBe(200);
    expect(idsOf(two)).toEqual([1, 6]);
    expect(two.json().total).toBe('2');
    // Values are not trimmed: "ann@x.com " still matches (SQL ignores trailing spaces), while
    // " bob@y.com" does not.
    expect(idsOf(spaced)).toEqual([1]);
  });

  it('splits `in` as CSV: a double-quoted value may hold a comma', async () => {
    const s = await lookAlikes();

    const quoted = await s.get(
      `/api/contacts?${where({ col: 'crm_id', expr: 'in', val: '"a,b",ab-1' })}`,
    );
    const unquoted = await s.get(
      `/api/contacts?${where({ col: 'crm_id', expr: 'in', val: 'a,b' })}`,
    );

    expect(idsOf(quoted)).toEqual([3, 4]);
    expect(idsOf(unquoted)).toEqual([]);
  });

  it("finds o'hara with `in` (decoded again) but not with `eq` (still HTML-encoded)", async () => {
    const s = await lookAlikes();

    const one = await s.get(
      `/api/contacts?${where({ col: 'email', expr: 'in', val: "o'hara@x.com" })}`,
    );
    const two = await s.get(
      `/api/contacts?${where({ col: 'email', expr: 'in', val: "o'hara@x.com,ann@x.com" })}`,
    );
    const eq = await s.get(
      `/api/contacts?${where({ col: 'email', expr: 'eq', val: "o'hara@x.com" })}`,
    );
    const encoded = await s.get(
      `/api/contacts?${where({ col: 'lastname', expr: 'eq', val: 'o&#39;hara' })}`,
    );

    expect(idsOf(one)).toEqual([5]);
    expect(idsOf(two)).toEqual([1, 5]);
    expect(idsOf(eq)).toEqual([]);
    // The cleaned value is `o&#38;#39;hara`: sending the entity does not find it either.
    expect(idsOf(encoded)).toEqual([]);
  });

  it('treats `_` and `%` as wildcards in `like`, and compares `eq` case-insensitively', async () => {
    const s = await lookAlikes();

    const like = await s.get(
      `/api/contacts?${where({ col: 'email', expr: 'like', val: 'john_doe@x.com' })}`,
    );
    const prefix = await s.get(
      `/api/contacts?${where({ col: 'email', expr: 'like', val: 'ann@%' })}`,
    );
    const eq = await s.get(
      `/api/contacts?${where({ col: 'l.email', expr: 'eq', val: 'JOHN_DOE@X.COM' })}`,
    );

    expect(idsOf(like)).toEqual([3, 4]);
    expect(idsOf(prefix)).toEqual([1, 2]);
    expect(idsOf(eq)).toEqual([3]);
  });

  it('leaves NULL columns out of every comparison but isNull', async () => {
    const s = await lookAlikes();
    const ids = async (clause: Record<string, string>) =>
      idsOf(await s.get(`/api/contacts?${where({ col: 'firstname', ...clause })}`));

    expect(await ids({ expr: 'isNull' })).toEqual([3, 4, 5, 6]);
    expect(await ids({ expr: 'isNotNull' })).toEqual([1, 2]);
    expect(await ids({ expr: 'neq', val: 'Ann' })).toEqual([2]);
    expect(await ids({ expr: 'notIn', val: 'ann,x' })).toEqual([2]);
    expect(await ids({ expr: 'notLike', val: 'ann%' })).toEqual([]);
  });

  it('ANDs the clauses, and nests them with orX', async () => {
    const s = await lookAlikes();

    const both = await s.get(
      `/api/contacts?${where({ col: 'email', expr: 'like', val: 'ann%' }, { col: 'firstname', expr: 'eq', val: 'annie' })}`,
    );
    const either = await s.get(
      '/api/contacts?where[0][expr]=orX&where[0][val][0][col]=id&where[0][val][0][expr]=eq&where[0][val][0][val]=2' +
        '&where[0][val][1][col]=crm_id&where[0][val][1][expr]=eq&where[0][val][1][val]=AB-2',
    );

    expect(idsOf(both)).toEqual([2]);
    expect(idsOf(either)).toEqual([2, 6]);
  });

  it('adds no clause for an expression it does not know, and drops `internal` statements', async () => {
    const s = await lookAlikes();

    const unknown = await s.get(
      `/api/contacts?${where({ col: 'email', expr: 'equals', val: 'ann@x.com' })}`,
    );
    const internal = await s.get(
      `/api/contacts?${where({ col: 'email', expr: 'eq', val: 'ann@x.com', internal: '1' })}`,
    );

    expect(idsOf(unknown)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(idsOf(internal)).toEqual([1, 2, 3, 4, 5, 6]);
  });

  it('answers the generic 500 for a missing expr or col and for a column the table lacks', async () => {
    const s = await lookAlikes();

    const answers = await Promise.all(
      [
        where({ col: 'email', val: 'ann@x.com' }),
        where({ expr: 'eq', val: 'ann@x.com' }),
        where({ col: 'no_such_field', expr: 'eq', val: 'x' }),
        where({ col: 'c.email', expr: 'eq', val: 'x' }),
        'where[0][col]=email&where[0][expr]=eq&where[0][val][]=x',
      ].map((query) => s.get(`/api/contacts?${query}`)),
    );

    for (const answer of answers) {
      expect(answer.status).toBe(500);
      expect(answer.text).toBe(genericError(500));
    }
  });

  it('knows the core columns and every field some contact was written with', async () => {
    const s = await lookAlikes();

    const byId = await s.get(`/api/contacts?${where({ col: 'id', expr: 'in', val: '2,4' })}`);
    const unsetField = await s.get(`/api/contacts?${where({ col: 'twitter', expr: 'isNull' })}`);
    const custom = await s.get(
      `/api/contacts?${where({ col: 'CRM_ID', expr: 'eq', val: 'ab-1' })}`,
    );

    expect(idsOf(byId)).toEqual([2, 4]);
    expect(idsOf(unsetField)).toHaveLength(6);
    expect(idsOf(custom)).toEqual([4]);
  });
});

describe('GET /api/contacts with search', () => {
  const search = async (s: Session, text: string) =>
    idsOf(await s.get(`/api/contacts?search=${encodeURIComponent(text)}`));

  it('matches `email:` as a prefix, `email:+` strictly, both case-insensitively', async () => {
    const s = await lookAlikes();

    expect(await search(s, 'email:ANN@x.com')).toEqual([1, 2]);
    expect(await search(s, 'email:+ANN@x.com')).toEqual([1]);
    // A literal `+` in a query string is a space: the value is then not strict.
    expect(idsOf(await s.get('/api/contacts?search=email:+ann@x.com'))).toEqual([1, 2]);
  });

  it('takes `_` as a wildcard even in a strict value, and `!` as NOT LIKE', async () => {
    const s = await lookAlikes();

    expect(await search(s, 'email:+john_doe@x.com')).toEqual([3, 4]);
    expect(await search(s, 'email:!ann')).toEqual([3, 4, 5, 6]);
  });

  it('joins terms with the second one’s `or`, and ANDs by default', async () => {
    const s = await lookAlikes();

    expect(await search(s, 'email:+ann@x.com or email:+bob@y.com')).toEqual([1, 6]);
    expect(await search(s, 'email:ann name:annie')).toEqual([2]);
    expect(await search(s, 'email:(+ann@x.com or +bob@y.com)')).toEqual([1, 6]);
  });

  it('has `ids:`, field commands as prefixes, and a catch-all term over the usual fields', async () => {
    const s = await lookAlikes();

    expect(await search(s, 'ids:1,3,99')).toEqual([1, 3]);
    expect(await search(s, 'crm_id:ab')).toEqual([4, 6]);
    expect(await search(s, "o'h")).toEqual([5]);
    // Not a command: `nosuch:ann` is one strict word, which no field holds.
    expect(await search(s, 'nosuch:ann')).toEqual([]);
  });

  it('ANDs search with where', async () => {
    const s = await lookAlikes();

    const answer = await s.get(
      `/api/contacts?search=email:ann&${where({ col: 'firstname', expr: 'eq', val: 'ann' })}`,
    );

    expect(idsOf(answer)).toEqual([1]);
  });
});

describe('GET /api/contacts: pages and shapes', () => {
  it('pages 30 by default, without a maximum, and `limit=0` lists all from the start', async () => {
    const s = await session();
    for (let i = 1; i <= 35; i++) s.sim.seed('contacts', { email: `c${i}@x.com` });

    const first = await s.get('/api/contacts');
    const large = await s.get('/api/contacts?limit=500');
    const page = await s.get('/api/contacts?start=30&limit=10');
    const all = await s.get('/api/contacts?limit=0&start=30');

    expect(first.json().total).toBe('35');
    expect(idsOf(first)).toHaveLength(30);
    expect(idsOf(large)).toHaveLength(35);
    expect(idsOf(page)).toEqual([31, 32, 33, 34, 35]);
    expect(idsOf(all)).toHaveLength(35);
  });

  it('answers an empty lookup with {} and a string total', async () => {
    const s = await lookAlikes();

    const none = await s.get(
      `/api/contacts?${where({ col: 'email', expr: 'in', val: 'zed@x.com' })}`,
    );

    expect(none.text).toBe('{"total":"0","contacts":{}}');
  });

  it('shows every field under fields.all, the id as a string, as Mautic 5.1.1 does', async () => {
    const s = await lookAlikes();

    const contact = (await s.get('/api/contacts/3')).json().contact as Record<string, unknown> & {
      fields: Record<'all' | 'core' | 'social' | 'personal', Record<string, unknown>>;
    };
    const { all, core, social, personal } = contact.fields;

    expect(Object.keys(contact)).toEqual([
      'isPublished',
      'dateAdded',
      'dateModified',
      'createdBy',
      'createdByUser',
      'modifiedBy',
      'modifiedByUser',
      'id',
      'points',
      'color',
      'fields',
      'lastActive',
      'owner',
      'ipAddresses',
      'tags',
      'utmtags',
      'stage',
      'dateIdentified',
      'preferredProfileImage',
      'doNotContact',
      'frequencyRules',
    ]);
    expect(all).toMatchObject({ id: '3', email: 'john_doe@x.com', firstname: null, crm_id: 'a,b' });
    expect(Object.keys(all)).toHaveLength(1 + 28 + 1);
    expect(core).toMatchObject({
      // A read contact is loaded from the database: ids as strings (contacts_batch_edit.json).
      email: { id: '6', group: 'core', alias: 'email', type: 'email', value: 'john_doe@x.com' },
      crm_id: { group: 'core', alias: 'crm_id', type: 'text', value: 'a,b' },
    });
    expect(Object.keys(social)).toEqual([
      'facebook',
      'foursquare',
      'instagram',
      'linkedin',
      'skype',
      'twitter',
    ]);
    expect(personal).toEqual([]);
  });

  it('drops the detail properties with minimal=1', async () => {
    const s = await lookAlikes();

    const minimal = await s.get('/api/contacts?minimal=1&limit=1');
    const full = await s.get('/api/contacts?minimal=0&limit=1');

    const keys = (answer: typeof minimal) =>
      Object.keys((answer.json().contacts as Record<string, object>)['1'] ?? {});
    expect(keys(minimal)).toEqual([
      'isPublished',
      'dateAdded',
      'dateModified',
      'createdBy',
      'createdByUser',
      'modifiedBy',
      'modifiedByUser',
      'id',
      'points',
      'color',
      'fields',
    ]);
    expect(keys(full)).toContain('doNotContact');
  });

  it('answers a query parameter given as an array with a generic 400', async () => {
    const s = await lookAlikes();

    const answer = await s.get('/api/contacts?search[]=ann');

    expect(answer.status).toBe(400);
    expect(answer.text).toBe(genericError(400));
  });
});

describe('the request-line limit', () => {
  it('answers 414 with an HTML page above 8,190 bytes, on any route', async () => {
    const s = await session();
    s.sim.seed('contacts', { email: 'ann@x.com' });
    const base = `/api/contacts?${where({ col: 'email', expr: 'in', val: 'ann@x.com,' })}`;
    // "GET " + target + " HTTP/1.1": 4 + length + 9 bytes.
    const padded = (bytes: number) => base + 'b'.repeat(bytes - 13 - base.length);

    const longest = await s.get(padded(8190));
    const tooLong = await s.get(padded(8191));
    const tooLongPost = await s.post(`/api/segments/1/contacts/add?x=${'y'.repeat(9000)}`, {
      ids: [1],
    });

    expect(longest.status).toBe(200);
    expect(idsOf(longest)).toEqual([1]);
    expect(tooLong.status).toBe(414);
    expect(tooLong.headers.get('content-type')).toBe('text/html; charset=iso-8859-1');
    expect(tooLong.text).toContain('<title>414 Request-URI Too Long</title>');
    expect(tooLongPost.status).toBe(414);
    expect(s.sim.requests.map((entry) => entry.status)).toEqual([200, 414, 414]);
  });
});

describe('errors on the lookup follow returnError', () => {
  it('answers an unknown contact id with 404', async () => {
    const s = await session();

    const answer = await s.get('/api/contacts/9');

    expect(answer.text).toBe(errorBody(404, 'Item was not found.'));
  });
});
