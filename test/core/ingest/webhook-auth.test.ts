import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { Webhook } from 'standardwebhooks';
import { Webhook as SvixWebhook } from 'svix';
import { describe, expect, it } from 'vitest';
import { CredentialError } from '../../../functions/core/errors.ts';
import {
  parseApiKey,
  parseCredentials,
  parseWebhookSecret,
  signWebhook,
  verifyApiKey,
  verifyWebhook,
} from '../../../functions/core/ingest/webhook-auth.ts';

// The Standard Webhooks test vector, shared by every reference library.
const VECTOR = {
  secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
  id: 'msg_p5jXN8AQM9LWM0D4loKWxJek',
  timestamp: 1614265330,
  body: '{"test": 2432232314}',
  signature: 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
};
const key = parseWebhookSecret(VECTOR.secret);
const bytes = (text: string) => new TextEncoder().encode(text);
const headers = (signature: string, id = VECTOR.id, timestamp = String(VECTOR.timestamp)) => ({
  id,
  timestamp,
  signature,
});

describe('Standard Webhooks signing and verification', () => {
  it('reproduces the published test vector', () => {
    expect(signWebhook(key, VECTOR.id, VECTOR.timestamp, bytes(VECTOR.body))).toBe(
      VECTOR.signature,
    );
    expect(
      verifyWebhook(headers(VECTOR.signature), bytes(VECTOR.body), [key], VECTOR.timestamp),
    ).toBe(0);
  });

  it('accepts any one matching v1 signature among several, skipping unknown versions', () => {
    const other = parseWebhookSecret(`whsec_${randomBytes(32).toString('base64')}`);
    const wrong = `v1,${randomBytes(32).toString('base64')}`;
    const header = `v2,abc ${wrong} v1a,xyz ${VECTOR.signature}`;

    expect(verifyWebhook(headers(header), bytes(VECTOR.body), [other, key], VECTOR.timestamp)).toBe(
      1,
    );
  });

  it('tolerates 300 seconds of clock difference in both directions, not 301', () => {
    const at = (now: number) =>
      verifyWebhook(headers(VECTOR.signature), bytes(VECTOR.body), [key], now);

    expect([at(VECTOR.timestamp - 300), at(VECTOR.timestamp + 300)]).toEqual([0, 0]);
    expect([at(VECTOR.timestamp - 301), at(VECTOR.timestamp + 301)]).toEqual([-1, -1]);
  });

  it.each([
    ['a duplicated header joined by API Gateway', `${VECTOR.signature},${VECTOR.signature}`],
    ['a duplicated header joined by Node', `v1,AAAA, ${VECTOR.signature}`],
    ['a double space', `v1,AAAA  ${VECTOR.signature}`],
    ['an entry without a version', `${VECTOR.signature} abc`],
    ['non-base64 in a v1 entry', `v1,!!!! ${VECTOR.signature}`],
  ])('refuses a malformed signature header: %s', (_what, header) => {
    expect(verifyWebhook(headers(header), bytes(VECTOR.body), [key], VECTOR.timestamp)).toBe(-1);
  });

  it.each([
    ['milliseconds', String(VECTOR.timestamp * 1000)],
    ['a float', `${VECTOR.timestamp}.0`],
    ['a negative number', `-${VECTOR.timestamp}`],
    ['an exponent', '1.614265330e9'],
    ['padding', ` ${VECTOR.timestamp}`],
  ])('refuses a timestamp in %s', (_what, timestamp) => {
    expect(
      verifyWebhook(
        headers(VECTOR.signature, VECTOR.id, timestamp),
        bytes(VECTOR.body),
        [key],
        VECTOR.timestamp,
      ),
    ).toBe(-1);
  });

  it('verifies a correctly signed body that is not valid UTF-8, which the npm package rejects', () => {
    const body = new Uint8Array([0x7b, 0xff, 0xfe, 0x7d]);
    const signature = signWebhook(key, VECTOR.id, VECTOR.timestamp, body);
    const peer = new Webhook(VECTOR.secret);
    const now = Math.floor(Date.now() / 1000);

    expect(verifyWebhook(headers(signature), body, [key], VECTOR.timestamp)).toBe(0);
    expect(() =>
      peer.verify(Buffer.from(body), {
        'webhook-id': VECTOR.id,
        'webhook-timestamp': String(now),
        'webhook-signature': signWebhook(key, VECTOR.id, now, body),
      }),
    ).toThrow();
  });
});

