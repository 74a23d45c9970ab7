/**
 * Every interface core depends on, in one place. Implementations (the Mautic client, the AWS
 * adapters, the local stand-ins, test fakes) import from here; it imports only data types.
 */

import type { ContactAction } from './events.ts';
import type { HealthState } from './health-state.ts';
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

/** Per call: the bearer token, an optional signal (the Lambda deadline's) and timeout. */
export interface CallOptions {
  accessToken: string;
  signal?: AbortSignal | undefined;
  timeoutMs?: number | undefined;
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
  apiKeyIds: ReadonlyArray<string>;
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
   * One integrator action on one contact, through its endpoint (contract §5): `addPoints` and the
   * segment, campaign, company ones. A refusal of the contact or target (400, 404) is rejected.
   */
  contactAction(
    action: ContactAction,
    contactId: number,
    fields: ActionFields,
    call: CallOptions,
  ): Promise<ItemResult>;
  /**
   * Contacts linked to companies, in one call where Mautic has it (7.x's `batch/addcontacts`),
   * else one per pair: a result per pair, in order; a refused pair (403, 404) is rejected.
   */
  linkCompanies(links: ReadonlyArray<CompanyLink>, call: CallOptions): Promise<ItemResult[]>;
}

/** A contact to add to a company (`linkCompany`). */
export type CompanyLink = { contactId: number; companyId: number };

/** The fields an integrator action carries beside its contact (contract §5). */
export interface ActionFields {
  segmentId?: number | undefined;
  campaignId?: number | undefined;
  companyId?: number | undefined;
  points?: number | undefined;
  /** `addDoNotContact` / `removeDoNotContact` as a contact item carries it; reason 0 lifts it. */
  doNotContact?: { channel: string; reason: 0 | 1 | 2 | 3; comments?: string } | undefined;
}

/** The non-idempotent actions sent, by event (`addPoints` at most once); throws when unreachable. */
export interface ActionLedger {
  /**
   * Claims the key before the call: `claimed` the first time (go ahead), `done` once applied,
   * `unknown` when claimed before with no outcome recorded (an answer lost, a crash).
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
}

/** Mautic's token endpoint for one credential; `MauticOAuthClient` implements it. */
export interface TokenGranter {
  clientCredentials(): Promise<MauticTokens>;
  refresh(refreshToken: string): Promise<MauticTokens>;
  /** The version an API answer to this valid token names (a token answer names none), if any. */
  mauticVersion?(accessToken: string): Promise<string | undefined>;
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

/** When the stored tokens were written and the access token expires (never the tokens). */
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
  | ({ kind: 'answered' } & Omit<RefreshReport, 'grant'>);

/** Runs the token refresher (the single writer of tokens) now and waits for its answer. */
export interface RefreshRequester {
  /**
   * `staleUpdatedAt`: the `updatedAt` of the tokens the caller found unusable (`null`: none), so
   * the refresher can skip the call when newer ones are stored. 'busy': another run holds it.
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

/** The keys a request may be authenticated with, each list with its keys' stable ids beside. */
export interface IngestCredentials {
  webhookKeys: ReadonlyArray<Buffer>;
  webhookIds: ReadonlyArray<string>;
  apiKeyDigests: ReadonlyArray<Buffer>;
  apiKeyIds: ReadonlyArray<string>;
}

/** Mautic's health, for every batch invocation to see: one record, written at the version read. */
export interface HealthStore {
  /** Undefined (version 0) before the first write. */
  read(): Promise<{ state: HealthState; version: number } | undefined>;
  /** Writes `state` as version + 1 if the stored one is still `version`; false if it is not. */
  write(state: HealthState, version: number): Promise<boolean>;
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
