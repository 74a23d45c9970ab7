/**
 * Contract §6 through the real ingest handler: `POST /sources/{name}` verifies the provider's own
 * signature (made here with the provider's own library), filters, maps, and queues what the
 * mapping yields with every guarantee of §1; a mapping that fails is kept as a dead letter and
 * never bounces the sender.
 */
import { createHash } from 'node:crypto';
import { Logger } from '@aws-lambda-powertools/logger';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { QueueUnavailableError } from '../../functions/core/errors.ts';
import { queuedEventSchema } from '../../functions/core/events.ts';
import type { RequestLedger } from '../../functions/core/ports.ts';
import { compileSources, parseSourcesDocument } from '../../functions/core/sources/sources.ts';
import { buildIngestHandler } from '../../functions/ingest/compose.ts';
import { ENV, loadIngestConfig } from '../../functions/shared/config.ts';
import {
  INGEST_LIMITS,
  ingestHandler,
  NOW,
  NOW_SECONDS,
  recordingQueue,
  WEBHOOK_SECRET,
} from '../support/ingest.ts';
import { sqsClient } from '../support/local-sqs.ts';
import { recorder } from '../support/observe.ts';
import {
  GITHUB_SECRET,
  githubHeaders,
  githubSource,
  recordingDeadLetters,
  STRIPE_SECRET,
  sourceEvent,
  sourcesHandler,
  stripeEvent,
  stripeHeaders,
  stripeSource,
} from '../support/sources.ts';

const STRIPE = 'stripe-customers';

/** The handler with `sources`, its queues and its log. */
function setUp(
  sources: Record<string, unknown> = { [STRIPE]: stripeSource() },
  options: Partial<Parameters<typeof sourcesHandler>[0]> = {},
) {
  const queue = recordingQueue();
  const deadLetters = recordingDeadLetters();
  const log = recorder();
  const handle = sourcesHandler({
    document: { sources },
    queue,
    deadLetters,
    logger: log.logger,
    ...options,
  });
  /** Posts a Stripe webhook, signed now, to the Stripe source. */
  const postStripe = (payload: string, name = STRIPE) =>
    handle(sourceEvent(name, payload, stripeHeaders(payload)));
  const queued = () => queue.messages.map((message) => JSON.parse(message.body));
  return { queue, deadLetters, log, handle, postStripe, queued };
}

