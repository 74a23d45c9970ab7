/**
 * The action ledger in memory, for delivery tests: the same answers as the DynamoDB one (the
 * shared cases in test/adapters/dynamodb-action-ledger.test.ts keep them the same), what it
 * holds, every call made, and a store failure on demand.
 */
import type { ActionLedger } from '../../functions/core/ports.ts';

type Method = 'claim' | 'complete' | 'release';

export class InMemoryActionLedger implements ActionLedger {
  readonly #entries = new Map<string, 'claimed' | 'done'>();
  readonly #failures = new Map<Method, Error>();
  /** Every call, in order, failed ones included. */
  readonly calls: Array<{ method: Method; key: string }> = [];

  /** What the ledger holds, key by key, in the order the keys were first claimed. */
  entries(): Map<string, 'claimed' | 'done'> {
    return new Map(this.#entries);
  }

  /** Makes the next call of `method` throw `error` (the store could not be asked), once. */
  failNext(
    method: Method,
    error: Error = new Error(`The action ledger failed to ${method}`),
  ): void {
    this.#failures.set(method, error);
  }

  async claim(key: string): Promise<'claimed' | 'done' | 'unknown'> {
    this.#call('claim', key);
    const held = this.#entries.get(key);
    if (held === undefined) {
      this.#entries.set(key, 'claimed');
      return 'claimed';
    }
    return held === 'done' ? 'done' : 'unknown';
  }

  async complete(key: string): Promise<void> {
    this.#call('complete', key);
    this.#entries.set(key, 'done');
  }

  async release(key: string): Promise<void> {
    this.#call('release', key);
    if (this.#entries.get(key) === 'claimed') this.#entries.delete(key);
  }

  #call(method: Method, key: string): void {
    this.calls.push({ method, key });
    const failure = this.#failures.get(method);
    if (failure === undefined) return;
    this.#failures.delete(method);
    throw failure;
  }
}
