import { describe, expect, it } from 'vitest';
import { createMauticHttp } from '../../../functions/core/mautic/mautic-http.ts';
import type { FetchLike } from '../../../functions/core/ports.ts';

describe("Mautic's version (its Mautic-Version header)", () => {
  it('is told from every answer that carries it, and not from one that does not', async () => {
    const versions: string[] = [];
    const answers = [
      new Response('{}', { status: 200, headers: { 'mautic-version': '5.1.1' } }),
      new Response('{}', { status: 401, headers: { 'mautic-version': '5.1.1' } }),
      new Response('{}', { status: 200 }),
    ];
    const fetch: FetchLike = async () => answers.shift() as Response;
    const http = createMauticHttp({
      baseUrl: 'https://mautic.example.com',
      fetch,
      onVersion: (version) => versions.push(version),
    });

    for (let i = 0; i < 3; i++)
      await http.send({ method: 'GET', path: '/api/contacts', headers: {} });

    expect(versions).toEqual(['5.1.1', '5.1.1']);
  });
});
