/**
 * Every interface core depends on, in one place. Implementations (the Mautic client, the AWS
 * adapters, the local stand-ins, test fakes) import from here; this module imports no
 * implementation, only plain data types.
 */
import type { ContactAction, QueuedEvent } from './events.ts';
import type { EmittedMetricName, UnitOf } from './metrics.ts';
import type { ClientSecret, TokenSecret } from './token-secret.ts';

// --- time and HTTP -------------------------------------------------------------------------

/** A source of the current time in epoch milliseconds. */
export interface Clock {
  now(): number;
}

/** The part of `fetch` the Mautic client uses; inject `globalThis.fetch` or a test double. */
export type FetchLike = (url: string, init: RequestInit) => Promise<Response>;

// --- Mautic ---------------------------------------------------------------------------------

/** What became of one item of a batch call. */
export type ItemResult =
  | {
      kind: 'delivered';
      /** Mautic's per-item status: 201 created, 200 updated or deleted; 404 for a delete of an id Mautic does not have, which counts as done. */
      status: number;
      /** The record's id in Mautic. */
      id: number;
    }
  | {
      kind: 'rejected';
      /** Mautic's per-item status: 400/422 validation, 403 not allowed, 404 not found, … */
      status: number;
      message: string;
      /** Mautic's `details`, e.g. `{ email: ['x is invalid.'] }`, when it sent any. */
      details?: unknown;
    };

/** Per call: the bearer token and an optional signal (e.g. aborted at the Lambda deadline). */
export interface CallOptions {
  accessToken: string;
  signal?: AbortSignal | undefined;
}

/** Mautic's batch API as the delivery needs it; `MauticApiClient` implements it. */
export interface MauticBatchApi {
  create(
    entity: string,
    items: ReadonlyArray<Record<string, unknown>>,
    call: CallOptions,
  ): Promise<ItemResult[]>;
  edit(
    entity: string,
    items: ReadonlyArray<Record<string, unknown> & { id: number }>,
    call: CallOptions,
  ): Promise<ItemResult[]>;
  delete(entity: string, ids: ReadonlyArray<number>, call: CallOptions): Promise<ItemResult[]>;
  /**
   * The ids of the contacts whose `field` equals each value, exactly (never a look-alike): keyed
   * by the value trimmed and lower-cased, every value present (an empty list when none matches).
   * As few calls as Mautic's request-line limit allows.
   */
  findContacts(
    field: string,
    values: ReadonlyArray<string>,
    call: CallOptions,
  ): Promise<Map<string, number[]>>;
  /** Adds contacts to one segment in one call: one result per contact id, in order. */
  addToSegment(
    segmentId: number,
    contactIds: ReadonlyArray<number>,
    call: CallOptions,
  ): Promise<ItemResult[]>;
  /**
   * One integrator action on one contact, through the endpoint Mautic has for it (contract §5):
   * `removeFromSegment`, `addToCampaign`, `removeFromCampaign`, `addPoints`, `linkCompany`,
   * `unlinkCompany`. A refusal about the contact or the target (400, 404) is a rejected result.
   */
  contactAction(
    action: ContactAction,
    contactId: number,
    fields: ActionFields,
    call: CallOptions,
  ): Promise<ItemResult>;
}

/** The fields an integrator action carries beside its contact (contract §5). */
export interface ActionFields {
  segmentId?: number | undefined;
  campaignId?: number | undefined;
  companyId?: number | undefined;
  points?: number | undefined;
  /** `addDoNotContact` / `removeDoNotContact` as a contact item carries it; reason 0 lifts it. */
  doNotContact?: { channel: string; reason: 0 | 1 | 2 | 3; comments?: string } | undefined;
}

/**
 * Remembers the non-idempotent actions sent to Mautic, by event (contract §2: `addPoints` at
 * most once per event). Every method throws when the store cannot be asked.
 */
export interface ActionLedger {
  /**
   * Claims the key before the call: `claimed` the first time (go ahead), `done` when a call
   * with this key was applied, `unknown` when it was claimed before and its outcome never
   * recorded (an answer lost, a crash): it must not be sent again blindly.
   */
  claim(key: string): Promise<'claimed' | 'done' | 'unknown'>;
  /** After the call was applied: later claims answer `done`. */
  complete(key: string): Promise<void>;
  /** After a call that certainly was not applied: the key is free again. */
  release(key: string): Promise<void>;
}

/** Tokens from one successful grant. */
export interface MauticTokens {
  accessToken: string;
  /** When the access token stops working (epoch ms), from `expires_in` and the clock. */
  accessTokenExpiresAt: number;
  /** Present only when Mautic issued one (never for client_credentials). */
  refreshToken?: string;
  /** Mautic sends `null` (or `""` when the authorize request carried an empty scope). */
  scope: string | null;
  /** When the grant was answered (epoch ms). */
  obtainedAt: number;
  /** Mautic's version, from the answer's `Mautic-Version` header, when it sent one. */
  mauticVersion?: string;
}

