import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  API_KEY,
  httpApiEvent,
  ingestHandler,
  NOW_SECONDS,
  OTHER_SECRET,
  recordingQueue,
  signedHeaders,
} from '../support/ingest.ts';

const eventArbitrary = fc.oneof(
  fc.record({
    entity: fc.constantFrom('contacts', 'companies', 'segments', 'Contacts', ''),
    action: fc.constantFrom('create', 'edit', 'delete', 'upsert'),
    data: fc.option(
      fc.dictionary(
        fc.constantFrom('email', 'firstname', '__proto__', 'n'),
        fc.oneof(fc.jsonValue({ maxDepth: 2 }), fc.string({ unit: 'binary', maxLength: 20 })),
      ),
      { nil: undefined },
    ),
    id: fc.option(fc.oneof(fc.integer({ min: -2, max: 1000 }), fc.string()), { nil: undefined }),
  }),
  fc.record({
    entity: fc.constant('contacts'),
    action: fc.constant('create'),
    data: fc.record({ email: fc.emailAddress() }),
  }),
  fc.jsonValue({ maxDepth: 3 }),
);

const bodyArbitrary = fc.oneof(
  fc.array(eventArbitrary, { minLength: 0, maxLength: 4 }).map((events) => JSON.stringify(events)),
  eventArbitrary.map((event) => JSON.stringify(event)),
  fc.string({ unit: 'binary', maxLength: 200 }),
  fc.uint8Array({ maxLength: 200 }),
  fc.constant(''),
);

const authArbitrary = fc.constantFrom(
  'signed',
  'signed-by-other',
  'stale',
  'api-key',
  'wrong-api-key',
  'garbage',
  'none',
);

const contentTypeArbitrary = fc.oneof(
  fc.constantFrom(
    'application/json',
    'application/json; charset=utf-8',
    'APPLICATION/JSON',
    'text/plain',
  ),
  fc.string({ maxLength: 30 }),
  fc.constant(undefined),
);

function headersFor(
  auth: string,
  body: string | Uint8Array,
  contentType: string | undefined,
  garbage: Record<string, string>,
) {
  const headers: Record<string, string> = {};
  if (auth === 'signed') Object.assign(headers, signedHeaders(body));
  if (auth === 'signed-by-other')
    Object.assign(headers, signedHeaders(body, { secret: OTHER_SECRET }));
  if (auth === 'stale')
    Object.assign(headers, signedHeaders(body, { timestamp: NOW_SECONDS - 3600 }));
  if (auth === 'api-key') headers.authorization = `Bearer ${API_KEY}`;
  if (auth === 'wrong-api-key') headers.authorization = `Bearer ${API_KEY.slice(1)}`;
  if (auth === 'garbage') Object.assign(headers, garbage);
  if (contentType === undefined) delete headers['content-type'];
  else headers['content-type'] = contentType;
  return headers;
}

describe('ingest under fuzzing', () => {
  it('answers 10,000 generated requests with an expected status, never a 5xx, and queues only authenticated events', async () => {
    const queue = recordingQueue();
    const handle = ingestHandler(queue);
    const statuses = new Map<number, number>();

    await fc.assert(
      fc.asyncProperty(
        bodyArbitrary,
        authArbitrary,
        contentTypeArbitrary,
        fc.boolean(),
        fc.dictionary(
          fc.constantFrom('webhook-id', 'webhook-timestamp', 'webhook-signature', 'authorization'),
          fc.string({ maxLength: 60 }),
        ),
        async (body, auth, contentType, base64, garbage) => {
          queue.messages.length = 0;
          const headers = headersFor(auth, body, contentType, garbage);
          const event =
            base64 || body instanceof Uint8Array
              ? httpApiEvent({
                  body: typeof body === 'string' ? new TextEncoder().encode(body) : body,
                  headers,
                })
              : httpApiEvent({ body, headers });

          const response = await handle(event);

          statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
          expect([202, 400, 401, 413, 415, 422]).toContain(response.status);
          const authenticated = auth === 'signed' || auth === 'api-key';
          if (response.status === 202) expect(authenticated).toBe(true);
          if (queue.messages.length > 0) {
            expect(response.status).toBe(202);
            expect(queue.messages).toHaveLength(response.body.accepted ?? -1);
          }
          if (!authenticated && response.status !== 413 && response.status !== 415)
            expect(response.status).toBe(401);
        },
      ),
      { numRuns: 10_000 },
    );

    // The generators reach every answer, so the property was tested on each path.
    expect([...statuses.keys()].sort()).toEqual([202, 400, 401, 415, 422]);
  });
});
