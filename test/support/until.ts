import { setTimeout as sleep } from 'node:timers/promises';

/** Often enough that a test waits little past the moment, rarely enough to leave the CPU be. */
const POLL_INTERVAL_MS = 20;

/**
 * Polls `probe` until it answers anything but `undefined` or `false`, and resolves that answer:
 * for a test waiting on what happens elsewhere (a child's output, a queue, the simulator's
 * records). Probes at least once, even with a deadline already past. On timeout it rejects with
 * `what`; a function is called then, so that it can describe the state at that time.
 */
export async function until<T>(
  probe: () => T | Promise<T>,
  timeoutMs = 5_000,
  what: string | (() => string) = 'the condition',
): Promise<Exclude<T, undefined | false>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const answer = await probe();
    if (answer !== undefined && answer !== false) return answer as Exclude<T, undefined | false>;
    if (Date.now() >= deadline) {
      const description = typeof what === 'string' ? what : what();
      throw new Error(`timed out after ${timeoutMs} ms: ${description}`);
    }
    await sleep(POLL_INTERVAL_MS);
  }
}
