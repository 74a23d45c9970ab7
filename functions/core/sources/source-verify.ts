/**
 * How a source (contract §6) proves that a webhook comes from its sender: each provider's own
 * signature scheme, checked on the raw body bytes in constant time, with several secrets at once
 * for rotation (any one valid passes). Header names are lower-case, as `IngestRequest` has them.
 */

import { createHmac, timingSafeEqual } from 'node:crypto';
import { CredentialError } from '../errors.ts';
import {
  parseApiKey,
  parseWebhookSecret,
  standardWebhookHeaders,
  verifyApiKey,
  verifyWebhook,
} from '../ingest/webhook-auth.ts';
import * as z from '../zod.ts';

const VERIFY_SCHEMES = [
  'standard-webhooks',
  'stripe',
  'shopify',
  'github',
  'hmac',
  'api-key',
] as const;
export type VerifyScheme = (typeof VERIFY_SCHEMES)[number];

/** A source's `verify` settings without its secrets, which travel apart (they may come from Secrets Manager). */
export type VerifySettings =
  | { scheme: Exclude<VerifyScheme, 'hmac'> }
  | {
      scheme: 'hmac';
      /** The header carrying the signature, lower-case. */
      header: string;
      encoding: 'hex' | 'base64';
      /** Text before the encoded signature in the header, e.g. `sha256=`. */
      prefix?: string | undefined;
    };

type Headers = Readonly<Record<string, string | undefined>>;

/** Stripe's and Standard Webhooks' tolerance: a signature more than 300 s from now is refused. */
const TIMESTAMP_TOLERANCE_SECONDS = 300;
const HEX_SHA256 = /^[0-9a-fA-F]{64}$/;
const BASE64_SHA256 = /^[A-Za-z0-9+/]{43}=$/;
const TIMESTAMP = /^\d{1,12}$/;
/** What an HMAC secret may be: no control characters, no white space at either end (a pasted newline). */
const HMAC_SECRET = /^(?=\S)[^\p{Cc}]{1,1024}(?<=\S)$/u;

/**
 * True when the request is signed by one of `secrets` under the scheme. Malformed headers,
 * unknown formats and stale timestamps are simply false: the caller answers one 401 whatever
 * failed. `secrets` must have passed `checkSourceSecrets`.
 */
export function verifySource(
  verify: VerifySettings,
  secrets: ReadonlyArray<string>,
  raw: Uint8Array,
  headers: Headers,
  nowMs: number,
): boolean {
  const nowSeconds = Math.floor(nowMs / 1000);
  switch (verify.scheme) {
    case 'standard-webhooks': {
      const keys = secrets.map((secret) => parseWebhookSecret(secret));
      return verifyWebhook(standardWebhookHeaders(headers), raw, keys, nowSeconds) !== -1;
    }
    case 'stripe':
      return verifyStripe(headers[signatureHeader(verify)], secrets, raw, nowSeconds);
    case 'shopify':
      // https://shopify.dev/docs/apps/build/webhooks/subscribe/https#step-5-verify-the-webhook
      return anyMatches(decodeBase64(headers[signatureHeader(verify)]), secrets, raw);
    case 'github':
      // https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries
      return anyMatches(decodeHex(headers[signatureHeader(verify)], 'sha256='), secrets, raw);
    case 'hmac': {
      const { encoding, prefix = '' } = verify;
      const decode = encoding === 'hex' ? decodeHex : decodeBase64;
      return anyMatches(decode(headers[signatureHeader(verify)], prefix), secrets, raw);
    }
    case 'api-key': {
      const digests = secrets.map((secret) => parseApiKey(secret));
      return verifyApiKey(headers[signatureHeader(verify)], digests) !== -1;
    }
  }
}

/** The header each scheme's signature or key comes in (Standard Webhooks: its three). */
const SIGNATURE_HEADER: Readonly<Record<string, string>> = {
  stripe: 'stripe-signature',
  shopify: 'x-shopify-hmac-sha256',
  github: 'x-hub-signature-256',
  'api-key': 'authorization',
};

/** The header a scheme other than Standard Webhooks reads its signature or key from. */
function signatureHeader(verify: VerifySettings): string {
  return verify.scheme === 'hmac' ? verify.header : (SIGNATURE_HEADER[verify.scheme] as string);
}

/**
 * Which check refused a request `verifySource` refused, for the operator's log: no secret set,
 * a missing header, a stale timestamp, or a signature or key that matched none. Headers are
 * named, never their values, and no secret is involved beyond counting them.
 */
