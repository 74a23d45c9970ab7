import type { CallOptions, ItemResult } from './mautic-api.ts';
import type { TokenSecret } from './token-secret.ts';

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
}

/** Where the batch function gets Mautic's access token; it never refreshes tokens itself. */
export interface TokenSource {
  /**
   * A usable access token. `fresh` bypasses any cache (after a 401); `refused` is a token Mautic
   * refused again after a fresh read: a newer one is needed. A missing, expired or refused token
   * is waited for (the refresher asked) until `waitUntil` (epoch ms) at most; then it throws.
   */
  accessToken(options?: { fresh?: boolean; refused?: string; waitUntil?: number }): Promise<string>;
}

/** What the refresher answered: never the tokens, only when the stored ones were written. */
export type RefreshAnswer =
  | { kind: 'busy' }
  | {
      kind: 'answered';
      action: 'none' | 'refreshed' | 'failed';
      why?: string;
      stored?: { updatedAt: string; accessTokenExpiresAt: string };
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

/** Structured log lines; Powertools' Logger fits. */
export interface Logger {
  info(message: string, ...extra: Array<Record<string, unknown>>): void;
  warn(message: string, ...extra: Array<Record<string, unknown>>): void;
  error(message: string, ...extra: Array<Record<string, unknown>>): void;
}

export type MetricUnit = 'Count' | 'Milliseconds' | 'Percent' | 'Seconds';

/** Metrics; Powertools' Metrics fits. */
export interface MetricsSink {
  addMetric(name: string, unit: MetricUnit, value: number): void;
}

/** The parts of a received SQS message that delivery hands on (Lambda's SQSRecord fits). */
export interface QueuedMessage {
  messageId: string;
  receiptHandle: string;
  body: string;
  attributes: {
    ApproximateFirstReceiveTimestamp?: string | undefined;
    ApproximateReceiveCount?: string | undefined;
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
  entity?: string;
  action?: string;
}

/** The queues the batch function writes to itself. */
export interface DeliveryQueues {
  /** Sends each letter to the dead-letter queue; resolves the message ids that could not be sent. */
  deadLetter(letters: ReadonlyArray<DeadLetter>): Promise<string[]>;
  /** Hides the messages for `seconds` more; resolves the message ids whose delay failed. */
  delay(messages: ReadonlyArray<QueuedMessage>, seconds: number): Promise<string[]>;
}
