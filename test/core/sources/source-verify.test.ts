import { createHmac, randomBytes } from 'node:crypto';
import { sign as signGitHub } from '@octokit/webhooks-methods';
import '@shopify/shopify-api/adapters/web-api';
import { ApiVersion, LogSeverity, shopifyApi } from '@shopify/shopify-api';
import fc from 'fast-check';
import { Webhook } from 'standardwebhooks';
import Stripe from 'stripe';
import { Webhook as SvixWebhook } from 'svix';
import { describe, expect, it } from 'vitest';
import { CredentialError } from '../../../functions/core/errors.ts';
import {
  checkSourceSecrets,
  readableHeaders,
  refusedSourceCheck,
  type VerifySettings,
  verifySource,
} from '../../../functions/core/sources/source-verify.ts';
import { expectNoSecrets } from '../../support/secrets.ts';

const NOW_MS = 1_767_225_600_000;
const NOW = NOW_MS / 1000;
const PAYLOAD = JSON.stringify({ id: 'evt_1', type: 'customer.created', data: { email: 'a@b.c' } });
const stripe = new Stripe('sk_test_not_a_real_key');

type Headers = Record<string, string>;

/** One scheme: how its provider signs, and which header to break. */
interface SchemeCase {
  verify: VerifySettings;
  newSecret: () => string;
  /** Signs as the provider does; `at` is unix seconds. */
  sign: (secret: string, payload: string, at: number) => Promise<Headers> | Headers;
  signatureHeader: string;
  malformed: string;
  timestamped: boolean;
  signsBody: boolean;
}

const whsec = () => `whsec_${randomBytes(32).toString('base64')}`;
const text = () => randomBytes(24).toString('hex');

const CASES: Record<string, SchemeCase> = {
  'standard-webhooks': {
    verify: { scheme: 'standard-webhooks' },
    newSecret: whsec,
    sign: (secret, payload, at) => ({
      'webhook-id': 'msg_1',
      'webhook-timestamp': String(at),
      'webhook-signature': new Webhook(secret).sign('msg_1', new Date(at * 1000), payload),
    }),
    signatureHeader: 'webhook-signature',
    malformed: 'v1,not*base64',
    timestamped: true,
    signsBody: true,
  },
  'standard-webhooks (svix-* headers)': {
    verify: { scheme: 'standard-webhooks' },
    newSecret: whsec,
    sign: (secret, payload, at) => ({
      'svix-id': 'msg_2',
      'svix-timestamp': String(at),
      'svix-signature': new SvixWebhook(secret).sign('msg_2', new Date(at * 1000), payload),
    }),
    signatureHeader: 'svix-signature',
    malformed: 'v1',
    timestamped: true,
    signsBody: true,
  },
  stripe: {
    verify: { scheme: 'stripe' },
    newSecret: () => `whsec_${text()}`,
    sign: (secret, payload, timestamp) => ({
      'stripe-signature': stripe.webhooks.generateTestHeaderString({ payload, secret, timestamp }),
    }),
    signatureHeader: 'stripe-signature',
    malformed: 't=abc,v1=00',
    timestamped: true,
    signsBody: true,
  },
  shopify: {
    verify: { scheme: 'shopify' },
    newSecret: text,
    // Shopify's documented recipe: base64 of the HMAC-SHA256 of the raw body, keyed with the
    // app's client secret, in X-Shopify-Hmac-Sha256
    // (https://shopify.dev/docs/apps/build/webhooks/subscribe/https#step-5-verify-the-webhook).
    sign: (secret, payload) => ({
      'x-shopify-hmac-sha256': createHmac('sha256', secret).update(payload).digest('base64'),
    }),
    signatureHeader: 'x-shopify-hmac-sha256',
    malformed: 'c2hvcnQ=',
    timestamped: false,
    signsBody: true,
  },
  github: {
    verify: { scheme: 'github' },
    newSecret: text,
    sign: async (secret, payload) => ({ 'x-hub-signature-256': await signGitHub(secret, payload) }),
    signatureHeader: 'x-hub-signature-256',
    malformed: `sha1=${'0'.repeat(64)}`,
    timestamped: false,
    signsBody: true,
  },
  'hmac (hex, prefix)': {
    verify: { scheme: 'hmac', header: 'x-signature', encoding: 'hex', prefix: 'sha256=' },
    newSecret: text,
    sign: (secret, payload) => ({
      'x-signature': `sha256=${createHmac('sha256', secret).update(payload).digest('hex')}`,
    }),
    signatureHeader: 'x-signature',
    malformed: 'sha256=xyz',
    timestamped: false,
    signsBody: true,
  },
  'hmac (base64)': {
    verify: { scheme: 'hmac', header: 'x-wc-webhook-signature', encoding: 'base64' },
    newSecret: text,
    sign: (secret, payload) => ({
      'x-wc-webhook-signature': createHmac('sha256', secret).update(payload).digest('base64'),
    }),
    signatureHeader: 'x-wc-webhook-signature',
    malformed: '%%%',
    timestamped: false,
    signsBody: true,
  },
  'api-key': {
    verify: { scheme: 'api-key' },
    newSecret: text,
    sign: (secret) => ({ authorization: `Bearer ${secret}` }),
    signatureHeader: 'authorization',
    malformed: 'Basic dXNlcjpwYXNz',
    timestamped: false,
    signsBody: false,
  },
};