describe('a source that maps', () => {
  it('queues the events a Stripe webhook maps to, with ids <name>:<idempotency key>:<index>', async () => {
    const { postStripe, queued, deadLetters } = setUp();

    const created = await postStripe(stripeEvent('evt_1', 'customer.created', 'ann@example.com'));
    const deleted = await postStripe(stripeEvent('evt_2', 'customer.deleted', 'bob@example.com'));

    expect(created).toMatchObject({
      status: 202,
      body: { accepted: 1, eventIds: [`${STRIPE}:evt_1:0`] },
    });
    expect(deleted.body.eventIds).toEqual([`${STRIPE}:evt_2:0`]);
    expect(queued()).toEqual([
      {
        v: 1,
        eventId: `${STRIPE}:evt_1:0`,
        receivedAt: new Date(NOW).toISOString(),
        sender: `source:${STRIPE}`,
        entity: 'contacts',
        action: 'create',
        data: { email: 'ann@example.com', firstname: 'Ann' },
      },
      {
        v: 1,
        eventId: `${STRIPE}:evt_2:0`,
        receivedAt: new Date(NOW).toISOString(),
        sender: `source:${STRIPE}`,
        entity: 'contacts',
        action: 'delete',
        match: { email: 'bob@example.com' },
      },
    ]);
    expect(deadLetters.letters).toEqual([]);
  });

  it('keeps the ids a mapping sets, and numbers the others by their place', async () => {
    const { postStripe } = setUp({
      [STRIPE]: stripeSource({
        map: `[
          { 'entity': 'contacts', 'action': 'create', 'data': { 'email': data.object.email } },
          { 'entity': 'contacts', 'action': 'addPoints', 'match': { 'email': data.object.email },
            'points': 5, 'eventId': 'points-' & id },
          { 'entity': 'companies', 'action': 'create', 'data': { 'companyname': 'Acme' } }
        ]`,
      }),
    });

    const answer = await postStripe(stripeEvent('evt_3', 'customer.created', 'c@example.com'));

    expect(answer.body.eventIds).toEqual([
      `${STRIPE}:evt_3:0`,
      'points-evt_3',
      `${STRIPE}:evt_3:2`,
    ]);
  });

  it('uses the SHA-256 of an idempotency key that would make an event id over 128 characters', async () => {
    const { postStripe } = setUp();
    // 500 events at most: the last index has 3 digits, so a key of 107 characters just fits.
    const fits = `evt_${'f'.repeat(128 - STRIPE.length - 1 - 1 - 3 - 4)}`;
    const tooLong = `${fits}x`;

    const plain = await postStripe(stripeEvent(fits, 'customer.created', 'd@example.com'));
    const hashed = await postStripe(stripeEvent(tooLong, 'customer.created', 'e@example.com'));
    const longest = await postStripe(stripeEvent('k'.repeat(256), 'customer.created', 'f@e.com'));

    expect(plain.body.eventIds).toEqual([`${STRIPE}:${fits}:0`]);
    expect(`${STRIPE}:${fits}:499`).toHaveLength(128);
    const sha256 = (key: string) => createHash('sha256').update(key).digest('base64url');
    expect(hashed.body.eventIds).toEqual([`${STRIPE}:sha256:${sha256(tooLong)}:0`]);
    expect(longest.body.eventIds).toEqual([`${STRIPE}:sha256:${sha256('k'.repeat(256))}:0`]);
    expect(`${STRIPE}:sha256:${sha256(tooLong)}:499`.length).toBeLessThanOrEqual(128);
  });

  it('uses the SHA-256 of an idempotency key holding a character event ids may not (§1.4)', async () => {
    const { postStripe } = setUp();
    const key = 'evt_\u0001\ud800';

    const answer = await postStripe(stripeEvent(key, 'customer.created', 'g@example.com'));

    const sha256 = createHash('sha256').update(key).digest('base64url');
    expect(answer.body.eventIds).toEqual([`${STRIPE}:sha256:${sha256}:0`]);
  });

  it('takes a GitHub delivery id from its header as the key, and ignores other events', async () => {
    const { handle, queued } = setUp({ 'github-stars': githubSource() });
    const star = JSON.stringify({ action: 'created', sender: { email: 'octo@example.com' } });
    const ping = JSON.stringify({ zen: 'Keep it logically awesome.' });

    const starred = await handle(
      sourceEvent('github-stars', star, await githubHeaders(star, 'delivery-1')),
    );
    const pinged = await handle(
      sourceEvent('github-stars', ping, await githubHeaders(ping, 'delivery-2', 'ping')),
    );

    expect(starred.body).toEqual({ accepted: 1, eventIds: ['github-stars:delivery-1:0'] });
    expect(pinged.raw).toBe('{"accepted":0,"eventIds":[],"ignored":true}');
    expect(queued().map((event) => event.data)).toEqual([{ email: 'octo@example.com' }]);
  });

  it('answers a webhook the filter leaves out 202 ignored, and queues or keeps nothing', async () => {
    const { postStripe, queue, deadLetters } = setUp();

    const answer = await postStripe(stripeEvent('evt_4', 'invoice.paid', 'g@example.com'));

    expect(answer).toMatchObject({
      status: 202,
      raw: '{"accepted":0,"eventIds":[],"ignored":true}',
    });
    expect(queue.messages).toEqual([]);
    expect(deadLetters.letters).toEqual([]);
  });

  it('answers a mapping that yields [] (nothing to do) 202 with nothing queued', async () => {
    const { postStripe, queue } = setUp({ [STRIPE]: stripeSource({ map: '[]' }) });

    const answer = await postStripe(stripeEvent('evt_5', 'customer.updated', 'h@example.com'));

    expect(answer).toMatchObject({ status: 202, raw: '{"accepted":0,"eventIds":[]}' });
    expect(queue.messages).toEqual([]);
  });
});

