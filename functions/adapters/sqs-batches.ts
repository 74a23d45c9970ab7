/** SQS batch calls take at most 10 entries and 1 MiB of messages summed. */
const MAX_ENTRIES = 10;
const MAX_BATCH_BYTES = 1024 * 1024;

/**
 * Consecutive groups of at most 10 items whose sizes add up to at most 1 MiB and, when `keyOf`
 * is given, with no two items of one key.
 */
export function groupsOf<T>(
  items: ReadonlyArray<T>,
  sizeOf: (item: T) => number,
  keyOf?: (item: T) => string,
): T[][] {
  const groups: T[][] = [];
  let current: T[] = [];
  let keys = new Set<string>();
  let bytes = 0;
  for (const item of items) {
    const size = sizeOf(item);
    const key = keyOf?.(item);
    const full = current.length === MAX_ENTRIES || bytes + size > MAX_BATCH_BYTES;
    if (current.length > 0 && (full || (key !== undefined && keys.has(key)))) {
      groups.push(current);
      current = [];
      keys = new Set();
      bytes = 0;
    }
    current.push(item);
    if (key !== undefined) keys.add(key);
    bytes += size;
  }
  if (current.length > 0) groups.push(current);
  return groups;
}

/**
 * The ids of the batch entries SQS did not list as successful. Batch calls answer 200 even when
 * entries failed; only an entry listed in `Successful` is done, so anything else is retried.
 */
export function notListed<T>(
  entries: ReadonlyArray<[string, T]>,
  successful: ReadonlyArray<{ Id?: string | undefined }> | undefined,
): string[] {
  const done = new Set((successful ?? []).map((entry) => entry.Id));
  return entries.map(([id]) => id).filter((id) => !done.has(id));
}
