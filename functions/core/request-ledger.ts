import { createHash } from 'node:crypto';

/**
 * What identifies a request for de-duplication (contract §1, Idempotency): `key` names the
 * request, `bodyHash` tells a retry (same body) from a reuse of the id (another body).
 */
export interface RequestIdentity {
  key: string;
  bodyHash: string;
}

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

/** What the ledger made of a request. */
export type LedgerOutcome<T> =
  /** First time (or the last try left the id free): `accept` ran and this is what it gave. */
  | { kind: 'accepted'; result: T }
  /** Accepted before within the window: the first answer, and `accept` did not run. */
  | { kind: 'replayed'; status: number; body: string }
  /** The same id is being handled right now. */
  | { kind: 'in_progress' }
  /** The same id was accepted with another body. */
  | { kind: 'reused' }
  /** The store could not be asked: nothing ran. */
  | { kind: 'unavailable' };

/** The answer `accept` gives: only one `remember`ed is kept; any other leaves the id free. */
export interface LedgerAnswer {
  status: number;
  /** The serialised body, replayed byte for byte. */
  body: string;
  remember: boolean;
}

/** Remembers accepted requests for a window, so a retried or replayed one takes effect once. */
export interface RequestLedger {
  once<T extends LedgerAnswer>(
    identity: RequestIdentity,
    accept: () => Promise<T>,
    options: { remainingTimeMs: number | undefined; requestId: string | undefined },
  ): Promise<LedgerOutcome<T>>;
}
