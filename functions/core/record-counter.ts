/**
 * The port of the per-record event counters (contract §2, one busy record never stalls the
 * others), beside `ports.ts`, which holds every other interface core depends on and had no room
 * left. Data types only, no implementation: `DynamoDbRecordCounter` implements it.
 */

/** How many events a record had accepted in one minute and in the minute before it. */
export interface MinuteCounts {
  /** This minute's, the events just added included. */
  current: number;
  previous: number;
}

/**
 * Counts each record's accepted events per minute (contract §2, one busy record never stalls
 * the others), shared by every ingest container. `record` is the record's message group (a
 * hash, never the reference itself); `minute` is epoch minutes. Both methods throw a
 * `StoreUnavailableError` when the store cannot be used.
 */
export interface RecordCounter {
  /** Adds `events` to the record's `minute`, and answers that minute's count and the one before. */
  add(
    record: string,
    events: number,
    minute: number,
    options: { requestId: string | undefined },
  ): Promise<MinuteCounts>;
  /** Takes back `events` added to `minute` by a request that then queued none of them. */
  giveBack(record: string, events: number, minute: number): Promise<void>;
}