describe('a request the endpoint refuses', () => {
  it('answers 404 unknown_source for a name not configured or not a source name, whatever else', async () => {
    const { handle } = setUp();
    const payload = stripeEvent('evt_6', 'customer.created', 'i@example.com');
    const names = ['other', 'Stripe-Customers', 'a'.repeat(65), '__proto__', 'constructor', ''];

    const answers = await Promise.all(
      names.map((name) => handle(sourceEvent(name, payload, stripeHeaders(payload)))),
    );
    // A relay without any source answers the same.
    const noSources = await ingestHandler(recordingQueue())(
      sourceEvent(STRIPE, payload, stripeHeaders(payload)),
    );

    for (const answer of [...answers, { ...noSources, raw: JSON.stringify(noSources.body) }]) {
      expect(answer.status).toBe(404);
      expect(answer.raw).toBe(
        '{"error":{"code":"unknown_source","message":"No source of this name is configured."}}',
      );
    }
  });

  it('answers one 401, the same body, whatever part of the signature failed', async () => {
    const { handle, queue, deadLetters, log } = setUp();
    const payload = stripeEvent('evt_7', 'customer.created', 'j@example.com');
    const signed = stripeHeaders(payload);
    const failures: Array<[string, Record<string, string>, string?]> = [
      ['another secret', stripeHeaders(payload, { secret: `whsec_${'0'.repeat(32)}` })],
      ['no signature', { 'content-type': 'application/json' }],
      ['a malformed header', { ...signed, 'stripe-signature': 't=abc,v1=00' }],
      ['stale by 301 s', stripeHeaders(payload, { timestamp: NOW_SECONDS - 301 })],
      ['ahead by 301 s', stripeHeaders(payload, { timestamp: NOW_SECONDS + 301 })],
      ['another body', signed, payload.replace('j@example.com', 'k@example.com')],
      ["another scheme's header", await githubHeaders(payload, 'd-1')],
    ];

    const answers = [];
    for (const [, headers, body = payload] of failures) {
      answers.push(await handle(sourceEvent(STRIPE, body, headers)));
    }
    const justInTime = await handle(
      sourceEvent(STRIPE, payload, stripeHeaders(payload, { timestamp: NOW_SECONDS - 299 })),
    );

    expect(answers.map((answer) => answer.status)).toEqual(failures.map(() => 401));
    expect(new Set(answers.map((answer) => answer.raw))).toEqual(
      new Set(['{"error":{"code":"unauthorized","message":"Authentication failed."}}']),
    );
    expect(justInTime.status).toBe(202);
    expect(queue.messages).toHaveLength(1);
    expect(deadLetters.letters).toEqual([]);
    // The operator's log says which check refused each (contract: never a value or a secret).
    const refusals = log.lines.filter((line) => line.fields.event === 'unauthorized');
    expect(refusals.map((line) => line.fields.check)).toEqual([
      'bad signature: no secret of the source signed this body (stripe-signature)',
      'no stripe-signature header',
      'stripe-signature malformed (no t= and v1= parts)',
      "stripe-signature's timestamp more than 300 s from the ingest's clock",
      "stripe-signature's timestamp more than 300 s from the ingest's clock",
      'bad signature: no secret of the source signed this body (stripe-signature)',
      'no stripe-signature header',
    ]);
    expect(refusals.every((line) => line.fields.source === STRIPE)).toBe(true);
    expect(JSON.stringify(refusals)).not.toContain(signed['stripe-signature']);
  });

  it('checks the size before anything, then the content type, then the signature, then JSON', async () => {
    const { handle, postStripe } = setUp();
    const big = 'x'.repeat(INGEST_LIMITS.maxBodyBytes + 1);
    const payload = stripeEvent('evt_8', 'customer.created', 'l@example.com');

    const tooLarge = await handle(sourceEvent(STRIPE, big, { 'content-type': 'text/plain' }));
    const unknownTooLarge = await handle(sourceEvent('nope', big, {}));
    const notJsonType = await handle(
      sourceEvent(STRIPE, payload, { ...stripeHeaders(payload), 'content-type': 'text/plain' }),
    );
    const notJson = await postStripe('{"id": "evt_9", ');

    expect([tooLarge.status, unknownTooLarge.status]).toEqual([413, 413]);
    expect(notJsonType.body.error?.code).toBe('unsupported_media_type');
    expect(notJson).toMatchObject({ status: 400, body: { error: { code: 'invalid_json' } } });
  });

  it('refuses with 413 up front a payload whose dead letter could not be kept whole', async () => {
    // Each would fail its mapping, if it were mapped: nothing is kept, nothing half kept.
    const { postStripe, queue, deadLetters } = setUp({
      [STRIPE]: stripeSource({ map: "$error('not mapped')" }),
    });
    const wrap = (extra: string) =>
      `{"id":"evt_10","type":"customer.created","data":{"object":{"email":"m@example.com"}},${extra}}`;
    // Under MAX_BODY_BYTES, over what one queue message holds beside the letter's own fields.
    const large = wrap(`"notes":"${'n'.repeat(1_040_000)}"`);
    // Small as sent, large as parsed and written again: 1e20 is written 100000000000000000000.
    const numbers = wrap(`"n":[${Array(100_000).fill('1e20').join(',')}]`);
    // Deeper than JSON.stringify can write.
    const deep = wrap(`"deep":${'['.repeat(200_000)}${']'.repeat(200_000)}`);
    const fits = wrap(`"notes":"${'n'.repeat(1_000_000)}"`);

    const answers = await Promise.all([large, numbers, deep].map((payload) => postStripe(payload)));
    const kept = await postStripe(fits);

    expect(Buffer.byteLength(large)).toBeLessThan(INGEST_LIMITS.maxBodyBytes);
    expect(Buffer.byteLength(numbers)).toBeLessThan(600_000);
    for (const answer of answers) {
      expect(answer).toMatchObject({ status: 413, body: { error: { code: 'payload_too_large' } } });
    }
    expect(queue.messages).toEqual([]);
    expect(kept.body.deadLettered).toBe(`${STRIPE}:evt_10`);
    expect(deadLetters.letters).toHaveLength(1);
    expect(Buffer.byteLength(deadLetters.letters[0]?.body ?? '')).toBeLessThan(1024 * 1024);
  });
});

