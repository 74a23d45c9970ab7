import { afterEach, describe, expect, it } from 'vitest';
import { type MauticSimulator, startMauticSimulator } from '../../mautic-simulator/server.ts';
import { applyTags, applyWrite, isNumericZero } from '../../mautic-simulator/write-rules.ts';

const contact = { style: 'contact' } as const;
const plain = { style: 'plain' } as const;

describe('applyWrite (docs/mautic.md §5.2, Mautic 5.1.1)', () => {
  it('skips blanks on POST and PATCH unless overwriteWithBlank, and drops numeric zeros always', () => {
    const current = { firstname: 'Ann', city: 'Oslo', score: 5, rank: 2 };
    const submitted = { firstname: '', city: null, score: 0, rank: '0.5' };

    for (const mode of ['post', 'patch'] as const) {
      expect(
        applyWrite(current, submitted, { ...contact, mode, overwriteWithBlank: false }),
      ).toEqual(current);
      expect(
        applyWrite(current, submitted, { ...contact, mode, overwriteWithBlank: true }),
      ).toEqual({
        firstname: '',
        city: null,
        score: 5,
        rank: 2,
      });
    }
  });

  it('never lets an empty points overwrite a contact, and writes everything on PUT', () => {
    expect(
      applyWrite(
        { points: 7 },
        { points: '' },
        { ...contact, mode: 'patch', overwriteWithBlank: true },
      ),
    ).toEqual({ points: 7 });
    expect(
      applyWrite(
        { firstname: 'Ann', city: 'Oslo' },
        { city: '', points: 0 },
        { ...contact, mode: 'put', overwriteWithBlank: false },
      ),
    ).toEqual({ city: '', points: 0 });
  });

  it('writes blanks and zeros on every other entity, companies included', () => {
    // CompanyApiController::preSaveEntity calls setCustomFieldValues without the POST/PATCH flag.
    for (const mode of ['post', 'patch'] as const) {
      expect(
        applyWrite(
          { companyname: 'Acme', companycity: 'Oslo', size: 3 },
          { companycity: '', size: 0 },
          { ...plain, mode, overwriteWithBlank: false },
        ),
      ).toEqual({ companyname: 'Acme', companycity: '', size: 0 });
    }
  });

  it("treats a contact's tags as operations on every method, other entities' as a field", () => {
    const current = { tags: ['news'] };

    expect(
      applyWrite(
        current,
        { tags: ['web'] },
        { ...contact, mode: 'post', overwriteWithBlank: false },
      ),
    ).toEqual({
      tags: ['news', 'web'],
    });
    expect(
      applyWrite(
        current,
        { tags: ['-news'] },
        { ...contact, mode: 'put', overwriteWithBlank: false },
      ),
    ).toEqual({
      tags: [],
    });
    expect(
      applyWrite(
        current,
        { tags: ['web'] },
        { ...plain, mode: 'patch', overwriteWithBlank: false },
      ),
    ).toEqual({
      tags: ['web'],
    });
  });

  it('reads tags as Mautic does: trimmed, comma-separated strings, - removes, sorted as a set', () => {
    expect(applyTags(['b', 'x'], ' a , -x,c,, b')).toEqual(['a', 'b', 'c']);
    expect(applyTags(undefined, ['-gone', ' kept '])).toEqual(['kept']);
    expect(applyTags(['a'], [])).toEqual(['a']);
  });

  it('removes only a tag that existed before the item, by its exact name', () => {
    // modifyTags looks the tags up once, before the first operation.
    expect(applyTags([], ['x', '-x'])).toEqual(['x']);
    expect(applyTags([], ['x', '-x'], new Set(['x']))).toEqual([]);
    expect(applyTags(['Newsletter'], ['-newsletter'], new Set(['Newsletter']))).toEqual([
      'Newsletter',
    ]);
    expect(applyTags(['Newsletter'], ['-Newsletter'], new Set(['Newsletter']))).toEqual([]);
  });

  it('knows a numeric zero as PHP does: is_numeric and (int) 0', () => {
    expect([0, -0, 0.9, '0', ' 0 ', '0.5', '-0.2', '0e3', '.5'].every(isNumericZero)).toBe(true);
    expect([1, '1', '1e3', '', null, false, 'zero', '0x0', [0]].some(isNumericZero)).toBe(false);
  });
});

describe('simulator failAfterApply', () => {
  let sim: MauticSimulator | undefined;
  afterEach(async () => {
    await sim?.close();
  });

  it('applies the request, then drops the connection or garbles the answer, for the given count', async () => {
    sim = await startMauticSimulator();
    const { accessToken } = sim.issueToken();
    const post = (name: string) =>
      fetch(`${sim?.url}/api/companies/batch/new`, {
        method: 'POST',
        headers: { authorization: `Bearer ${accessToken}`, 'content-type': 'application/json' },
        body: JSON.stringify([{ companyname: name }]),
      });
    sim.failAfterApply({ method: 'post', path: /companies\/batch\/new$/ }, 'drop');
    sim.failAfterApply({ path: '/api/companies/batch/new' }, 'garble');

    const dropped = await post('A').then(
      () => 'answered',
      () => 'dropped',
    );
    const garbled = await post('B');
    const garbledBody = await garbled.text();
    const normal = await post('C');

    expect(dropped).toBe('dropped');
    expect(garbled.status).toBe(200);
    expect(garbled.headers.get('content-type')).toContain('text/html');
    expect(garbledBody).toMatch(/^<br \/>\n<b>Notice<\/b>: .*\{"companies":\[\{/s);
    expect(normal.status).toBe(201);
    expect(sim.records('companies').map((record) => record.companyname)).toEqual(['A', 'B', 'C']);
    expect(sim.requests.map((request) => request.status)).toEqual([0, 200, 201]);
  });
});
