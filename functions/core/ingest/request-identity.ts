import { createHash } from 'node:crypto';

import type { RequestIdentity } from '../ports.ts';

/** The authenticated sender, as far as de-duplication needs it. */
export type AuthenticatedSender =
  | { kind: 'webhook'; webhookId: string }
  | { kind: 'api-key'; keyDigest: Buffer };

/**
 * The identity of a request, or undefined when it has none (an API-key request without an
 * `Idempotency-Key` header). A signed request is its `webhook-id` whichever secret signed it, so
 * a retry signed after a rotation is the same request. An API-key request is the key and its
 * `Idempotency-Key`; the key enters only as its SHA-256 digest, and the two kinds live in
 * separate name spaces, so an API-key sender cannot collide with, or probe, a signed sender's ids.
 */
export function requestIdentity(
  sender: AuthenticatedSender,
  idempotencyKey: string | undefined,
  body: Uint8Array,
): RequestIdentity | undefined {
  const bodyHash = createHash('sha256').update(body).digest('base64');
  if (sender.kind === 'webhook') return { key: `webhook:${sender.webhookId}`, bodyHash };
  if (idempotencyKey === undefined || idempotencyKey.trim() === '') return undefined;
  return {
    key: `api-key:${sender.keyDigest.toString('hex')}:${idempotencyKey}`,
    bodyHash,
  };
}
