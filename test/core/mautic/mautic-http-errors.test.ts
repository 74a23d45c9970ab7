/**
 * A Mautic call that gets no answer names the host it did not reach, and how (the system error
 * code), in its message: what the batch log and a dead letter's detail show. Never the token
 * (a header) nor the query (which may hold a contact's email).
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { MauticTransientError } from '../../../functions/core/errors.ts';
import { createMauticHttp } from '../../../functions/core/mautic/mautic-http.ts';
import { freePort } from '../../support/net.ts';

const TOKEN = 'access-token-never-in-a-message';

function call(baseUrl: string, timeoutMs = 5_000) {
  return createMauticHttp({ baseUrl, fetch, timeoutMs })
    .send({
      method: 'GET',
      path: '/api/contacts',
      query: 'search=email:ann@example.com',
      headers: { authorization: `Bearer ${TOKEN}` },
    })
    .catch((error: unknown) => error);
}

describe('a Mautic call without an answer', () => {
  it('a refused connection names the host and ECONNREFUSED', async () => {
    const port = await freePort();

    const error = await call(`http://127.0.0.1:${port}/mautic`);

    expect(error).toBeInstanceOf(MauticTransientError);
    expect((error as Error).message).toBe(
      `GET /api/contacts failed (network: 127.0.0.1:${port} ECONNREFUSED)`,
    );
    expect((error as MauticTransientError).possiblyApplied).toBe(false);
    expect((error as Error).message).not.toContain('ann@example.com');
    expect((error as Error).message).not.toContain(TOKEN);
  });

  it('a timeout names the host', async () => {
    // Takes the request and never answers.
    const server = createServer(() => {});
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    try {
      const error = await call(`http://127.0.0.1:${port}`, 200);

      expect((error as Error).message).toBe(
        `GET /api/contacts failed (timeout: 127.0.0.1:${port}, possibly applied)`,
      );
      expect((error as Error).message).not.toContain(TOKEN);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
