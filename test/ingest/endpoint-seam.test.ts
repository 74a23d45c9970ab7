import { describe, expect, it } from 'vitest';
import { IngestRefusal } from '../../functions/core/errors.ts';
import type { RelayEvent } from '../../functions/core/events.ts';
import { acceptWith } from '../../functions/core/ingest/ingest.ts';
import {
  type IngestEndpoint,
  type IngestRequest,
  parseBody,
  validateEvents,
} from '../../functions/core/ingest/ingest-steps.ts';
import type { RequestLedger } from '../../functions/core/ports.ts';
import type { OutgoingMessage } from '../../functions/core/queue-ports.ts';
import { INGEST_LIMITS, NOW } from '../support/ingest.ts';

// The ingest's seam (docs/architecture.md): a second kind of endpoint is the same pipeline with
// its own authenticate and events steps; size, content type, envelopes, message sizes and the
// one enqueue per request identity stay the pipeline's.

/** A shop that posts its own payload, `{ "customer": { "email": … } }`, with a shared token. */
const shopEndpoint: IngestEndpoint = {
  authenticate: async (request) => {
    if (request.headers['x-shop-token'] !== 'right')
      throw new IngestRefusal(401, 'unauthorized', 'Authentication failed.');
    const id = request.headers['x-shop-delivery'];
    return {
      name: 'source:shop',
      identity: () => (id ? { key: `shop:${id}`, bodyHash: 'h' } : undefined),
      eventIdBase: id,
    };
  },
  events: (request) => {
    const body = parseBody(request.body) as { customer?: { email?: unknown } };
    const event: RelayEvent = {
      entity: 'contacts',
      action: 'create',
      data: { email: body.customer?.email },
    };
    return validateEvents(event, INGEST_LIMITS);
  },
};

function shopRequest(body: string, headers: Record<string, string> = {}): IngestRequest {
  return {
    body: new TextEncoder().encode(body),
    headers: {
      'content-type': 'application/json',
      'x-shop-token': 'right',
      'x-shop-delivery': 'd-1',
      ...headers,
    },
  };
}

function deps(ledger?: RequestLedger) {
  const queued: OutgoingMessage[][] = [];
  return {
    queued,
    deps: {
      credentials: async () => {
        throw new Error('the shop endpoint never reads the events credentials');
      },
      queue: {
        enqueue: async (messages: ReadonlyArray<OutgoingMessage>) => {
          queued.push([...messages]);
        },
      },
      clock: { now: () => NOW },
      newId: () => 'new-id',
      limits: INGEST_LIMITS,
      ...(ledger ? { ledger } : {}),
    },
  };
}

describe('acceptWith another endpoint', () => {
  it('queues what its own steps made of the request, through the shared pipeline', async () => {
    const { queued, deps: ingest } = deps();

    const response = await acceptWith(
      shopEndpoint,
      shopRequest('{"customer":{"email":"ann@example.com"}}'),
      ingest,
    );

    expect(response).toEqual({ status: 202, body: { accepted: 1, eventIds: ['d-1:0'] } });
    expect(JSON.parse(queued[0]?.[0]?.body ?? '{}')).toMatchObject({
      sender: 'source:shop',
      entity: 'contacts',
      action: 'create',
      data: { email: 'ann@example.com' },
    });
  });

  it('keeps the pipeline’s checks and their order around the swapped steps', async () => {
    const { queued, deps: ingest } = deps();
    const big = 'x'.repeat(INGEST_LIMITS.maxBodyBytes + 1);

    // Size first: not even a wrong token is looked at.
    expect(
      (await acceptWith(shopEndpoint, shopRequest(big, { 'x-shop-token': 'no' }), ingest)).status,
    ).toBe(413);
    expect(
      (await acceptWith(shopEndpoint, shopRequest('{}', { 'content-type': 'text/plain' }), ingest))
        .status,
    ).toBe(415);
    expect(
      (await acceptWith(shopEndpoint, shopRequest('{}', { 'x-shop-token': 'no' }), ingest)).status,
    ).toBe(401);
    expect((await acceptWith(shopEndpoint, shopRequest('{'), ingest)).status).toBe(400);
    const invalid = await acceptWith(shopEndpoint, shopRequest('{"customer":{}}'), ingest);
    expect(invalid).toMatchObject({
      status: 422,
      body: { error: { code: 'invalid_event', details: [{ index: 0, path: '/data/email' }] } },
    });
    expect(queued).toEqual([]);
  });

  it('de-duplicates by the identity its authenticate step gives', async () => {
    const seen = new Map<string, { status: number; body: string }>();
    const ledger: RequestLedger = {
      once: async (identity, work) => {
        const first = seen.get(identity.key);
        if (first !== undefined) return { kind: 'replayed', ...first };
        const result = await work(undefined);
        if (result.remember) seen.set(identity.key, { status: result.status, body: result.body });
        return { kind: 'accepted', result };
      },
    };
    const { queued, deps: ingest } = deps(ledger);
    const request = shopRequest('{"customer":{"email":"ann@example.com"}}');

    const first = await acceptWith(shopEndpoint, request, ingest);
    const again = await acceptWith(shopEndpoint, request, ingest);

    expect(again).toEqual(first);
    expect(queued).toHaveLength(1);
  });
});
