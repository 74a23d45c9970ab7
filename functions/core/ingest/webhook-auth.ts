import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { CredentialError } from '../errors.ts';
import type { IngestCredentials } from '../ports.ts';

/** Signatures older or newer than this are refused (Standard Webhooks: ±5 minutes). */
const TIMESTAMP_TOLERANCE_SECONDS = 300;

const SECRET_PREFIX = 'whsec_';
const STRICT_BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
// Printable ASCII without '.', ',' or space: '.' separates the signed parts, and ',' is how
// API Gateway joins a duplicated header, so an id holding either cannot be trusted.
const WEBHOOK_ID = /^[\x21-\x2b\x2d\x2f-\x7e]{1,124}$/;
const TIMESTAMP = /^\d{1,12}$/;

/**
 * Checks a Standard Webhooks secret (`whsec_` + strict base64 of 24 to 64 bytes, no white
 * space) and returns the HMAC key. A secret that fails would make every delivery fail, or
 * worse, sign with a weak key, so it is refused when loaded.
 */
export function parseWebhookSecret(secret: string, name = 'webhook secret'): Buffer {
  if (!secret.startsWith(SECRET_PREFIX))
    throw new CredentialError(`The ${name} must start with "whsec_"`);
  const encoded = secret.slice(SECRET_PREFIX.length);
  if (!STRICT_BASE64.test(encoded)) {
    throw new CredentialError(
      `The ${name} must be "whsec_" followed by base64 without white space`,
    );
  }
  const key = Buffer.from(encoded, 'base64');
  if (key.length < 24 || key.length > 64) {
    throw new CredentialError(`The ${name} must encode 24 to 64 bytes, not ${key.length}`);
  }
  return key;
}

/** Checks an API key (at least 16 printable characters, no white space) and returns its digest. */
export function parseApiKey(apiKey: string, name = 'API key'): Buffer {
  if (!/^[\x21-\x7e]{16,256}$/.test(apiKey)) {
    throw new CredentialError(
      `The ${name} must be 16 to 256 printable characters without white space`,
    );
  }
  return sha256(apiKey);
}

/** The Standard Webhooks v1 signature of one message: `v1,<base64 HMAC-SHA256>`. */
export function signWebhook(key: Buffer, id: string, timestamp: number, body: Uint8Array): string {
  return `v1,${hmac(key, id, String(timestamp), body).toString('base64')}`;
}

/** The three Standard Webhooks headers of a request, as received (undefined when absent). */
export interface WebhookHeaders {
  id: string | undefined;
  timestamp: string | undefined;
  signature: string | undefined;
}

/**
 * The Standard Webhooks headers, or Svix's names for them (`svix-*`), taken whole from one
 * family, as the ingest does (contract §1): any `webhook-*` header picks the standard names.
 */
export function standardWebhookHeaders(
  headers: Readonly<Record<string, string | undefined>>,
): WebhookHeaders {
  const standard =
    headers['webhook-id'] !== undefined ||
    headers['webhook-timestamp'] !== undefined ||
    headers['webhook-signature'] !== undefined;
  const prefix = standard ? 'webhook' : 'svix';
  return {
    id: headers[`${prefix}-id`],
    timestamp: headers[`${prefix}-timestamp`],
    signature: headers[`${prefix}-signature`],
  };
}

/**
 * Verifies a Standard Webhooks request over its raw body bytes. Returns the index of the key
 * that signed it, or -1. It refuses malformed headers outright (a duplicated header, joined with
 * a comma by API Gateway, included) and timestamps more than 300 s from `nowSeconds` either way;
 * unknown signature versions are skipped, as the spec says. Comparison is constant-time on
 * decoded, equal-length buffers.
 *
 * Unlike the `standardwebhooks` npm package, which hashes the body after decoding it as UTF-8,
 * this hashes the bytes as sent, so a correctly signed body that is not valid UTF-8 verifies
 * (it is then refused as invalid JSON, not as unauthenticated).
 */
export function verifyWebhook(
  headers: WebhookHeaders,
  body: Uint8Array,
  keys: ReadonlyArray<Buffer>,
  nowSeconds: number,
): number {
  const { id, timestamp, signature } = headers;
  if (id === undefined || timestamp === undefined || signature === undefined) return -1;
  if (!WEBHOOK_ID.test(id) || !TIMESTAMP.test(timestamp)) return -1;
  if (Math.abs(nowSeconds - Number(timestamp)) > TIMESTAMP_TOLERANCE_SECONDS) return -1;
  const candidates = parseSignatures(signature);
  if (candidates === undefined || candidates.length === 0) return -1;
  let match = -1;
  keys.forEach((key, index) => {
    const expected = hmac(key, id, timestamp, body);
    for (const candidate of candidates) {
      // No early exit: the work done does not depend on which key or signature matched.
      if (timingSafeEqual(expected, candidate) && match === -1) match = index;
    }
  });
  return match;
}

/**
 * Finds the API key that `authorization` (`Bearer <key>`, any case of `Bearer`) carries: its index, or -1. Keys are
 * compared as SHA-256 digests, so the comparison is constant-time whatever their lengths.
 */
export function verifyApiKey(
  authorization: string | undefined,
  keyDigests: ReadonlyArray<Buffer>,
): number {
  // The scheme name is case-insensitive (RFC 9110 §11.1); one or more spaces follow it.
  const presented = authorization?.match(/^Bearer +([\x21-\x7e]{1,256})$/i)?.[1];
  if (presented === undefined) return -1;
  const digest = sha256(presented);
  let match = -1;
  keyDigests.forEach((keyDigest, index) => {
    if (timingSafeEqual(digest, keyDigest) && match === -1) match = index;
  });
  return match;
}

