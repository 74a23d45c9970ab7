/**
 * What the outcome store keeps of each event (contract §1.6): ids, statuses, times and Mautic's
 * record ids, never a field's value, an address or a payload. Data types and the store's port
 * only; ports.ts re-exports them, so adapters find them where they find every other port.
 */

/** Every status an event's outcome can have (contract §1.6). */
export const OUTCOME_STATUSES = [
  'queued',
  'retrying',
  'delivered',
  'dead_lettered',
  'ignored',
  'skipped',
  'coalesced',
] as const;
export type OutcomeStatus = (typeof OUTCOME_STATUSES)[number];

/**
 * Which writer's record it is: the ingest writes `queued` when it accepts an event, the batch
 * function (and the ingest, for a source's payload it ignored or kept as a dead letter) writes
 * `state`, the newest it knows. Two records, never one overwritten by both: a `queued` written
 * late can then never hide a `delivered` (docs/delivery.md, Outcomes).
 */
type OutcomeSlot = 'queued' | 'state';

/** One stored outcome record. Times are ISO 8601. */
export interface OutcomeRecord {
  eventId: string;
  /** The envelope's `sender`: who may read it (contract §1.6). */
  sender: string;
  slot: OutcomeSlot;
  status: OutcomeStatus;
  /** Null only for a source's payload its filter ignored: no event was made of it. */
  entity: string | null;
  action: string | null;
  /** When the ingest accepted the event (its envelope's `receivedAt`). */
  acceptedAt: string;
  updatedAt: string;
  /** Receives of the event so far (0 while queued). */
  attempts: number;
  /** `delivered`: Mautic's record ids (none for a delete by `match` that matched no contact). */
  mauticIds?: number[];
  /** `delivered`: Mautic's status for the item; `dead_lettered`: the last status, or null. */
  httpStatus?: number | null;
  deliveredAt?: string;
  /** `delivered`: the Mautic call that carried it, as its `mautic_call` log line names it. */
  callId?: string;
  /** `dead_lettered`: the dead letter's reason. */
  reason?: string;
  /** `dead_lettered`, `skipped`: why, in the relay's words, without values. */
  detail?: string;
  /** `retrying`: the last failure's class (the retry reason) and Mautic's status, if any. */
  lastFailure?: { class: string; httpStatus: number | null };
  nextAttemptAt?: string;
  /** `coalesced`: the event whose Mautic item carried this one's effect. */
  into?: string;
}

/**
 * The outcome table's shape, shared by the store, the stack and the local stack: an event's id
 * as the partition key, `<slot>#<sender>` as the sort key (so one sender reading another's
 * event finds nothing), and the TTL attribute (epoch seconds).
 */
export const OUTCOME_TABLE = {
  partitionKey: 'eventId',
  sortKey: 'slot',
  ttl: 'expiresAt',
} as const;

/** Which records a reader asks for: an event's, as one sender sent it. */
export interface OutcomeKey {
  eventId: string;
  sender: string;
}

/**
 * Where outcomes are kept (a DynamoDB table with a TTL in the cloud, dynalite locally). Writes
 * are best effort: an outcome is observability, never a condition of delivery or of a 202.
 */
export interface OutcomeStore {
  /**
   * Writes the records, in as few calls as the store allows; never rejects. Resolves how many
   * could not be written by `until` (epoch ms).
   */
  write(records: ReadonlyArray<OutcomeRecord>, until: number): Promise<number>;
  /** The live records (both slots) of these events; throws when the store cannot be read. */
  read(keys: ReadonlyArray<OutcomeKey>): Promise<OutcomeRecord[]>;
}