const bytes = (value: string) => new TextEncoder().encode(value);

describe.each(Object.entries(CASES))('verifySource, %s', (_name, scheme) => {
  const secret = scheme.newSecret();
  const other = scheme.newSecret();
  const check = (headers: Headers, secrets = [secret], raw = bytes(PAYLOAD)) =>
    verifySource(scheme.verify, secrets, raw, headers, NOW_MS);

  it('accepts a request signed as the provider signs', async () => {
    expect(check(await scheme.sign(secret, PAYLOAD, NOW))).toBe(true);
  });

  it('refuses a request signed with another secret', async () => {
    expect(check(await scheme.sign(other, PAYLOAD, NOW))).toBe(false);
  });

  it('accepts the second of two secrets (rotation), and either order', async () => {
    const headers = await scheme.sign(secret, PAYLOAD, NOW);

    expect([check(headers, [other, secret]), check(headers, [secret, other])]).toEqual([
      true,
      true,
    ]);
  });

  it('refuses a request without the signature header', async () => {
    const { [scheme.signatureHeader]: _removed, ...headers } = await scheme.sign(
      secret,
      PAYLOAD,
      NOW,
    );

    expect(check(headers)).toBe(false);
  });

  it('refuses a malformed signature header', async () => {
    const headers = await scheme.sign(secret, PAYLOAD, NOW);

    expect(check({ ...headers, [scheme.signatureHeader]: scheme.malformed })).toBe(false);
  });

  // An API key signs nothing: the body is not its business.
  if (scheme.signsBody) {
    it('refuses a body altered by one byte', async () => {
      const raw = bytes(PAYLOAD);
      raw[raw.length - 2] = (raw[raw.length - 2] ?? 0) ^ 1;

      expect(check(await scheme.sign(secret, PAYLOAD, NOW), [secret], raw)).toBe(false);
    });
  }

  if (scheme.timestamped) {
    it('tolerates 300 seconds of clock difference either way, not 301', async () => {
      const at = async (seconds: number) => check(await scheme.sign(secret, PAYLOAD, seconds));

      expect([await at(NOW - 300), await at(NOW + 300)]).toEqual([true, true]);
      expect([await at(NOW - 301), await at(NOW + 301)]).toEqual([false, false]);
    });
  }
});

