import type { HealthState } from '../../functions/core/health-state.ts';
import type { HealthStore } from '../../functions/core/ports.ts';

/**
 * Mautic's shared health in memory, with the adapter's versioned writes: the store the delivery
 * and health tests share between "containers". `down` makes every call throw, as a table that
 * cannot be reached does; `writes` counts the writes that took.
 */
export class InMemoryHealthStore implements HealthStore {
  #stored: { state: string; version: number } | undefined;
  down = false;
  writes = 0;
  reads = 0;

  async read(): Promise<{ state: HealthState; version: number } | undefined> {
    if (this.down) throw new Error('the store is down');
    this.reads += 1;
    const stored = this.#stored;
    return stored && { state: JSON.parse(stored.state) as HealthState, version: stored.version };
  }

  async write(state: HealthState, version: number): Promise<boolean> {
    if (this.down) throw new Error('the store is down');
    if ((this.#stored?.version ?? 0) !== version) return false;
    this.#stored = { state: JSON.stringify(state), version: version + 1 };
    this.writes += 1;
    return true;
  }

  /** The state as stored now (what `status` would show). */
  get state(): HealthState | undefined {
    return this.#stored && (JSON.parse(this.#stored.state) as HealthState);
  }
}
