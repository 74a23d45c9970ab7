import { afterEach, describe, expect, it } from 'vitest';
import { MauticApiClient } from '../../../functions/core/mautic/mautic-api.ts';
import type { FetchLike } from '../../../functions/core/ports.ts';
import { type MauticSimulator, startMauticSimulator } from '../../../mautic-simulator/server.ts';

let sim: MauticSimulator | undefined;
afterEach(async () => {
  await sim?.close();
  sim = undefined;
});

describe("Mautic's version (its Mautic-Version header), from API answers only", () => {
  it.each([
    ['5.1', '5.1.1'],
    ['7', '7.0.0'],
  ])('is learned from the first authenticated API answer of Mautic %s', async (line, version) => {
    sim = await startMauticSimulator({ mauticVersion: line });
    const versions: string[] = [];
    const api = new MauticApiClient({
      baseUrl: sim.url,
      fetch,
      onVersion: (named) => versions.push(named),
    });
    const call = { accessToken: sim.issueToken().accessToken };

    await expect(
      api.create('contacts', [{ email: 'x' }], { accessToken: 'refused' }),
    ).rejects.toThrow();
    expect(versions).toEqual([]);
    await api.create('contacts', [{ email: 'ann@example.com' }], call);

    expect(versions).toEqual([version]);
  });

  it('is not taken from a 401, even where a front in front of Mautic adds the header', async () => {
    const versions: string[] = [];
    const answers = [
      new Response('{"errors":[{"code":401}]}', {
        status: 401,
        headers: { 'mautic-version': '5.1.1' },
      }),
      new Response('{"contacts":{},"total":"0"}', {
        status: 200,
        headers: { 'content-type': 'application/json', 'mautic-version': '7.0.0' },
      }),
    ];
    const fetchLike: FetchLike = async () => answers.shift() as Response;
    const api = new MauticApiClient({
      baseUrl: 'https://mautic.example.com',
      fetch: fetchLike,
      onVersion: (named) => versions.push(named),
    });

    await expect(api.list('contacts', {}, { accessToken: 'a' })).rejects.toThrow();
    await api.list('contacts', {}, { accessToken: 'a' });

    expect(versions).toEqual(['7.0.0']);
  });
});
