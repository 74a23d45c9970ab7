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
  error(message: string, ...extra: Array<Record<string, unknown> | Error>): void;
}

export type MetricUnit = 'Count' | 'Milliseconds' | 'Percent';

/** Metrics; Powertools' Metrics fits. */
export interface MetricsSink {
  addMetric(name: string, unit: MetricUnit, value: number): void;
}