export function refusedSourceCheck(
  verify: VerifySettings,
  secrets: number,
  headers: Headers,
  nowMs: number,
): string {
  if (secrets === 0) return 'no secret set for this source yet';
  const nowSeconds = Math.floor(nowMs / 1000);
  if (verify.scheme === 'standard-webhooks') {
    const { id, timestamp, signature } = standardWebhookHeaders(headers);
    if (id === undefined || timestamp === undefined || signature === undefined)
      return 'webhook headers incomplete (webhook-id, webhook-timestamp and webhook-signature are all needed)';
    if (Math.abs(nowSeconds - Number(timestamp)) > TIMESTAMP_TOLERANCE_SECONDS)
      return `webhook-timestamp more than ${TIMESTAMP_TOLERANCE_SECONDS} s from the ingest's clock`;
    return 'bad signature: no secret of the source signed this id, timestamp and body';
  }
  const header = signatureHeader(verify);
  const value = headers[header];
  if (value === undefined) return `no ${header} header`;
  if (verify.scheme === 'stripe') {
    const timestamp = parseStripeHeader(value)?.timestamp;
    if (timestamp === undefined) return 'stripe-signature malformed (no t= and v1= parts)';
    if (Math.abs(nowSeconds - Number(timestamp)) > TIMESTAMP_TOLERANCE_SECONDS)
      return `stripe-signature's timestamp more than ${TIMESTAMP_TOLERANCE_SECONDS} s from the ingest's clock`;
  }
  return verify.scheme === 'api-key'
    ? 'unknown API key: none of the source’s'
    : `bad signature: no secret of the source signed this body (${header})`;
}

/**
 * Throws a `CredentialError` naming the first secret that cannot work under the scheme by its
 * position (never its value): a bad secret would refuse every webhook, so it is refused when
 * loaded.
 */
export function checkSourceSecrets(verify: VerifySettings, secrets: ReadonlyArray<string>): void {
  secrets.forEach((secret, index) => {
    const name = `secret #${index + 1}`;
    if (verify.scheme === 'standard-webhooks') parseWebhookSecret(secret, name);
    else if (verify.scheme === 'api-key') parseApiKey(secret, name);
    else if (!HMAC_SECRET.test(secret)) {
      throw new CredentialError(
        `The ${name} must be 1 to 1024 characters, without control characters or white space at either end`,
      );
    } else if (verify.scheme === 'stripe' && !secret.startsWith('whsec_')) {
      // Stripe's signing secrets all start so; another value is most likely the API key.
      throw new CredentialError(`The ${name} must be a Stripe signing secret ("whsec_…")`);
    }
  });
}

/** Headers that carry a signature or a credential under some scheme: never given to a mapping. */
const CREDENTIAL_HEADERS = [
  'authorization',
  'proxy-authorization',
  'cookie',
  'stripe-signature',
  'x-shopify-hmac-sha256',
  'x-hub-signature',
  'x-hub-signature-256',
  'webhook-signature',
  'svix-signature',
];

/**
 * Other providers' signature and credential headers (`x-gitlab-token`, `x-api-key`,
 * `x-twilio-signature`, `typeform-signature` on a source verified another way): hidden by name.
 */
const CREDENTIAL_NAME = /signature|token|secret|api-key|apikey|auth/;

/**
 * The headers a mapping may read: every header but those carrying a signature or a credential
 * (whatever the scheme, and the `hmac` scheme's own), names lower-cased. They are what a
 * `mapping_failed` dead letter keeps, so a redrive maps with what the first try saw.
 */
export function readableHeaders(verify: VerifySettings, headers: Headers): Record<string, string> {
  const hidden = new Set(CREDENTIAL_HEADERS);
  if (verify.scheme === 'hmac') hidden.add(verify.header.toLowerCase());
  const readable: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    const lower = name.toLowerCase();
    const credential = hidden.has(lower) || CREDENTIAL_NAME.test(lower);
    if (value !== undefined && !credential) readable[lower] = value;
  }
  return readable;
}

/**
 * Stripe: `t=<unix>,v1=<hex>[,v1=<hex>…]`, HMAC-SHA256 of `"<t>.<raw body>"` keyed with the whole
 * secret string. Stripe's own `constructEvent` refuses only old timestamps (age > 300 s) and
 * accepts any future one; this refuses both directions, as the contract's "within 300 s" and
 * Standard Webhooks do, so a signature cannot be made to live longer by dating it ahead.
 */