describe('verifySource, scheme details', () => {
  it('agrees with Stripe’s own constructEvent on fresh and stale signatures', () => {
    const secret = `whsec_${text()}`;
    const header = (timestamp: number) =>
      stripe.webhooks.generateTestHeaderString({ payload: PAYLOAD, secret, timestamp });
    const theirs = (timestamp: number) => {
      try {
        stripe.webhooks.constructEvent(PAYLOAD, header(timestamp), secret, 300, undefined, NOW_MS);
        return true;
      } catch {
        return false;
      }
    };
    const ours = (timestamp: number) =>
      verifySource(
        { scheme: 'stripe' },
        [secret],
        bytes(PAYLOAD),
        { 'stripe-signature': header(timestamp) },
        NOW_MS,
      );

    for (const timestamp of [NOW, NOW - 300, NOW - 301]) {
      expect(ours(timestamp)).toBe(theirs(timestamp));
    }
  });

  it('accepts any one matching v1 among several Stripe signatures, skipping v0', () => {
    const secret = `whsec_${text()}`;
    const good = stripe.webhooks.generateTestHeaderString({
      payload: PAYLOAD,
      secret,
      timestamp: NOW,
    });
    const v1 = good.split(',')[1];
    const header = `t=${NOW},v1=${'ab'.repeat(32)},v0=${'cd'.repeat(32)},${v1}`;

    expect(
      verifySource(
        { scheme: 'stripe' },
        [secret],
        bytes(PAYLOAD),
        { 'stripe-signature': header },
        NOW_MS,
      ),
    ).toBe(true);
  });

  it.each([
    ['a v1 that is not 64 hex digits', (good: string) => good.replace(/v1=../, 'v1=zz')],
    ['an item without "="', (good: string) => `${good},garbage`],
    ['an item with two "="', (good: string) => `${good},v1=a=b`],
    ['no timestamp', (good: string) => good.replace(/^t=\d+,/, '')],
    ['no v1', (good: string) => good.replace(/,v1=.*$/, '')],
  ])('refuses a Stripe header with %s', (_case, alter) => {
    const secret = `whsec_${text()}`;
    const good = stripe.webhooks.generateTestHeaderString({
      payload: PAYLOAD,
      secret,
      timestamp: NOW,
    });
    const check = (header: string) =>
      verifySource(
        { scheme: 'stripe' },
        [secret],
        bytes(PAYLOAD),
        { 'stripe-signature': header },
        NOW_MS,
      );

    expect([check(good), check(alter(good))]).toEqual([true, false]);
  });

  it('refuses a Stripe header with two timestamps', () => {
    const secret = `whsec_${text()}`;
    const good = stripe.webhooks.generateTestHeaderString({
      payload: PAYLOAD,
      secret,
      timestamp: NOW,
    });

    expect(
      verifySource(
        { scheme: 'stripe' },
        [secret],
        bytes(PAYLOAD),
        { 'stripe-signature': `t=${NOW - 1000},${good}` },
        NOW_MS,
      ),
    ).toBe(false);
  });

  it('takes the API key’s scheme name in any case', () => {
    const key = text();

    expect(
      verifySource(
        { scheme: 'api-key' },
        [key],
        bytes(PAYLOAD),
        { authorization: `bEaReR ${key}` },
        NOW_MS,
      ),
    ).toBe(true);
  });

  it('refuses an hmac signature without its configured prefix', () => {
    const secret = text();
    const hex = createHmac('sha256', secret).update(PAYLOAD).digest('hex');
    const verify: VerifySettings = {
      scheme: 'hmac',
      header: 'x-sig',
      encoding: 'hex',
      prefix: 'v1=',
    };

    expect(verifySource(verify, [secret], bytes(PAYLOAD), { 'x-sig': `v1=${hex}` }, NOW_MS)).toBe(
      true,
    );
    expect(verifySource(verify, [secret], bytes(PAYLOAD), { 'x-sig': hex }, NOW_MS)).toBe(false);
  });

  it('authenticates nothing without a secret', async () => {
    const headers = await CASES.github?.sign(text(), PAYLOAD, NOW);

    expect(verifySource({ scheme: 'github' }, [], bytes(PAYLOAD), headers ?? {}, NOW_MS)).toBe(
      false,
    );
  });
});

// Shopify's own validator (`@shopify/shopify-api`, its web-api adapter, offline) as the judge:
// the recipe the cases above sign with is read from Shopify's docs; this checks the reading.
describe('verifySource, shopify, against Shopify’s own validator', () => {
  it('agrees with shopify.webhooks.validate on signed and tampered bodies', async () => {
    const secret = 'shpss_judge_secret';
    const shopify = shopifyApi({
      apiSecretKey: secret,
      apiKey: 'key',
      scopes: [],
      hostName: 'localhost',
      apiVersion: ApiVersion.October25,
      isEmbeddedApp: false,
      logger: { level: LogSeverity.Error, log: async () => {} },
    });
    await fc.assert(
      // Not empty: Shopify's library refuses an empty body before its HMAC (ours checks the HMAC,
      // and the endpoint then refuses the body as not JSON).
      fc.asyncProperty(
        fc.string({ minLength: 1, maxLength: 300 }),
        fc.boolean(),
        async (body, tamper) => {
          const headers = {
            'x-shopify-hmac-sha256': createHmac('sha256', secret).update(body).digest('base64'),
            'x-shopify-topic': 'orders/create',
            'x-shopify-api-version': '2025-10',
            'x-shopify-shop-domain': 'shop.myshopify.com',
            'x-shopify-webhook-id': 'w-1',
          };
          const sent = tamper ? `${body}.` : body;
          const theirs = await shopify.webhooks.validate({
            rawBody: sent,
            rawRequest: new Request('https://localhost/sources/shop', { method: 'POST', headers }),
          } as Parameters<typeof shopify.webhooks.validate>[0]);
          const ours = verifySource(
            { scheme: 'shopify' },
            [secret],
            new TextEncoder().encode(sent),
            headers,
            Date.now(),
          );
          expect(ours).toBe(theirs.valid);
          expect(ours).toBe(!tamper);
        },
      ),
      { numRuns: 60 },
    );
  });
});