describe('webhook secrets and API keys', () => {
  it.each([
    ['no prefix', 'MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'],
    ['too short (3 bytes)', 'whsec_AAAA'],
    ['too long (65 bytes)', `whsec_${Buffer.alloc(65, 1).toString('base64')}`],
    ['a trailing space', `${VECTOR.secret} `],
    ['white space inside', 'whsec_MfKQ9r8GKYqr TwjUPD8ILPZIo2LaLaSw'],
    ['truncated base64', VECTOR.secret.slice(0, -1)],
    ['url-safe base64', `whsec_${Buffer.alloc(30, 251).toString('base64url')}`],
  ])('refuses a secret with %s, without quoting it', (_what, secret) => {
    expect(() => parseWebhookSecret(secret)).toThrow(CredentialError);
    try {
      parseWebhookSecret(secret);
    } catch (error) {
      expect((error as Error).message).not.toContain(secret.slice(6, 20));
    }
  });

  it('names the bad credential by position and requires at least one', () => {
    expect(() =>
      parseCredentials({ webhookSecrets: [VECTOR.secret, 'whsec_AAAA'], apiKeys: [] }),
    ).toThrow(/webhook secret #2/);
    expect(() => parseCredentials({ webhookSecrets: [], apiKeys: ['short'] })).toThrow(
      /API key #1/,
    );
    expect(() => parseCredentials({ webhookSecrets: [], apiKeys: [] })).toThrow(/At least one/);
  });

  it('finds the API key a Bearer header carries, in constant time over digests', () => {
    const keys = [
      parseApiKey('first-api-key-0123456789'),
      parseApiKey('second-api-key-0123456789'),
    ];

    expect(verifyApiKey('Bearer second-api-key-0123456789', keys)).toBe(1);
    expect(verifyApiKey('Bearer second-api-key-012345678', keys)).toBe(-1);
    // The scheme is case-insensitive and one or more spaces follow it (RFC 9110 §11).
    expect(verifyApiKey('bearer second-api-key-0123456789', keys)).toBe(1);
    expect(verifyApiKey('BEARER first-api-key-0123456789', keys)).toBe(0);
    expect(verifyApiKey('Bearer  second-api-key-0123456789', keys)).toBe(1);
    expect(verifyApiKey('Basic second-api-key-0123456789', keys)).toBe(-1);
    expect(verifyApiKey('Bearersecond-api-key-0123456789', keys)).toBe(-1);
    expect(verifyApiKey('Bearer second-api-key-0123456789 ', keys)).toBe(-1);
    expect(verifyApiKey(undefined, keys)).toBe(-1);
  });
});

describe('differential agreement with the standardwebhooks npm package', () => {
  const secretArbitrary = fc
    .integer({ min: 24, max: 64 })
    .chain((n) => fc.uint8Array({ minLength: n, maxLength: n }));
  const idArbitrary = fc.stringMatching(/^[A-Za-z0-9_-]{1,40}$/);
  const bodyArbitrary = fc.json({ maxDepth: 3 });

  it('signs exactly as the package does, and verifies what it signs', () => {
    fc.assert(
      fc.property(
        secretArbitrary,
        idArbitrary,
        bodyArbitrary,
        fc.integer({ min: -300, max: 300 }),
        (secret, id, body, skew) => {
          const secretText = `whsec_${Buffer.from(secret).toString('base64')}`;
          const peer = new Webhook(secretText);
          const now = Math.floor(Date.now() / 1000);
          const timestamp = now + skew;
          const theirs = peer.sign(id, new Date(timestamp * 1000), body);
          const ours = signWebhook(parseWebhookSecret(secretText), id, timestamp, bytes(body));

          expect(ours).toBe(theirs);
          expect(
            verifyWebhook(
              { id, timestamp: String(timestamp), signature: theirs },
              bytes(body),
              [parseWebhookSecret(secretText)],
              now,
            ),
          ).toBe(0);
        },
      ),
      { numRuns: 1000 },
    );
  });

  it('rejects, as the package does, any change of one bit of the id, timestamp, body or signature', () => {
    fc.assert(
      fc.property(
        secretArbitrary,
        idArbitrary,
        bodyArbitrary,
        fc.constantFrom('id', 'timestamp', 'body', 'signature'),
        fc.nat(),
        (secret, id, body, part, position) => {
          const secretText = `whsec_${Buffer.from(secret).toString('base64')}`;
          const peer = new Webhook(secretText);
          const now = Math.floor(Date.now() / 1000);
          const signed = {
            id,
            timestamp: String(now),
            signature: peer.sign(id, new Date(now * 1000), body),
            body,
          };
          const flip = (text: string, alphabet: string) => {
            const i = position % text.length;
            const c = text[i] ?? '';
            const replacement = alphabet[(alphabet.indexOf(c) + 1) % alphabet.length] ?? c;
            return text.slice(0, i) + replacement + text.slice(i + 1);
          };
          const changed = { ...signed };
          if (part === 'id')
            changed.id = flip(
              id,
              'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-',
            );
          if (part === 'timestamp') changed.timestamp = String(now - 1 - (position % 299));
          if (part === 'body') changed.body = `${body} `;
          if (part === 'signature') {
            const raw = Buffer.from(signed.signature.slice(3), 'base64');
            raw[position % 32] = (raw[position % 32] ?? 0) ^ 1;
            changed.signature = `v1,${raw.toString('base64')}`;
          }

          const oursAccepts =
            verifyWebhook(changed, bytes(changed.body), [parseWebhookSecret(secretText)], now) !==
            -1;
          let theirsAccepts = true;
          try {
            peer.verify(changed.body, {
              'webhook-id': changed.id,
              'webhook-timestamp': changed.timestamp,
              'webhook-signature': changed.signature,
            });
          } catch {
            theirsAccepts = false;
          }
          expect(oursAccepts).toBe(false);
          expect(theirsAccepts).toBe(false);
        },
      ),
      { numRuns: 1000 },
    );
  });

  it('agrees on any byte body that is valid UTF-8, and alone verifies the bytes of one that is not', () => {
    fc.assert(
      fc.property(
        secretArbitrary,
        idArbitrary,
        fc.uint8Array({ maxLength: 64 }),
        (secret, id, body) => {
          const secretText = `whsec_${Buffer.from(secret).toString('base64')}`;
          const ours = signWebhook(parseWebhookSecret(secretText), id, VECTOR.timestamp, body);
          const theirs = new Webhook(secretText).sign(
            id,
            new Date(VECTOR.timestamp * 1000),
            Buffer.from(body),
          );
          const validUtf8 = Buffer.from(Buffer.from(body).toString('utf8'), 'utf8').equals(
            Buffer.from(body),
          );

          expect(
            verifyWebhook(
              headers(ours, id),
              body,
              [parseWebhookSecret(secretText)],
              VECTOR.timestamp,
            ),
          ).toBe(0);
          expect(ours === theirs).toBe(validUtf8);
        },
      ),
      { numRuns: 1000 },
    );
  });
});

describe('differential agreement with the svix npm package', () => {
  const secretArbitrary = fc
    .integer({ min: 24, max: 64 })
    .chain((n) => fc.uint8Array({ minLength: n, maxLength: n }));
  const idArbitrary = fc.stringMatching(/^[A-Za-z0-9_-]{1,40}$/);

  it('signs exactly as Svix does, and each side verifies what the other signs under svix-* headers', () => {
    fc.assert(
      fc.property(
        secretArbitrary,
        idArbitrary,
        fc.json({ maxDepth: 3 }),
        fc.integer({ min: -300, max: 300 }),
        (secret, id, body, skew) => {
          const secretText = `whsec_${Buffer.from(secret).toString('base64')}`;
          const key = parseWebhookSecret(secretText);
          const svix = new SvixWebhook(secretText);
          const now = Math.floor(Date.now() / 1000);
          const timestamp = now + skew;
          const theirs = svix.sign(id, new Date(timestamp * 1000), body);
          const ours = signWebhook(key, id, timestamp, bytes(body));

          expect(ours).toBe(theirs);
          expect(
            verifyWebhook(
              { id, timestamp: String(timestamp), signature: theirs },
              bytes(body),
              [key],
              now,
            ),
          ).toBe(0);
          expect(() =>
            svix.verify(body, {
              'svix-id': id,
              'svix-timestamp': String(timestamp),
              'svix-signature': ours,
            }),
          ).not.toThrow();
        },
      ),
      { numRuns: 500 },
    );
  });

  it('rejects, as Svix does, a signature with one bit changed or made with another secret', () => {
    fc.assert(
      fc.property(
        secretArbitrary,
        secretArbitrary,
        idArbitrary,
        fc.json({ maxDepth: 3 }),
        fc.nat(31),
        (secret, otherSecret, id, body, position) => {
          const secretText = `whsec_${Buffer.from(secret).toString('base64')}`;
          const otherText = `whsec_${Buffer.from(otherSecret).toString('base64')}`;
          fc.pre(secretText !== otherText);
          const now = Math.floor(Date.now() / 1000);
          const raw = Buffer.from(
            new SvixWebhook(secretText).sign(id, new Date(now * 1000), body).slice(3),
            'base64',
          );
          raw[position] = (raw[position] ?? 0) ^ 1;
          const flipped = `v1,${raw.toString('base64')}`;
          const foreign = new SvixWebhook(otherText).sign(id, new Date(now * 1000), body);

          for (const signature of [flipped, foreign]) {
            const ours = verifyWebhook(
              { id, timestamp: String(now), signature },
              bytes(body),
              [parseWebhookSecret(secretText)],
              now,
            );
            let theirsAccepts = true;
            try {
              new SvixWebhook(secretText).verify(body, {
                'svix-id': id,
                'svix-timestamp': String(now),
                'svix-signature': signature,
              });
            } catch {
              theirsAccepts = false;
            }
            expect(ours).toBe(-1);
            expect(theirsAccepts).toBe(false);
          }
        },
      ),
      { numRuns: 500 },
    );
  });
});
