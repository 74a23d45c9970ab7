import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  API_KEY,
  contact,
  httpApiEvent,
  ingestHandler,
  NOW_SECONDS,
  OTHER_SECRET,
  recordingQueue,
  signedHeaders,
  WEBHOOK_SECRET,
} from '../support/ingest.ts';

const one = JSON.stringify(contact());
const signed = (body: string, options: Parameters<typeof signedHeaders>[1] = {}) =>
  signedHeaders(body, options);
const without = (headers: Record<string, string>, name: string) => {
  const { [name]: _removed, ...rest } = headers;
  return rest;
};
const nested = (depth: number) => {
  let data: Record<string, unknown> = { email: 'deep@example.com' };
  let cursor = data;
  for (let i = 0; i < depth; i++) {
    const next: Record<string, unknown> = {};
    cursor.a = next;
    cursor = next;
  }
  data = { ...data };
  return JSON.stringify({ entity: 'contacts', action: 'create', data });
};
const goodSignature = signed(one)['webhook-signature'] ?? '';

type Case = [name: string, event: ReturnType<typeof httpApiEvent>, status: number, code: string];

const cases: Case[] = [
  // Authentication: 401, no detail.
  [
    'no authentication at all',
    httpApiEvent({ body: one, headers: { 'content-type': 'application/json' } }),
    401,
    'unauthorized',
  ],
  [
    'webhook-id missing',
    httpApiEvent({ body: one, headers: without(signed(one), 'webhook-id') }),
    401,
    'unauthorized',
  ],
  [
    'webhook-timestamp missing',
    httpApiEvent({ body: one, headers: without(signed(one), 'webhook-timestamp') }),
    401,
    'unauthorized',
  ],
  [
    'webhook-signature missing',
    httpApiEvent({ body: one, headers: without(signed(one), 'webhook-signature') }),
    401,
    'unauthorized',
  ],
  [
    'webhook-signature empty',
    httpApiEvent({ body: one, headers: { ...signed(one), 'webhook-signature': '' } }),
    401,
    'unauthorized',
  ],
  [
    'webhook-signature duplicated (joined with a comma)',
    httpApiEvent({
      body: one,
      headers: { ...signed(one), 'webhook-signature': `${goodSignature},${goodSignature}` },
    }),
    401,
    'unauthorized',
  ],
  [
    'webhook-id duplicated (joined with a comma)',
    httpApiEvent({ body: one, headers: { ...signed(one), 'webhook-id': 'msg_a,msg_b' } }),
    401,
    'unauthorized',
  ],
  [
    'webhook-timestamp duplicated (joined with a comma)',
    httpApiEvent({
      body: one,
      headers: { ...signed(one), 'webhook-timestamp': `${NOW_SECONDS},${NOW_SECONDS}` },
    }),
    401,
    'unauthorized',
  ],
  [
    'a bare "v1,"',
    httpApiEvent({ body: one, headers: { ...signed(one), 'webhook-signature': 'v1,' } }),
    401,
    'unauthorized',
  ],
  [
    'only an unknown version carrying the right bytes',
    httpApiEvent({
      body: one,
      headers: { ...signed(one), 'webhook-signature': goodSignature.replace('v1,', 'v2,') },
    }),
    401,
    'unauthorized',
  ],
  [
    'a non-base64 signature',
    httpApiEvent({
      body: one,
      headers: { ...signed(one), 'webhook-signature': 'v1,not*base64*at*all' },
    }),
    401,
    'unauthorized',
  ],
  [
    'a signature of the wrong length',
    httpApiEvent({
      body: one,
      headers: { ...signed(one), 'webhook-signature': `v1,${randomBytes(16).toString('base64')}` },
    }),
    401,
    'unauthorized',
  ],
  [
    'a multibyte signature of the right character length',
    httpApiEvent({
      body: one,
      headers: { ...signed(one), 'webhook-signature': `v1,${'é'.repeat(44)}` },
    }),
    401,
    'unauthorized',
  ],
  [
    'a signature by an unknown secret',
    httpApiEvent({ body: one, headers: signed(one, { secret: OTHER_SECRET }) }),
    401,
    'unauthorized',
  ],
  [
    'a timestamp 301 s old',
    httpApiEvent({ body: one, headers: signed(one, { timestamp: NOW_SECONDS - 301 }) }),
    401,
    'unauthorized',
  ],
  [
    'a timestamp 301 s in the future',
    httpApiEvent({ body: one, headers: signed(one, { timestamp: NOW_SECONDS + 301 }) }),
    401,
    'unauthorized',
  ],
  [
    'a timestamp in milliseconds',
    httpApiEvent({ body: one, headers: signed(one, { timestamp: NOW_SECONDS * 1000 }) }),
    401,
    'unauthorized',
  ],
  [
    'a float timestamp',
    httpApiEvent({ body: one, headers: signed(one, { timestamp: `${NOW_SECONDS}.5` }) }),
    401,
    'unauthorized',
  ],
  [
    'a negative timestamp',
    httpApiEvent({ body: one, headers: signed(one, { timestamp: `-${NOW_SECONDS}` }) }),
    401,
    'unauthorized',
  ],
  [
    'an exponent timestamp',
    httpApiEvent({ body: one, headers: { ...signed(one), 'webhook-timestamp': '1.7953056e9' } }),
    401,
    'unauthorized',
  ],
  [
    'an empty timestamp',
    httpApiEvent({ body: one, headers: { ...signed(one), 'webhook-timestamp': '' } }),
    401,
    'unauthorized',
  ],
  [
    'a webhook-id holding a dot',
    httpApiEvent({ body: one, headers: signed(one, { id: 'msg.1' }) }),
    401,
    'unauthorized',
  ],
  [
    'a body changed after signing',
    httpApiEvent({ body: one.replace('user0', 'user1'), headers: signed(one) }),
    401,
    'unauthorized',
  ],
  [
    'a wrong API key',
    httpApiEvent({
      body: one,
      headers: { 'content-type': 'application/json', authorization: `Bearer ${API_KEY}x` },
    }),
    401,
    'unauthorized',
  ],
  [
    'Basic instead of Bearer',
    httpApiEvent({
      body: one,
      headers: { 'content-type': 'application/json', authorization: `Basic ${API_KEY}` },
    }),
    401,
    'unauthorized',
  ],
  [
    'Bearer with no key',
    httpApiEvent({
      body: one,
      headers: { 'content-type': 'application/json', authorization: 'Bearer ' },
    }),
    401,
    'unauthorized',
  ],
  [
    'a base64 body with bytes other than those signed',
    httpApiEvent({
      body: Buffer.from(`${one} `).toString('base64'),
      isBase64Encoded: true,
      headers: signed(one),
    }),
    401,
    'unauthorized',
  ],
  // Content type: 415, before authentication.
  [
    'no content type',
    httpApiEvent({ body: one, headers: without(signed(one), 'content-type') }),
    415,
    'unsupported_media_type',
  ],
  [
    'text/plain',
    httpApiEvent({ body: one, headers: { ...signed(one), 'content-type': 'text/plain' } }),
    415,
    'unsupported_media_type',
  ],
  [
    'a charset other than UTF-8',
    httpApiEvent({
      body: one,
      headers: { ...signed(one), 'content-type': 'application/json; charset=latin1' },
    }),
    415,
    'unsupported_media_type',
  ],
  [
    'application/jsonx',
    httpApiEvent({ body: one, headers: { ...signed(one), 'content-type': 'application/jsonx' } }),
    415,
    'unsupported_media_type',
  ],
  // Size: 413, before everything else.
  [
    'a body one byte over the cap, unsigned',
    httpApiEvent({ body: 'x'.repeat(1024 * 1024 + 1), headers: {} }),
    413,
    'payload_too_large',
  ],
  [
    'a base64 body over the cap, unsigned',
    httpApiEvent({
      body: Buffer.alloc(1024 * 1024 + 1, 32).toString('base64'),
      isBase64Encoded: true,
      headers: {},
    }),
    413,
    'payload_too_large',
  ],
  [
    'a 6 MB body (the Lambda maximum)',
    httpApiEvent({ body: 'x'.repeat(6 * 1024 * 1024), headers: signed('x') }),
    413,
    'payload_too_large',
  ],
  // JSON: 400, after authentication.
  ['an empty body', httpApiEvent({ body: '', headers: signed('') }), 400, 'invalid_json'],
  [
    'invalid UTF-8, correctly signed',
    httpApiEvent({
      body: new Uint8Array([0x7b, 0xff, 0x7d]),
      headers: signedHeaders(new Uint8Array([0x7b, 0xff, 0x7d])),
    }),
    400,
    'invalid_json',
  ],
  [
    'truncated JSON',
    httpApiEvent({ body: '{"entity":', headers: signed('{"entity":') }),
    400,
    'invalid_json',
  ],
  // Schema: 422, nothing queued.
  ['a JSON scalar', httpApiEvent({ body: '42', headers: signed('42') }), 422, 'invalid_event'],
  ['an empty array', httpApiEvent({ body: '[]', headers: signed('[]') }), 422, 'invalid_event'],
  [
    '501 events',
    httpApiEvent({
      body: JSON.stringify(Array(501).fill(contact())),
      headers: signed(JSON.stringify(Array(501).fill(contact()))),
    }),
    422,
    'invalid_event',
  ],
  [
    'an array holding a string',
    httpApiEvent({ body: `[${one},"x"]`, headers: signed(`[${one},"x"]`) }),
    422,
    'invalid_event',
  ],
  [
    '100,000 levels of nested arrays',
    httpApiEvent({
      body: `${'['.repeat(100_000)}${']'.repeat(100_000)}`,
      headers: signed(`${'['.repeat(100_000)}${']'.repeat(100_000)}`),
    }),
    422,
    'invalid_event',
  ],
  [
    'data nested 40 levels deep',
    httpApiEvent({ body: nested(40), headers: signed(nested(40)) }),
    422,
    'invalid_event',
  ],
  [
    'a __proto__ key in the data',
    httpApiEvent({
      body: '{"entity":"contacts","action":"create","data":{"email":"p@example.com","__proto__":{"admin":true}}}',
      headers: signed(
        '{"entity":"contacts","action":"create","data":{"email":"p@example.com","__proto__":{"admin":true}}}',
      ),
    }),
    422,
    'invalid_event',
  ],
];

