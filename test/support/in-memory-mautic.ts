import type { IncomingHttpHeaders } from 'node:http';
import type { FetchLike } from '../../functions/core/ports.ts';
import { parsePhpQuery } from '../../mautic-simulator/php.ts';
import { createEntityState, type EntityState, routeEntities } from '../../mautic-simulator/rest.ts';
import { decodeBody } from '../../mautic-simulator/symfony.ts';

/**
 * The simulator's REST half (entity store, batch controllers, write rules) behind a `fetch`,
 * with no socket and no OAuth2: for properties that run thousands of batches through the real
 * Mautic client. Tests of the HTTP behaviour itself use the real simulator.
 */
export function inMemoryMautic(
  now: () => number,
  options: {
    /**
     * Called per request: true answers a proxy's 503 without Mautic doing anything, saying to
     * come back in a minute (a bare 503 may follow saves: the relay would not repeat a create).
     */
    fail?: () => boolean;
  } = {},
): { state: EntityState; fetch: FetchLike } {
  const state = createEntityState(now, 200);
  const fetch: FetchLike = async (url, init) => {
    if (options.fail?.())
      return new Response('<html>503 Service Unavailable</html>', {
        status: 503,
        headers: { 'retry-after': '60' },
      });
    const { pathname, search } = new URL(url);
    const method = (init.method ?? 'GET').toUpperCase();
    const headers: IncomingHttpHeaders = {};
    new Headers(init.headers).forEach((value, name) => {
      headers[name] = value;
    });
    const raw = Buffer.from(typeof init.body === 'string' ? init.body : '');
    const reply = routeEntities(state, {
      method,
      path: pathname,
      query: parsePhpQuery(search.slice(1)),
      headers,
      body: decodeBody(method, pathname, headers, raw),
    });
    return new Response(reply.body, { status: reply.status, headers: reply.headers });
  };
  return { state, fetch };
}
