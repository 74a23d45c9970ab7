import type { CallOptions, ItemResult } from './mautic-api.ts';

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
  /** The current access token; `fresh` bypasses any cache (after a 401). */
  accessToken(options?: { fresh?: boolean }): Promise<string>;
}

/** Asks the token refresher (the single writer of tokens) to refresh now. */
export interface RefreshRequester {
  requestRefresh(reason: string): Promise<void>;
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