describe('a mapping that fails', () => {
  /** What a dead letter's body says, parsed. */
  const letterBody = (body: string | undefined) => JSON.parse(body ?? '{}');

  it('is kept as a mapping_failed dead letter with the verified payload and readable headers, answered 202', async () => {
    const { postStripe, deadLetters, queue, log } = setUp({
      [STRIPE]: stripeSource({ map: "$error('no mapping for ' & type)" }),
    });
    const payload = stripeEvent('evt_11', 'customer.created', 'n@example.com');
    const headers = stripeHeaders(payload);

    const answer = await postStripe(payload);

    expect(answer).toEqual({
      status: 202,
      body: { accepted: 0, eventIds: [], deadLettered: `${STRIPE}:evt_11` },
      raw: `{"accepted":0,"eventIds":[],"deadLettered":"${STRIPE}:evt_11"}`,
    });
    expect(queue.messages).toEqual([]);
    const [letter] = deadLetters.letters;
    expect(letter).toMatchObject({
      id: `${STRIPE}:evt_11`,
      source: STRIPE,
      reason: 'mapping_failed',
      detail: expect.stringMatching(/^map: no mapping for customer\.created/),
      receivedAt: new Date(NOW).toISOString(),
    });
    expect(letterBody(letter?.body)).toEqual({
      v: 1,
      source: STRIPE,
      eventId: `${STRIPE}:evt_11`,
      receivedAt: new Date(NOW).toISOString(),
      headers: {
        'content-type': 'application/json; charset=utf-8',
        'user-agent': headers['user-agent'],
      },
      body: JSON.parse(payload),
    });
    // Said in a line, without the detail (a jsonata error may quote the payload).
    expect(log.events('dead_lettered')).toEqual([
      expect.objectContaining({
        level: 'warn',
        fields: expect.objectContaining({
          eventId: `${STRIPE}:evt_11`,
          reason: 'mapping_failed',
          source: STRIPE,
          pointer: '',
        }),
      }),
    ]);
    const shown = [log.text(), answer.raw, JSON.stringify(deadLetters.letters)].join('\n');
    for (const secret of [STRIPE_SECRET, headers['stripe-signature'] ?? '']) {
      expect(secret.length).toBeGreaterThan(10);
      expect(shown).not.toContain(secret);
    }
    expect(shown).not.toContain('stripe-signature');
  });

  it('is kept when it runs past its time bound, and the answer does not wait for more', async () => {
    const { postStripe, deadLetters } = setUp(
      { [STRIPE]: stripeSource({ map: '( $loop := function() { $loop() }; $loop() )' }) },
      { timeoutMs: 50 },
    );
    const started = Date.now();

    const answer = await postStripe(stripeEvent('evt_12', 'customer.created', 'o@example.com'));

    expect(answer.body.deadLettered).toBe(`${STRIPE}:evt_12`);
    expect(deadLetters.letters[0]?.detail).toMatch(
      /^map: Evaluation timeout after 50 milliseconds.*D1012/,
    );
    expect(Date.now() - started).toBeLessThan(3_000);
  });

  it.each([
    [
      'an invalid email',
      "{ 'entity': 'contacts', 'action': 'create', 'data': { 'email': 'not-an-address' } }",
      '/0/data/email',
    ],
    [
      'an entity outside ENTITIES, second',
      "[{ 'entity': 'contacts', 'action': 'create', 'data': { 'email': data.object.email } }, { 'entity': 'widgets', 'action': 'delete', 'id': 1 }]",
      '/1/entity',
    ],
    [
      'a match on a field outside CONTACT_MATCH_FIELDS',
      "{ 'entity': 'contacts', 'action': 'delete', 'match': { 'crm_id': 'c-1' } }",
      '/0/match/crm_id',
    ],
    ['no event object at all', "'contacts'", ''],
    [
      'more events than MAX_EVENTS_PER_REQUEST',
      "[1..501].{ 'entity': 'contacts', 'action': 'delete', 'id': $ }",
      '',
    ],
  ])(
    'is kept when it yields %s, with the pointer of the first bad field',
    async (_, map, pointer) => {
      const { postStripe, deadLetters, queue } = setUp({ [STRIPE]: stripeSource({ map }) });

      const answer = await postStripe(stripeEvent('evt_13', 'customer.created', 'p@example.com'));

      expect(answer.status).toBe(202);
      expect(answer.body.deadLettered).toBe(`${STRIPE}:evt_13`);
      const [letter] = deadLetters.letters;
      expect(letter?.detail).toMatch(/^map: /);
      if (pointer === '') expect(letter?.detail).not.toContain('(at ');
      else expect(letter?.detail).toMatch(new RegExp(`\\(at ${pointer}\\)$`));
      // Nothing of the request is queued, not even its valid events.
      expect(queue.messages).toEqual([]);
    },
  );

  it('is kept when the filter or the idempotency key fails, under a new id when there is no key', async () => {
    const filtered = setUp({ [STRIPE]: stripeSource({ filter: "$error('filter broke')" }) });
    const keyed = setUp({ [STRIPE]: stripeSource({ idempotencyKey: 'data.object' }) });
    const payload = stripeEvent('evt_14', 'customer.created', 'q@example.com');

    const byFilter = await filtered.postStripe(payload);
    const byKey = await keyed.postStripe(payload);

    expect(byFilter.body.deadLettered).toBe(`${STRIPE}:evt_14`);
    expect(filtered.deadLetters.letters[0]?.detail).toMatch(/filter: filter broke/);
    expect(byKey.body.deadLettered).toBe(`${STRIPE}:generated-1`);
    expect(keyed.deadLetters.letters[0]?.detail).toMatch(/idempotencyKey: must yield a string/);
  });

  it('answers 503 when the dead letter cannot be kept, so the sender retries', async () => {
    const failing = recordingDeadLetters(() => new QueueUnavailableError('down', { code: 'X' }));
    const { postStripe, log } = setUp(
      { [STRIPE]: stripeSource({ map: "$error('broken')" }) },
      { deadLetters: failing },
    );

    const answer = await postStripe(stripeEvent('evt_15', 'customer.created', 'r@example.com'));

    expect(answer).toMatchObject({ status: 503, body: { error: { code: 'queue_unavailable' } } });
    expect(log.events('queue_unavailable')).toHaveLength(1);
    expect(log.events('dead_lettered')).toEqual([]);
  });
});