/** Mautic's token endpoint for one credential; `MauticOAuthClient` implements it. */
export interface TokenGranter {
  clientCredentials(): Promise<MauticTokens>;
  refresh(refreshToken: string): Promise<MauticTokens>;
}

// --- tokens ---------------------------------------------------------------------------------

/** Where the batch function gets Mautic's access token; it never refreshes tokens itself. */
export interface TokenSource {
  /**
   * A usable access token. `fresh` bypasses any cache (after a 401); `refused` is a token Mautic
   * refused again after a fresh read: a newer one is needed. A missing, expired or refused token
   * is waited for (the refresher asked) until `waitUntil` (epoch ms) at most; then it throws.
   */
  accessToken(options?: { fresh?: boolean; refused?: string; waitUntil?: number }): Promise<string>;
}

/** When the stored tokens were written and when the access token expires: never the tokens. */
export interface StoredTokens {
  updatedAt: string;
  accessTokenExpiresAt: string;
}

/** One run of the refresher as its caller sees it (`RefreshOutcome` fits). */
export interface RefreshReport {
  action: 'none' | 'refreshed' | 'failed';
  why?: string;
  grant?: string;
  stored?: StoredTokens;
}

/** What the refresher answered: never the tokens, only when the stored ones were written. */
export type RefreshAnswer =
  | { kind: 'busy' }
  | {
      kind: 'answered';
      action: 'none' | 'refreshed' | 'failed';
      why?: string;
      stored?: StoredTokens;
    };

/** Runs the token refresher (the single writer of tokens) now and waits for its answer. */
export interface RefreshRequester {
  /**
   * `staleUpdatedAt`: the `updatedAt` of the tokens the caller found unusable (`null`: none), so
   * the refresher can skip the token call when newer ones are stored. 'busy': another run holds
   * the refresher (reserved concurrency 1 throttled this one).
   */
  refreshNow(
    request: { reason: string; staleUpdatedAt: string | null },
    timeoutMs: number,
  ): Promise<RefreshAnswer>;
}

/** The stored token secret, as readers see it (cached unless `fresh`). */
export interface TokenReader {
  read(options: { fresh: boolean }): Promise<TokenSecret | undefined>;
}

/** The two secrets of one environment, as the refresher sees them. */
export interface TokenVault {
  /** The operator's credential. */
  readClient(): Promise<{ client: ClientSecret }>;
  /** The current tokens, or none yet, with the id of the version read. */
  readToken(): Promise<{ token: TokenSecret | undefined; versionId: string | undefined }>;
  /**
   * The version labelled AWSPENDING (the last one put), or none: after a write whose stage move
   * failed, it holds tokens Mautic already handed out that are not yet current.
   */
  readPending(): Promise<{ token: TokenSecret; versionId: string } | undefined>;
  /**
   * Makes `token` the current version, but only if `basedOn` still is (a compare-and-swap):
   * 'superseded' when another writer (the `authorize` command) wrote in between. The same
   * `requestToken` with the same content is idempotent, so a retried write adds no version.
   */
  writeToken(
    token: TokenSecret,
    requestToken: string,
    basedOn: string | undefined,
  ): Promise<'written' | 'superseded'>;
}

// --- ingest ---------------------------------------------------------------------------------

/** The keys a request may be authenticated with: HMAC keys and API key digests. */
export interface IngestCredentials {
  webhookKeys: ReadonlyArray<Buffer>;
  apiKeyDigests: ReadonlyArray<Buffer>;
}

// --- queues ---------------------------------------------------------------------------------

/** One queue message: a queued event, serialised, with its FIFO group and deduplication id. */
export interface OutgoingMessage {
  eventId: string;
  body: string;
  /** The record's message group: the queue hands a group's messages out in order, one at a time. */
  groupId: string;
  /** Unique per message of one request: a send SQS is asked to repeat queues it once. */
  deduplicationId: string;
  /** What its `queued` outcome says (contract §1.6), read without parsing `body` again. */
  event?: Pick<QueuedEvent, 'sender' | 'entity' | 'action' | 'receivedAt'>;
}

/** Where accepted events go; it resolves only when every message is durably queued. */
export interface EventQueue {
  /**
   * Throws a `QueueUnavailableError` when a message could not be queued, once no send is in
   * flight; `queued` has by then been told of each message the queue took, so that a retry of
   * the request can send only the rest.
   */
  enqueue(
    messages: ReadonlyArray<OutgoingMessage>,
    queued?: (message: OutgoingMessage) => void,
  ): Promise<void>;
}

/** The parts of a received SQS message that delivery hands on (Lambda's SQSRecord fits). */
export interface QueuedMessage {
  messageId: string;
  receiptHandle: string;
  body: string;
  attributes: {
    ApproximateFirstReceiveTimestamp?: string | undefined;
    ApproximateReceiveCount?: string | undefined;
    /** The record's message group (FIFO queue). */
    MessageGroupId?: string | undefined;
  };
  messageAttributes: Record<
    string,
    { dataType: string; stringValue?: string | undefined; binaryValue?: string | undefined }
  >;
}