/** A wrong type for every field of an event. */
const wrongTypes: Array<[field: string, event: Record<string, unknown>]> = [
  ['entity', { entity: 7, action: 'create', data: { email: 'a@example.com' } }],
  ['action', { entity: 'contacts', action: ['create'], data: { email: 'a@example.com' } }],
  ['data', { entity: 'contacts', action: 'create', data: 'email=a@example.com' }],
  ['id', { entity: 'contacts', action: 'delete', id: '12' }],
  ['eventId', { entity: 'contacts', action: 'delete', id: 12, eventId: 12 }],
  ['data/email', { entity: 'contacts', action: 'create', data: { email: true } }],
];
for (const [field, event] of wrongTypes) {
  const body = JSON.stringify([contact(), event]);
  cases.push([
    `a wrong type for ${field}`,
    httpApiEvent({ body, headers: signed(body) }),
    422,
    'invalid_event',
  ]);
}
const unknownKey = JSON.stringify({ ...contact(), priority: 'high' });
cases.push([
  'an unknown top-level key',
  httpApiEvent({ body: unknownKey, headers: signed(unknownKey) }),
  422,
  'invalid_event',
]);

describe('ingest against hostile requests', () => {
  it('has at least 40 named cases', () => {
    expect(cases.length).toBeGreaterThanOrEqual(40);
  });

  it.each(cases)(
    'answers %s with its status and queues nothing',
    async (_name, event, status, code) => {
      const queue = recordingQueue();

      const response = await ingestHandler(queue)(event);

      expect(response.status).toBe(status);
      expect(response.body.error?.code).toBe(code);
      expect(queue.messages).toEqual([]);
      const text = JSON.stringify(response.body);
      for (const secret of [WEBHOOK_SECRET.slice(6), API_KEY]) expect(text).not.toContain(secret);
      if (status === 401)
        expect(response.body.error).toEqual({
          code: 'unauthorized',
          message: 'Authentication failed.',
        });
    },
  );

  it('lists every bad field with its event index and a JSON pointer', async () => {
    const body = JSON.stringify([
      contact(1),
      { entity: 'contacts', action: 'edit', data: { email: 'not-an-email' } },
      { entity: 'Bad', action: 'delete', id: 1, 'a/b': 1 },
    ]);

    const response = await ingestHandler(recordingQueue())(
      httpApiEvent({ body, headers: signed(body) }),
    );

    expect(response.status).toBe(422);
    expect(response.body.error?.details).toEqual([
      // A contact is named by id or by match (contract §5): neither is refused at /match.
      {
        index: 1,
        path: '/match',
        message: 'give exactly one of id and match to name the contact of edit',
      },
      { index: 1, path: '/data/email', message: 'must be a valid email address' },
      {
        index: 2,
        path: '/entity',
        message: 'must be a Mautic API path name such as "contacts" (/^[a-z][a-zA-Z]{1,63}$/)',
      },
      { index: 2, path: '/a~1b', message: 'is not a known field' },
    ]);
  });

  it('describes a problem of the request as a whole with one detail at path "" and no index', async () => {
    const response = await ingestHandler(recordingQueue())(
      httpApiEvent({ body: '"x"', headers: signed('"x"') }),
    );

    expect(response.body.error?.details).toEqual([
      {
        path: '',
        message: 'The body must be an event object or an array of 1 to 500 event objects.',
      },
    ]);
  });
});