/**
 * Which check refused a request that neither a signature nor an API key let in, for the
 * operator's log (the sender's answer is the same whatever failed): the Standard Webhooks
 * headers' and the Authorization header's, joined. Never a value of a credential, the request's
 * or the relay's; a timestamp's distance from the clock is said, to show a skewed clock.
 */
export function refusedCheck(
  headers: WebhookHeaders,
  authorization: string | undefined,
  nowSeconds: number,
): string {
  const { id, timestamp, signature } = headers;
  const signed = id !== undefined || timestamp !== undefined || signature !== undefined;
  if (!signed && authorization === undefined)
    return 'no credential: neither the webhook-id, webhook-timestamp and webhook-signature headers nor an Authorization header';
  const checks: string[] = [];
  if (id === undefined || timestamp === undefined || signature === undefined) {
    if (signed)
      checks.push(
        'webhook headers incomplete (webhook-id, webhook-timestamp and webhook-signature are all needed)',
      );
  } else if (!WEBHOOK_ID.test(id)) checks.push('webhook-id malformed');
  else if (!TIMESTAMP.test(timestamp)) checks.push('webhook-timestamp is not whole seconds');
  else if (Math.abs(nowSeconds - Number(timestamp)) > TIMESTAMP_TOLERANCE_SECONDS)
    checks.push(
      `webhook-timestamp ${Number(timestamp) - nowSeconds} s from the ingest's clock (at most ±${TIMESTAMP_TOLERANCE_SECONDS} s)`,
    );
  else if (!parseSignatures(signature)?.length)
    checks.push('webhook-signature malformed (no "v1,<base64>" signature)');
  else
    checks.push('bad signature: no webhook secret of the relay signed this id, timestamp and body');
  if (authorization !== undefined)
    checks.push(
      /^Bearer +[\x21-\x7e]{1,256}$/i.test(authorization)
        ? "unknown API key: none of the relay's"
        : 'Authorization is not "Bearer <API key>"',
    );
  return checks.join('; ');
}

/** The decoded v1 signatures, or undefined when the header is malformed. */
function parseSignatures(header: string): Buffer[] | undefined {
  const signatures: Buffer[] = [];
  for (const entry of header.split(' ')) {
    const parts = entry.split(',');
    if (parts.length !== 2 || parts[0] === '' || parts[1] === undefined) return undefined;
    if (parts[0] !== 'v1') continue;
    if (!STRICT_BASE64.test(parts[1])) return undefined;
    const decoded = Buffer.from(parts[1], 'base64');
    // A v1 signature of another length cannot match; skipping it keeps timingSafeEqual safe.
    if (decoded.length === 32) signatures.push(decoded);
  }
  return signatures;
}

function hmac(key: Buffer, id: string, timestamp: string, body: Uint8Array): Buffer {
  return createHmac('sha256', key).update(`${id}.${timestamp}.`).update(body).digest();
}

function sha256(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}

/** A credential as the webhook secret stores it: its stable id and its value. */
interface IdentifiedCredential {
  id: string;
  value: string;
}

/**
 * The stable id of a credential given as a bare value (`WEBHOOK_SECRET`, `INGEST_API_KEYS`):
 * `env-` and 16 hex digits of a SHA-256 over the kind and the value, under a label of its own.
 * The same value gets the same id whatever its place in the list, so a label and a ledger key
 * never move to another credential. It gives nothing usable away: 64 bits of a digest cannot be
 * inverted, a webhook secret carries at least 192 bits of chance (24 bytes, checked), and an
 * API key that could be guessed could be tried against the request ids the de-duplication table
 * already holds (the whole SHA-256 of the key, `request-identity.ts`), which say more.
 */
export function credentialIdOf(kind: 'webhook_secret' | 'api_key', value: string): string {
  const digest = createHash('sha256').update(`mautic-batch-relay sender id\n${kind}\n${value}`);
  return `env-${digest.digest('hex').slice(0, 16)}`;
}

type CredentialList = ReadonlyArray<string | IdentifiedCredential>;

/**
 * Checks every configured credential and returns the keys the ingest compares against, each
 * with its stable id (a bare value's is `credentialIdOf`). Throws a `CredentialError` naming the
 * bad one by position (never its value), so a bad deploy stops at cold start.
 */
export function parseCredentials(config: {
  webhookSecrets: CredentialList;
  apiKeys: CredentialList;
}): IngestCredentials {
  if (config.webhookSecrets.length === 0 && config.apiKeys.length === 0) {
    throw new CredentialError('At least one webhook secret or API key must be configured');
  }
  const identified = (list: CredentialList, kind: 'webhook_secret' | 'api_key') =>
    list.map((entry) =>
      typeof entry === 'string' ? { id: credentialIdOf(kind, entry), value: entry } : entry,
    );
  const secrets = identified(config.webhookSecrets, 'webhook_secret');
  const keys = identified(config.apiKeys, 'api_key');
  return {
    webhookKeys: secrets.map(({ value }, i) =>
      parseWebhookSecret(value, `webhook secret #${i + 1}`),
    ),
    webhookIds: secrets.map(({ id }) => id),
    apiKeyDigests: keys.map(({ value }, i) => parseApiKey(value, `API key #${i + 1}`)),
    apiKeyIds: keys.map(({ id }) => id),
  };
}