/** A message refused for good, and why. */
export interface DeadLetter {
  message: QueuedMessage;
  reason: string;
  detail: string;
  status?: number;
  /** The event's id, entity and action, when the message was a readable event. */
  eventId?: string;
  entity?: string;
  action?: string;
}

/**
 * The batch function's queues. `until` (epoch ms) bounds a settling call: none starts or lasts
 * past it, and what it did not do counts as failed.
 */
export interface DeliveryQueues {
  /** Sends each letter to the dead-letter queue; resolves the message ids that could not be sent. */
  deadLetter(letters: ReadonlyArray<DeadLetter>, until?: number): Promise<string[]>;
  /** Hides each message for its `seconds` more; resolves the message ids whose delay failed. */
  delay(
    delays: ReadonlyArray<{ message: QueuedMessage; seconds: number }>,
    until?: number,
  ): Promise<string[]>;
  /**
   * Receives up to `max` more messages of the events queue, 10 per call, until `max` are held,
   * `until` (epoch ms) has passed, or no message came for `quietMs`; never waits past either.
   * Resolves what it received (a failed call ends the receiving, it is not an error: the
   * messages in hand are delivered).
   */
  receive(
    max: number,
    until: number,
    quietMs?: number,
    /** How long to hide what it receives (SQS visibility); the queue's own when absent. */
    holdSeconds?: number,
  ): Promise<QueuedMessage[]>;
  /** Deletes messages this function received itself; resolves the message ids not deleted. */
  remove(messages: ReadonlyArray<QueuedMessage>, until?: number): Promise<string[]>;
}

/** A source's payload the ingest could not map (contract §6), kept whole for a redrive. */
export interface SourceDeadLetter {
  /** The letter's id, answered as `deadLettered` and shown as its `eventId`. */
  id: string;
  source: string;
  /** The message body: the versioned envelope of the payload (functions/core/source-endpoint.ts). */
  body: string;
  reason: 'mapping_failed';
  /** What failed, and where: the error and the JSON pointer of the first bad field. */
  detail: string;
  /** When the ingest received the payload (ISO 8601). */
  receivedAt: string;
}

/** Where the ingest keeps what it could not map. */
export interface SourceDeadLetterQueue {
  /** Resolves once the letter is durably queued; throws a `QueueUnavailableError` otherwise. */
  deadLetter(letter: SourceDeadLetter): Promise<void>;
}

// --- observability --------------------------------------------------------------------------

/** Structured log lines; Powertools' Logger fits. */
export interface Logger {
  info(message: string, ...extra: Array<Record<string, unknown>>): void;
  warn(message: string, ...extra: Array<Record<string, unknown>>): void;
  error(message: string, ...extra: Array<Record<string, unknown>>): void;
}

export type { MetricUnit } from './metrics.ts';
export type { OutcomeKey, OutcomeRecord, OutcomeStore } from './outcome-records.ts';
export { OUTCOME_TABLE } from './outcome-records.ts';

/**
 * Metrics; Powertools' Metrics fits. Only the catalog's metrics (core/metrics.ts), each with
 * its unit: a new metric is added there first, where the stack's alarms can find it.
 */
export interface MetricsSink {
  addMetric<Name extends EmittedMetricName>(name: Name, unit: UnitOf<Name>, value: number): void;
}

/**
 * What identifies a request for de-duplication (contract §1.3): `key` names the request,
 * `bodyHash` tells a retry (same body) from a reuse of the id (another body).
 */
export interface RequestIdentity {
  key: string;
  bodyHash: string;
}

/** What the ledger made of a request. */
export type LedgerOutcome<T> =
  /**
   * First time (or the last try left the id free): `accept` ran and this is what it gave,
   * handed the `progress` of the last try of the same request (same id and body) if it had one.
   */
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
  /**
   * Of an answer not remembered: what the try did all the same (the events it queued before a
   * 503), kept with the id for the window and handed to the next try of the same request.
   */
  progress?: string | undefined;
}

/** Remembers accepted requests for a window, so a retried or replayed one takes effect once. */
export interface RequestLedger {
  once<T extends LedgerAnswer>(
    identity: RequestIdentity,
    accept: (progress: string | undefined) => Promise<T>,
    options: { remainingTimeMs: number | undefined; requestId: string | undefined },
  ): Promise<LedgerOutcome<T>>;
}

/** One source's stored secret as read: its text (undefined when it has none), or why it could not be. */
export type StoredSourceSecret = { text: string | undefined } | { unreadable: unknown };

/** Where each source's stored secret is read, each on its own: one failing leaves the others. */
export interface SourceSecretStore {
  read(names: ReadonlyArray<string>): Promise<ReadonlyMap<string, StoredSourceSecret>>;
}
