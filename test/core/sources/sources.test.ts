import { createHmac, randomBytes } from 'node:crypto';
import jsonata from 'jsonata';
import { beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { SourceConfigError, SourceEvaluationError } from '../../../functions/core/errors.ts';
import { withoutPayloadValues } from '../../../functions/core/sources/mapping-failures.ts';
import { loadSourceCompiler } from '../../../functions/core/sources/source-compiler.ts';
import {
  type CompiledSource,
  compileSources,
  eventPointer,
  parseSourcesDocument,
  type SourceDefinition,
} from '../../../functions/core/sources/sources.ts';
import { expectNoSecrets, thrownBy } from '../../support/secrets.ts';

// Counts compilations: the real jsonata, seen through a spy.
vi.mock('jsonata', async (importOriginal) => {
  const actual = await importOriginal<{ default: typeof jsonata }>();
  return { default: vi.fn(actual.default) };
});

beforeAll(loadSourceCompiler);

const STRIPE_SECRET = `whsec_${randomBytes(24).toString('hex')}`;
const HMAC_SECRET = randomBytes(24).toString('hex');

/** The contract's example source, with a customisable part. */
function document(overrides: Record<string, unknown> = {}, name = 'stripe-customers') {
  return {
    sources: {
      [name]: {
        verify: { scheme: 'stripe', secret: STRIPE_SECRET },
        filter: "type in ['customer.created', 'customer.updated']",
        map: "{ 'entity': 'contacts', 'action': 'create', 'data': { 'email': data.object.email } }",
        idempotencyKey: 'id',
        ...overrides,
      },
    },
  };
}

function compileOne(
  source: Partial<SourceDefinition> & Pick<SourceDefinition, 'map'>,
  limits?: { timeoutMs?: number },
): CompiledSource {
  const definition: SourceDefinition = {
    name: 'test-source',
    verify: { scheme: 'hmac', header: 'x-sig', encoding: 'hex' },
    secrets: [HMAC_SECRET],
    ...source,
  };
  const compiled = compileSources([definition], { limits }).get(definition.name);
  if (compiled === undefined) throw new Error('the source was not compiled');
  return compiled;
}

function configErrorOf(action: () => unknown): SourceConfigError {
  try {
    action();
  } catch (error) {
    if (error instanceof SourceConfigError) return error;
    throw error;
  }
  throw new Error('expected a SourceConfigError, and nothing was thrown');
}

const CUSTOMER = { id: 'evt_1', type: 'customer.created', data: { object: { email: 'a@b.c' } } };

describe('parseSourcesDocument', () => {
  it('reads the contract’s example', () => {
    expect(parseSourcesDocument(document())).toEqual([
      {
        name: 'stripe-customers',
        verify: { scheme: 'stripe' },
        secrets: [STRIPE_SECRET],
        filter: "type in ['customer.created', 'customer.updated']",
        map: "{ 'entity': 'contacts', 'action': 'create', 'data': { 'email': data.object.email } }",
        idempotencyKey: 'id',
      },
    ]);
  });

  it('reads an hmac source with several secrets, its header lower-cased', () => {
    const [source] = parseSourcesDocument({
      sources: {
        'form-tool': {
          verify: {
            scheme: 'hmac',
            header: 'X-Form-Signature',
            encoding: 'base64',
            prefix: 'v1=',
            secrets: [HMAC_SECRET, `${HMAC_SECRET}x`],
          },
          map: '[]',
        },
      },
    });

    expect(source?.verify).toEqual({
      scheme: 'hmac',
      header: 'x-form-signature',
      encoding: 'base64',
      prefix: 'v1=',
    });
    expect(source?.secrets).toEqual([HMAC_SECRET, `${HMAC_SECRET}x`]);
  });

  it('takes a source without a secret (in the cloud they live in Secrets Manager)', () => {
    const [source] = parseSourcesDocument(document({ verify: { scheme: 'github' } }));

    expect(source?.secrets).toEqual([]);
  });

  it.each([
    ['an unknown scheme', { verify: { scheme: 'paypal', secret: STRIPE_SECRET } }, 'verify.scheme'],
    ['hmac without a header', { verify: { scheme: 'hmac', encoding: 'hex' } }, 'verify.header'],
    [
      'hmac with an unknown encoding',
      { verify: { scheme: 'hmac', header: 'x-sig', encoding: 'base32' } },
      'verify.encoding',
    ],
    [
      'hmac with a header name HTTP does not allow',
      { verify: { scheme: 'hmac', header: 'x sig', encoding: 'hex' } },
      'verify.header',
    ],
    [
      'an unknown key in verify',
      { verify: { scheme: 'stripe', secret: STRIPE_SECRET, tolerance: 600 } },
      'tolerance',
    ],
    ['an unknown key in the source', { maps: 'x' }, 'maps'],
    [
      'both secret and secrets',
      { verify: { scheme: 'stripe', secret: STRIPE_SECRET, secrets: [STRIPE_SECRET] } },
      'not both',
    ],
    ['an empty list of secrets', { verify: { scheme: 'stripe', secrets: [] } }, 'verify.secrets'],
    ['a missing map', { map: undefined }, 'map'],
    ['a blank map', { map: '  ' }, 'map'],
    ['a filter that is not a string', { filter: true }, 'filter'],
    [
      'a Stripe API key given as the signing secret',
      { verify: { scheme: 'stripe', secret: 'sk_live_51Hsecretsecretsecret' } },
      'secret #1',
    ],
    [
      'a Standard Webhooks secret that is not whsec_',
      { verify: { scheme: 'standard-webhooks', secrets: [STRIPE_SECRET, 'plain-secret-value'] } },
      'secret #2',
    ],
    [
      'a secret with a trailing newline',
      { verify: { scheme: 'shopify', secret: `${HMAC_SECRET}\n` } },
      'secret #1',
    ],
  ])(
    'refuses %s, naming the source and the problem, never a secret',
    (_case, overrides, problem) => {
      const error = configErrorOf(() => parseSourcesDocument(document(overrides)));

      expect(error.source).toBe('stripe-customers');
      expect(error.message).toMatch(/^Source "stripe-customers": /);
      expect(error.message).toContain(problem);
      expectNoSecrets(error, [
        STRIPE_SECRET,
        HMAC_SECRET,
        'sk_live_51Hsecretsecretsecret',
        'plain-secret-value',
      ]);
    },
  );

  it.each(['Stripe', '1stripe', 'stripe_customers', 'a'.repeat(65), ''])(
    'refuses the source name %j',
    (name) => {
      const error = configErrorOf(() => parseSourcesDocument(document({}, name)));

      expect(error.message).toContain('the name must match');
      expect(error.source).toBe(name.slice(0, 80));
    },
  );

  it.each([
    ['not an object', 'sources'],
    ['without sources', {}],
    ['with another top-level key', { sources: {}, version: 2 }],
    ['with sources that are not an object', { sources: [] }],
  ])('refuses a document %s, naming the document', (_case, json) => {
    const error = configErrorOf(() => parseSourcesDocument(json));

    expect(error.source).toBeUndefined();
    expect(error.message).toMatch(/^Sources document: /);
  });

  it('refuses a source named __proto__ rather than dropping it', () => {
    const json = JSON.parse('{"sources":{"__proto__":{"verify":{"scheme":"github"},"map":"[]"}}}');

    expect(configErrorOf(() => parseSourcesDocument(json)).source).toBe('__proto__');
  });

  it('takes a document without sources', () => {
    expect(parseSourcesDocument({ sources: {} })).toEqual([]);
  });
});

describe('compileSources', () => {
  beforeEach(() => {
    vi.mocked(jsonata).mockClear();
  });

  it.each([
    ['filter', { filter: "type in ['a', " }],
    ['map', { map: "{ 'entity': }" }],
    ['idempotencyKey', { idempotencyKey: 'id +' }],
  ])('refuses a %s that does not compile, with jsonata’s message and position', (role, part) => {
    const error = configErrorOf(() => compileSources(parseSourcesDocument(document(part))));

    expect(error.source).toBe('stripe-customers');
    expect(error.message).toMatch(
      new RegExp(
        `^Source "stripe-customers": ${role} does not compile: .+ \\(S0\\d{3} at position \\d+\\)$`,
      ),
    );
    expectNoSecrets(error, [STRIPE_SECRET]);
  });

  it('compiles each expression once per document, not per request', async () => {
    const sources = compileSources(parseSourcesDocument(document()));
    const source = sources.get('stripe-customers');
    const compilations = vi.mocked(jsonata).mock.calls.length;
    for (let request = 0; request < 5; request++) {
      await source?.filter(CUSTOMER, {});
      await source?.map(CUSTOMER, {});
      await source?.idempotencyKey(CUSTOMER, {});
    }

    expect(compilations).toBe(3);
    expect(vi.mocked(jsonata).mock.calls.length).toBe(3);
  });

  it('refuses a source without a secret, unless told that nothing will be verified', () => {
    const definitions = parseSourcesDocument(document({ verify: { scheme: 'github' } }));

    expect(configErrorOf(() => compileSources(definitions)).message).toBe(
      'Source "stripe-customers": no secret is configured',
    );
    expect(compileSources(definitions, { requireSecrets: false }).size).toBe(1);
  });

  it('takes the secrets from secretsFor when given, not from the document', () => {
    const stored = randomBytes(16).toString('hex');
    const definitions = parseSourcesDocument({
      sources: { forms: { verify: { scheme: 'github', secret: HMAC_SECRET }, map: '[]' } },
    });
    const source = compileSources(definitions, {
      secretsFor: (name) => (name === 'forms' ? [stored] : []),
    }).get('forms');
    const signed = (secret: string) => ({
      'x-hub-signature-256': `sha256=${createHmac('sha256', secret).update('{}').digest('hex')}`,
    });
    const body = new TextEncoder().encode('{}');

    expect(source?.authenticate(body, signed(stored), Date.now())).toBe(true);
    expect(source?.authenticate(body, signed(HMAC_SECRET), Date.now())).toBe(false);
  });

  it('refuses a secret from secretsFor that cannot work, naming the source, not the secret', () => {
    const definitions = parseSourcesDocument(document({ verify: { scheme: 'stripe' } }));
    const error = configErrorOf(() =>
      compileSources(definitions, { secretsFor: () => [STRIPE_SECRET, 'sk_test_wrongwrong'] }),
    );

    expect(error.message).toContain('Source "stripe-customers": The secret #2');
    expectNoSecrets(error, [STRIPE_SECRET, 'sk_test_wrongwrong']);
  });

  it('refuses two sources of one name', () => {
    const [definition] = parseSourcesDocument(document());
    const twice = definition === undefined ? [] : [definition, definition];

    expect(configErrorOf(() => compileSources(twice)).message).toContain('given twice');
  });
});

describe('a compiled source’s map', () => {
  it('yields one event object as a list of one, as plain data', async () => {
    const result = await compileOne({ map: "{ 'entity': 'contacts', 'id': 7 }" }).map({}, {});

    expect(result).toEqual({ kind: 'events', events: [{ entity: 'contacts', id: 7 }] });
    expect(Object.getPrototypeOf(result.kind === 'events' ? result.events[0] : null)).toBe(
      Object.prototype,
    );
  });

  it('yields an array of events, one per item', async () => {
    const source = compileOne({ map: "items.{ 'entity': 'contacts', 'id': id }" });

    expect(await source.map({ items: [{ id: 1 }, { id: 2 }] }, {})).toEqual({
      kind: 'events',
      events: [
        { entity: 'contacts', id: 1 },
        { entity: 'contacts', id: 2 },
      ],
    });
  });

  it('takes [] as nothing to do', async () => {
    expect(await compileOne({ map: '[items.{ "id": id }]' }).map({ items: [] }, {})).toEqual({
      kind: 'events',
      events: [],
    });
  });

  it.each([
    ['nothing', 'missing.path', 'yields nothing'],
    ['a string', '"text"', 'not a string'],
    ['a number', '42', 'not a number'],
    ['null', 'null', 'not null'],
  ])('fails when the mapping yields %s', async (_case, map, error) => {
    const result = await compileOne({ map }).map({}, {});

    expect(result).toMatchObject({ kind: 'failed', pointer: '' });
    expect(result.kind === 'failed' && result.error).toContain(error);
  });

  it('fails with the error when the mapping throws', async () => {
    const result = await compileOne({ map: '$error("no email in " & type)' }).map(
      { type: 'customer.created' },
      {},
    );

    expect(result).toEqual({
      kind: 'failed',
      error: 'map: no email in customer.created (D3137 at position 7)',
      pointer: '',
    });
  });

  it('stops a mapping that loops forever at the time bound, quickly', async () => {
    const started = Date.now();
    const result = await compileOne({ map: '( $loop := function() { $loop() }; $loop() )' }).map(
      {},
      {},
    );

    expect(result.kind === 'failed' && result.error).toMatch(
      /^map: Evaluation timeout after 500 milliseconds.*D1012/,
    );
    expect(Date.now() - started).toBeLessThan(3_000);
  });

  it('stops a recursion at the depth bound', async () => {
    const result = await compileOne({
      map: '( $f := function($n) { $n + $f($n + 1) }; $f(0) )',
    }).map({}, {});

    expect(result.kind === 'failed' && result.error).toContain('D1011');
  });

  it('stops a sequence past its bound', async () => {
    const result = await compileOne({ map: '[1..2000000].{ "id": $ }' }).map({}, {});

    expect(result.kind === 'failed' && result.error).toContain('D2015');
  });

  it('reads $headers, but no signature or credential header', async () => {
    const source = compileOne({
      map: "{ 'entity': 'contacts', 'data': { 'topic': $headers.'x-topic' }, 'seen': [$keys($headers)] }",
    });

    const result = await source.map(
      {},
      {
        'x-topic': 'orders/create',
        'x-sig': 'abc',
        authorization: 'Bearer k',
        'x-absent': undefined,
      },
    );

    expect(result).toEqual({
      kind: 'events',
      events: [{ entity: 'contacts', data: { topic: 'orders/create' }, seen: ['x-topic'] }],
    });
  });

  it('evaluates concurrent requests apart', async () => {
    const source = compileOne({ map: "{ 'id': id, 'h': $headers.'x-n' }" });

    const results = await Promise.all(
      [1, 2, 3].map((n) => source.map({ id: n }, { 'x-n': String(n) })),
    );

    expect(results.map((result) => result.kind === 'events' && result.events[0])).toEqual([
      { id: 1, h: '1' },
      { id: 2, h: '2' },
      { id: 3, h: '3' },
    ]);
  });

  it('charges each of many concurrent evaluations only its own time against the bound', async () => {
    // 80 at once, each about 15 ms of work: evaluated together, each took the time of all 80
    // and every one passed a 300 ms bound.
    const source = compileOne(
      { map: "{ 'entity': 'contacts', 'n': $sum($map([1..6000], function($v) { $v })) }" },
      { timeoutMs: 300 },
    );

    const results = await Promise.all(Array.from({ length: 80 }, () => source.map({}, {})));

    expect(results.filter((result) => result.kind !== 'events')).toEqual([]);
  });

  it('refuses $eval, which would run the payload as an expression', () => {
    expect(() => compileOne({ map: '$eval(expression)' })).toThrow(/map uses \$eval/);
    expect(() => compileOne({ map: '( $e := $eval; $e(x) )' })).toThrow(/map uses \$eval/);
  });

  it('keeps a payload’s values out of a mapping error kept in a dead letter', () => {
    expect(
      withoutPayloadValues(
        'map: Unable to cast value to a number: "ann@example.com" (D3030 at position 8)',
      ),
    ).toBe('map: Unable to cast value to a number: "…" (D3030 at position 8)');
    // The ingest's own checks quote no value: left as they are.
    expect(withoutPayloadValues('map: must be a valid email address (at /0/data/email)')).toBe(
      'map: must be a valid email address (at /0/data/email)',
    );
  });

  it('points at a field of a mapped event', () => {
    expect([eventPointer(0), eventPointer(2, '/data/email')]).toEqual(['/0', '/2/data/email']);
  });
});

describe('a compiled source’s filter', () => {
  it('passes everything without a filter', async () => {
    expect(await compileOne({ map: '[]' }).filter({}, {})).toBe(true);
  });

  it.each([
    ["type = 'customer.created'", true],
    ["type = 'customer.deleted'", false],
    ['type', true],
    ['""', false],
    ['0', false],
    ['[]', false],
    ['missing', false],
    ['[0, 1]', true],
    ["$headers.'x-shopify-topic' = 'orders/create'", true],
  ])('takes %s as %s, under JSONata’s truthiness', async (filter, expected) => {
    const source = compileOne({ filter, map: '[]' });

    expect(await source.filter(CUSTOMER, { 'x-shopify-topic': 'orders/create' })).toBe(expected);
  });

  it('throws a SourceEvaluationError naming the filter when it fails', async () => {
    const error = await thrownBy(() =>
      compileOne({ filter: '$error("bad filter")', map: '[]' }).filter({}, {}),
    );

    expect(error).toBeInstanceOf(SourceEvaluationError);
    expect(error).toMatchObject({
      role: 'filter',
      message: 'Source "test-source": filter: bad filter (D3137 at position 7)',
    });
  });
});

describe('a compiled source’s idempotencyKey', () => {
  const sourceOf = (verify: SourceDefinition['verify'], secret: string) =>
    compileOne({ verify, secrets: [secret], map: '[]' });

  it.each([
    ['stripe', { scheme: 'stripe' }, `whsec_${HMAC_SECRET}`, {}, 'evt_1'],
    [
      'shopify',
      { scheme: 'shopify' },
      HMAC_SECRET,
      { 'x-shopify-webhook-id': 'b54557e4' },
      'b54557e4',
    ],
    ['github', { scheme: 'github' }, HMAC_SECRET, { 'x-github-delivery': '72d3162e' }, '72d3162e'],
    [
      'standard-webhooks',
      { scheme: 'standard-webhooks' },
      `whsec_${randomBytes(32).toString('base64')}`,
      { 'webhook-id': 'msg_1', 'webhook-signature': 'v1,x' },
      'msg_1',
    ],
    [
      'standard-webhooks (svix-*)',
      { scheme: 'standard-webhooks' },
      `whsec_${randomBytes(32).toString('base64')}`,
      { 'svix-id': 'msg_2' },
      'msg_2',
    ],
    [
      'hmac',
      { scheme: 'hmac', header: 'x-sig', encoding: 'hex' },
      HMAC_SECRET,
      { 'x-request-id': 'r' },
      undefined,
    ],
    ['api-key', { scheme: 'api-key' }, HMAC_SECRET, { 'idempotency-key': 'k' }, undefined],
  ] as const)(
    'defaults, for %s, to the provider’s id',
    async (_scheme, verify, secret, headers, expected) => {
      expect(await sourceOf(verify, secret).idempotencyKey(CUSTOMER, headers)).toBe(expected);
    },
  );

  it('has no default when the Stripe body has no string id', async () => {
    const source = sourceOf({ scheme: 'stripe' }, `whsec_${HMAC_SECRET}`);

    expect(await source.idempotencyKey({ id: 12 }, {})).toBeUndefined();
  });

  it.each([
    ["$headers.'x-request-id'", { 'x-request-id': 'req-9' }, 'req-9'],
    ['data.object.number', {}, '1042'],
    ['missing', {}, undefined],
    ['""', {}, undefined],
  ])('takes the expression %s', async (idempotencyKey, headers, expected) => {
    const source = compileOne({ idempotencyKey, map: '[]' });

    expect(await source.idempotencyKey({ data: { object: { number: 1042 } } }, headers)).toBe(
      expected,
    );
  });

  it.each([
    ['an object', 'data', 'must yield a string or a number, not an object'],
    ['a long text', '$pad("", 300, "x")', 'more than 256 characters'],
    ['a failure', '$error("no id")', 'no id (D3137'],
  ])('throws a SourceEvaluationError for %s', async (_case, idempotencyKey, problem) => {
    const error = await thrownBy(() =>
      compileOne({ idempotencyKey, map: '[]' }).idempotencyKey({ data: { a: 1 } }, {}),
    );

    expect(error).toBeInstanceOf(SourceEvaluationError);
    expect(error).toMatchObject({ role: 'idempotencyKey' });
    expect((error as Error).message).toContain(problem);
  });
});

describe('a compiled source’s authenticate and mappingHeaders', () => {
  it('verifies with the source’s scheme and secrets', () => {
    const source = compileOne({ map: '[]' });
    const body = new TextEncoder().encode('{"a":1}');
    const signature = createHmac('sha256', HMAC_SECRET).update(body).digest('hex');

    const altered = `${signature.slice(0, -1)}${signature.endsWith('0') ? '1' : '0'}`;

    expect(source.authenticate(body, { 'x-sig': signature }, Date.now())).toBe(true);
    expect(source.authenticate(body, { 'x-sig': altered }, Date.now())).toBe(false);
  });

  it('keeps the headers a mapping may read, for the dead letter', () => {
    expect(
      compileOne({ map: '[]' }).mappingHeaders({ 'x-sig': 'abc', 'X-Topic': 't', cookie: 'c' }),
    ).toEqual({ 'x-topic': 't' });
  });
});