describe('checkSourceSecrets', () => {
  it.each([
    ['standard-webhooks', 'not-a-whsec-secret-at-all'],
    ['standard-webhooks', 'whsec_c2hvcnQ='],
    ['api-key', 'short key'],
    ['stripe', 'sk_live_51Habcdefghijklmnop'],
    ['shopify', 'shpss_secret_with_newline\n'],
    ['github', ' leading-space-secret'],
    ['github', ''],
  ] as const)(
    'refuses a %s secret that cannot work, by position, never quoting it',
    (scheme, bad) => {
      const good = scheme === 'standard-webhooks' ? whsec() : `whsec_${text()}`;
      let thrown: unknown;
      try {
        checkSourceSecrets({ scheme } as VerifySettings, [good, bad]);
      } catch (error) {
        thrown = error;
      }

      expect(thrown).toBeInstanceOf(CredentialError);
      expect((thrown as Error).message).toContain('secret #2');
      expectNoSecrets(thrown, [good, ...(bad.trim().length > 3 ? [bad.trim()] : [])]);
    },
  );

  it('accepts each scheme’s usual secrets', () => {
    expect(() => {
      checkSourceSecrets({ scheme: 'standard-webhooks' }, [whsec()]);
      checkSourceSecrets({ scheme: 'stripe' }, [`whsec_${text()}`]);
      checkSourceSecrets({ scheme: 'shopify' }, [text(), 'a secret with inner spaces']);
      checkSourceSecrets({ scheme: 'api-key' }, [text()]);
    }).not.toThrow();
  });
});

describe('readableHeaders', () => {
  it('drops every signature and credential header, the hmac scheme’s own too', () => {
    const headers = {
      'content-type': 'application/json',
      'X-Shopify-Topic': 'orders/create',
      'stripe-signature': 't=1,v1=00',
      'x-shopify-hmac-sha256': 'abc',
      'x-hub-signature-256': 'sha256=00',
      'x-hub-signature': 'sha1=00',
      'webhook-id': 'msg_1',
      'webhook-signature': 'v1,abc',
      'svix-signature': 'v1,abc',
      authorization: 'Bearer key',
      cookie: 'a=b',
      'x-custom-sig': 'abc',
      'x-absent': undefined,
    };

    expect(
      readableHeaders({ scheme: 'hmac', header: 'x-custom-sig', encoding: 'hex' }, headers),
    ).toEqual({
      'content-type': 'application/json',
      'x-shopify-topic': 'orders/create',
      'webhook-id': 'msg_1',
    });
  });

  it('drops other providers’ signature and token headers by name', () => {
    const headers = {
      'x-gitlab-token': 'glt',
      'x-api-key': 'k',
      'x-twilio-signature': 's',
      'typeform-signature': 'sha256=00',
      'x-client-secret': 'c',
      'x-github-delivery': 'd-1',
    };

    expect(readableHeaders({ scheme: 'stripe' }, headers)).toEqual({ 'x-github-delivery': 'd-1' });
  });
});

describe('refusedSourceCheck (the operator log of a 401)', () => {
  const webhook = {
    'webhook-id': 'msg_1',
    'webhook-timestamp': String(NOW),
    'webhook-signature': 'v1,AAAA',
  };
  it.each<[string, VerifySettings, number, Record<string, string>, string]>([
    ['no secret yet', { scheme: 'github' }, 0, {}, 'no secret set for this source yet'],
    ['a missing GitHub signature', { scheme: 'github' }, 1, {}, 'no x-hub-signature-256 header'],
    ['a missing Shopify HMAC', { scheme: 'shopify' }, 1, {}, 'no x-shopify-hmac-sha256 header'],
    [
      'an HMAC that matched no secret',
      { scheme: 'hmac', header: 'x-sig', encoding: 'hex' },
      2,
      { 'x-sig': 'ab' },
      'bad signature: no secret of the source signed this body (x-sig)',
    ],
    [
      'an unknown API key',
      { scheme: 'api-key' },
      1,
      { authorization: 'Bearer k' },
      'unknown API key: none of the source’s',
    ],
    [
      'incomplete Standard Webhooks headers',
      { scheme: 'standard-webhooks' },
      1,
      { 'webhook-id': 'msg_1' },
      'webhook headers incomplete (webhook-id, webhook-timestamp and webhook-signature are all needed)',
    ],
    [
      'a stale Standard Webhooks timestamp',
      { scheme: 'standard-webhooks' },
      1,
      { ...webhook, 'webhook-timestamp': String(NOW - 301) },
      "webhook-timestamp more than 300 s from the ingest's clock",
    ],
    [
      'a Standard Webhooks signature that matched no secret',
      { scheme: 'standard-webhooks' },
      1,
      webhook,
      'bad signature: no secret of the source signed this id, timestamp and body',
    ],
  ])('names %s', (_, verify, secrets, headers, check) => {
    expect(refusedSourceCheck(verify, secrets, headers, NOW_MS)).toBe(check);
  });
});