function verifyStripe(
  header: string | undefined,
  secrets: ReadonlyArray<string>,
  raw: Uint8Array,
  nowSeconds: number,
): boolean {
  const parsed = header === undefined ? undefined : parseStripeHeader(header);
  if (parsed === undefined || parsed.signatures.length === 0) return false;
  if (Math.abs(nowSeconds - Number(parsed.timestamp)) > TIMESTAMP_TOLERANCE_SECONDS) return false;
  let found = false;
  for (const secret of secrets) {
    const expected = createHmac('sha256', secret)
      .update(`${parsed.timestamp}.`)
      .update(raw)
      .digest();
    // No early exit: the work done does not depend on which secret or signature matched.
    for (const candidate of parsed.signatures)
      found = timingSafeEqual(expected, candidate) || found;
  }
  return found;
}

/** The timestamp and v1 signatures of a `Stripe-Signature`; undefined when malformed. */
function parseStripeHeader(
  header: string,
): { timestamp: string; signatures: Buffer[] } | undefined {
  let timestamp: string | undefined;
  const signatures: Buffer[] = [];
  for (const item of header.split(',')) {
    const [key, value, ...rest] = item.trim().split('=');
    if (value === undefined || rest.length > 0 || !/^[a-z0-9]+$/.test(key ?? '')) return undefined;
    if (key === 't') {
      if (timestamp !== undefined || !TIMESTAMP.test(value)) return undefined;
      timestamp = value;
    } else if (key === 'v1') {
      if (!HEX_SHA256.test(value)) return undefined;
      signatures.push(Buffer.from(value, 'hex'));
    }
    // Other schemes (Stripe's test-mode `v0`) are skipped, as Stripe's library does.
  }
  return timestamp === undefined ? undefined : { timestamp, signatures };
}

/** Whether `signature` is the HMAC-SHA256 of the body under any of the secrets, in constant time. */
function anyMatches(
  signature: Buffer | undefined,
  secrets: ReadonlyArray<string>,
  raw: Uint8Array,
): boolean {
  if (signature === undefined) return false;
  let found = false;
  for (const secret of secrets) {
    const expected = createHmac('sha256', secret).update(raw).digest();
    found = timingSafeEqual(expected, signature) || found;
  }
  return found;
}

/** The 32 bytes of `<prefix><64 hex digits>`; undefined for anything else, so lengths always match. */
function decodeHex(value: string | undefined, prefix = ''): Buffer | undefined {
  if (value === undefined || !value.startsWith(prefix)) return undefined;
  const hex = value.slice(prefix.length);
  return HEX_SHA256.test(hex) ? Buffer.from(hex, 'hex') : undefined;
}

/** The 32 bytes of `<prefix><strict base64>`; undefined for anything else. */
function decodeBase64(value: string | undefined, prefix = ''): Buffer | undefined {
  if (value === undefined || !value.startsWith(prefix)) return undefined;
  const base64 = value.slice(prefix.length);
  return BASE64_SHA256.test(base64) ? Buffer.from(base64, 'base64') : undefined;
}

// ——— The document's shape of `verify` ———

/** A header name as HTTP allows it (RFC 9110 token). */
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$/;
const secretFields = () => ({
  secret: z.optional(z.string()),
  secrets: z.optional(z.array(z.string()).check(z.minLength(1), z.maxLength(10))),
});
const plainScheme = <S extends Exclude<VerifyScheme, 'hmac'>>(scheme: S) =>
  z.strictObject({ scheme: z.literal(scheme), ...secretFields() });

/**
 * `verify` as the sources document gives it (contract §6), secrets included: a new schema at
 * each call, made only where a sources document is read (not at import: zod's schemas cost INIT
 * time, and most functions read none).
 */
export const verifySchema = () =>
  z
    .discriminatedUnion('scheme', [
      plainScheme('standard-webhooks'),
      plainScheme('stripe'),
      plainScheme('shopify'),
      plainScheme('github'),
      plainScheme('api-key'),
      z.strictObject({
        scheme: z.literal('hmac'),
        header: z.string().check(z.regex(HEADER_NAME, 'must be an HTTP header name')),
        encoding: z.enum(['hex', 'base64']),
        prefix: z.optional(
          z.string().check(z.regex(/^[\x21-\x7e]{1,64}$/, 'must be 1 to 64 printable characters')),
        ),
        ...secretFields(),
      }),
    ])
    .check(
      z.refine((verify) => verify.secret === undefined || verify.secrets === undefined, {
        message: 'give "secret" or "secrets", not both',
      }),
    );