describe('the guarantees of §1', () => {
  it('answers 503 and keeps the id free when the events queue is down', async () => {
    const down = recordingQueue(() => new QueueUnavailableError('down', { code: 'X' }));
    const seen = new Set<string>();
    // A ledger that remembers only what it is told to.
    const ledger: RequestLedger = {
      once: async (identity, accept) => {
        if (seen.has(identity.key)) return { kind: 'replayed', status: 202, body: '{}' };
        const result = await accept(undefined);
        if (result.remember) seen.add(identity.key);
        return { kind: 'accepted', result };
      },
    };
    const { postStripe } = setUp(undefined, { queue: down, ledger });

    const answer = await postStripe(stripeEvent('evt_16', 'customer.created', 's@example.com'));

    expect(answer).toMatchObject({ status: 503, body: { error: { code: 'queue_unavailable' } } });
    expect(seen.size).toBe(0);
  });

  it('answers 503 and queues nothing when the request-id store is down', async () => {
    const ledger: RequestLedger = { once: async () => ({ kind: 'unavailable' }) };
    const { postStripe, queue, deadLetters } = setUp(
      { [STRIPE]: stripeSource(), failing: stripeSource({ map: "$error('x')" }) },
      { ledger },
    );
    const payload = stripeEvent('evt_17', 'customer.created', 't@example.com');

    const mapped = await postStripe(payload);
    const failed = await postStripe(payload, 'failing');

    for (const answer of [mapped, failed]) {
      expect(answer).toMatchObject({ status: 503, body: { error: { code: 'queue_unavailable' } } });
    }
    expect(queue.messages).toEqual([]);
    expect(deadLetters.letters).toEqual([]);
  });

  it('keeps GitHub’s secret out of every answer and line, whatever the outcome', async () => {
    const { handle, log } = setUp({ 'github-stars': githubSource() });
    const star = JSON.stringify({ action: 'created', sender: { email: 'u@example.com' } });
    const headers = await githubHeaders(star, 'delivery-3');

    const answers = [
      await handle(sourceEvent('github-stars', star, headers)),
      await handle(sourceEvent('github-stars', `${star} `, headers)),
    ];

    const shown = [log.text(), ...answers.map((answer) => answer.raw)].join('\n');
    expect(shown).not.toContain(GITHUB_SECRET);
    expect(shown).not.toContain(headers['x-hub-signature-256']);
    expect(answers.map((answer) => answer.status)).toEqual([202, 401]);
  });

  it('answers 1,000 verified payloads of any shape 202 or 400 (not JSON), never a 5xx, queueing only valid events', async () => {
    const { handle, queue, deadLetters } = setUp({
      // The payload itself as the events: whatever the sender sent is checked as §1 checks it.
      itself: stripeSource({ filter: undefined, map: '$', idempotencyKey: 'id' }),
      [STRIPE]: stripeSource(),
    });
    const payloads = fc.oneof(
      fc.jsonValue({ maxDepth: 4 }).map((value) => JSON.stringify(value)),
      fc
        .record({
          id: fc.oneof(fc.string({ maxLength: 300 }), fc.integer(), fc.jsonValue({ maxDepth: 1 })),
          type: fc.constantFrom('customer.created', 'customer.deleted', 'invoice.paid'),
          entity: fc.constantFrom('contacts', 'widgets'),
          action: fc.constantFrom('create', 'delete'),
          data: fc.dictionary(fc.constantFrom('object', 'email'), fc.jsonValue({ maxDepth: 2 })),
        })
        .map((value) => JSON.stringify(value)),
      fc
        .record({
          id: fc.string({ maxLength: 300 }),
          type: fc.constantFrom('customer.created', 'customer.deleted'),
          data: fc.record({
            object: fc.record({ email: fc.oneof(fc.emailAddress(), fc.string()) }),
          }),
        })
        .map((value) => JSON.stringify(value)),
      fc
        .record({
          entity: fc.constantFrom('contacts', 'widgets'),
          action: fc.constantFrom('create', 'delete'),
          data: fc.record({ email: fc.emailAddress() }),
        })
        .map((value) => JSON.stringify(value)),
      fc.string({ unit: 'binary', maxLength: 100 }),
    );

    await fc.assert(
      fc.asyncProperty(payloads, fc.constantFrom('itself', STRIPE), async (payload, name) => {
        const answer = await handle(sourceEvent(name, payload, stripeHeaders(payload)));
        expect([202, 400]).toContain(answer.status);
        if (answer.status === 202) expect(answer.body.eventIds).toBeInstanceOf(Array);
      }),
      {
        numRuns: 1_000,
        // One of each end among the runs, whatever the seed draws.
        examples: [
          [
            JSON.stringify({
              entity: 'contacts',
              action: 'create',
              data: { email: 'a@example.com' },
            }),
            'itself',
          ],
          [
            JSON.stringify({ entity: 'contacts', action: 'create', data: { email: 'nope' } }),
            'itself',
          ],
        ],
      },
    );

    // Some were queued and some kept: the payloads reach both ends.
    expect(queue.messages.length).toBeGreaterThan(0);
    expect(deadLetters.letters.length).toBeGreaterThan(0);
    for (const message of queue.messages) {
      expect(queuedEventSchema().safeParse(JSON.parse(message.body)).success).toBe(true);
    }
    expect(deadLetters.letters.every((letter) => letter.reason === 'mapping_failed')).toBe(true);
  });

  it('refuses to start with sources but no dead-letter queue to keep what they cannot map', async () => {
    const sources = compileSources(parseSourcesDocument({ sources: { [STRIPE]: stripeSource() } }));
    const sqs = sqsClient('http://127.0.0.1:9');
    const config = (extra: Record<string, string> = {}) =>
      loadIngestConfig({
        [ENV.EVENTS_QUEUE_URL]: 'http://127.0.0.1:9/000000000000/events.fifo',
        [ENV.WEBHOOK_SECRET]: WEBHOOK_SECRET,
        [ENV.DEDUP_WINDOW_SECONDS]: '0',
        [ENV.MAX_RECORD_EVENTS_PER_MINUTE]: '0',
        ...extra,
      });
    const edges = { sqs, sources, logger: new Logger({ logLevel: 'SILENT' }) };

    await expect(buildIngestHandler(config(), edges)).rejects.toThrow(
      /DEAD_LETTER_QUEUE_URL is required with sources/,
    );
    await expect(
      buildIngestHandler(
        config({ [ENV.DEAD_LETTER_QUEUE_URL]: 'http://127.0.0.1:9/000000000000/dlq.fifo' }),
        edges,
      ),
    ).resolves.toBeInstanceOf(Function);
    sqs.destroy();
  });
});
