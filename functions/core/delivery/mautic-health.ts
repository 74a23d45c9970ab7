/**
 * One container's view of Mautic's shared health (contract §2, "Mautic's health sets the pace"):
 * it reads the circuit (`circuit.ts`) from the `HealthStore` once per batch, admits each Mautic
 * call (closed: go; open: hold the events until the next probe; due: take the probe lease, one
 * call at a time across invocations; paced: take one of the slots allowed), and writes what a
 * call says of Mautic: on a transition at once, call times at most every `FLUSH_MS`. A store
 * that cannot be reached never stops delivery: the container then goes on with its own view.
 */
import { randomUUID } from 'node:crypto';
import {
  describeError,
  MauticError,
  MauticRateLimitError,
  MauticTransientError,
} from '../errors.ts';
import type { HealthState } from '../health-state.ts';
import type { Clock, HealthStore, Logger } from '../ports.ts';
import {
  type CircuitSettings,
  closedHealth,
  failureSays,
  gridAfter,
  heldUntil,
  longestInterval,
  PACE_MIN_ITEMS,
  paced,
  probeDue,
  recordAnswer,
  recordCallTime,
  recordFailure,
  releaseSlot,
  takeProbe,
  takeSlot,
} from './circuit.ts';
import type { MessageOutcome } from './failure-policy.ts';

/** Mautic's recent time per item, for sizing calls and their timeouts. */
export interface CallTimes {
  /** In ms, from answered calls of `PACE_MIN_ITEMS` items or more; undefined before the first. */
  recentMsPerItem(): number | undefined;
}

/** What a call admitted carries to its end: whether it probes, and the slot it holds. */
export interface Ticket {
  readonly probe: boolean;
  readonly slot?: string;
}

/** Whether a call may start: `go`, or its items go back to the queue with `outcome`. */
export type Admission =
  | { kind: 'go'; ticket: Ticket }
  | { kind: 'hold'; outcome: MessageOutcome & { kind: 'retry' } }
  /** A probe is due and the call has several items: it is to send one alone first. */
  | { kind: 'probe_one' };

/** Call times are written at most this often per container (a transition is written at once). */
const FLUSH_MS = 10_000;
/** How often a call waiting for another's probe, or for a slot, looks again. */
const POLL_MS = 250;
/** Writes that lost to another writer are tried again this many times, on a fresh read. */
const WRITE_TRIES = 5;
/** A store that keeps failing is logged at most this often. */
const STORE_LOG_MS = 60_000;

export class MauticHealth implements CallTimes {
  readonly #store: HealthStore;
  readonly #clock: Clock;
  readonly #sleep: (ms: number) => Promise<void>;
  readonly #logger: Logger;
  readonly settings: CircuitSettings;
  readonly #id = randomUUID().slice(0, 8);
  #known: { state: HealthState; version: number };
  #holders = 0;
  /** This container's probe in flight: its other calls wait for it rather than probe too. */
  #probing = false;
  #samples: Array<{ items: number; ms: number; at: number }> = [];
  #flushedAt = 0;
  #storeLoggedAt = Number.NEGATIVE_INFINITY;

  constructor(deps: {
    store: HealthStore;
    clock: Clock;
    sleep: (ms: number) => Promise<void>;
    logger: Logger;
    settings: CircuitSettings;
  }) {
    this.#store = deps.store;
    this.#clock = deps.clock;
    this.#sleep = deps.sleep;
    this.#logger = deps.logger;
    this.settings = deps.settings;
    this.#known = { state: closedHealth(deps.clock.now()), version: 0 };
  }

  /** The state as last read or written. */
  state(): HealthState {
    return this.#known.state;
  }

  closed(): boolean {
    return this.#known.state.circuit === 'closed';
  }

  /** Whether a call may go now: the circuit is closed, or a probe is due. */
  mayCall(): boolean {
    return this.closed() || probeDue(this.#known.state, this.#clock.now());
  }

  /** Whether a probe is in flight (this container's, or another's whose lease holds). */
  probing(): boolean {
    const { circuit, probe } = this.#known.state;
    return this.#probing || (circuit === 'half_open' && (probe?.until ?? 0) > this.#clock.now());
  }

  recentMsPerItem(): number | undefined {
    return this.#known.state.msPerItem;
  }

  /** Reads the shared state (once per batch, and while waiting for another's probe). */
  async refresh(): Promise<void> {
    try {
      const stored = await this.#store.read();
      this.#known = stored ?? { state: closedHealth(this.#clock.now()), version: 0 };
    } catch (error) {
      this.#storeFailed('read', error);
    }
  }

  /**
   * Whether a call may start now. Closed: yes (paced: once it holds a slot). Open: its items are
   * held until the next probe, which it waits for when it comes before `waitUntil`; due: it takes
   * the probe (one across invocations) and is the probe — a call of several items never is: it
   * is told to send one alone first (`probe_one`; contract §2, one small call). While another
   * call probes, it waits for the answer until `waitUntil`. `leaseUntil`: when the call is
   * aborted at the latest.
   */
  async admit(times: {
    waitUntil: number;
    leaseUntil: number;
    /** The call has several items (a retry of a call that was not a probe, or one that waited). */
    several?: boolean;
  }): Promise<Admission> {
    for (;;) {
      const now = this.#clock.now();
      if (this.#known.state.circuit === 'closed') return this.#slot(times);
      if (!this.#probing && probeDue(this.#known.state, now)) {
        if (times.several) return { kind: 'probe_one' };
        const holder = this.#holder();
        await this.#update((s) => takeProbe(s, holder, this.#clock.now(), times.leaseUntil));
        this.#probing = this.#known.state.probe?.holder === holder;
        if (this.#probing) return { kind: 'go', ticket: { probe: true } };
      }
      // Open: the next probe. Half-open, or a probe that could not be taken: look again soon.
      const state = this.#known.state;
      if (state.circuit === 'closed') continue;
      const next =
        state.circuit === 'open' && !probeDue(state, now)
          ? (state.nextProbeAt ?? now)
          : now + POLL_MS;
      if (next > times.waitUntil) {
        return { kind: 'hold', outcome: this.#held() };
      }
      await this.#sleep(Math.max(1, next - now));
      if (!this.#probing) await this.refresh();
    }
  }

  /** Mautic answered the call (whatever it said of its items): the circuit closes if it was not. */
  async answered(ticket: Ticket, call: { items: number; ms: number }): Promise<void> {
    const at = this.#clock.now();
    if (call.items >= PACE_MIN_ITEMS) this.#samples.push({ ...call, at });
    if (ticket.probe) this.#probing = false;
    const { state } = this.#known;
    const news = state.circuit !== 'closed' || state.failures.length > 0;
    if (!news && ticket.slot === undefined && at - this.#flushedAt < FLUSH_MS) return;
    await this.#write((s) => recordAnswer(s, at), ticket);
  }

  /** The call failed: as Mautic down, it counts towards opening (a probe's reopens, backed off). */
  async failed(ticket: Ticket, call: string, error: unknown): Promise<void> {
    const says = failureSays(error);
    if (says === 'up') return this.answered(ticket, { items: 0, ms: 0 });
    if (ticket.probe) this.#probing = false;
    if (says === 'unknown') {
      if (ticket.slot !== undefined) await this.#write((s) => s, ticket);
      return;
    }
    const failure = {
      call,
      at: this.#clock.now(),
      message: describeError(error),
      ...(error instanceof MauticError && error.status !== undefined
        ? { status: error.status }
        : {}),
    };
    await this.#write((s) => recordFailure(s, failure, this.settings, namedTime(error)), ticket);
  }

  /** Writes the call times gathered, at most every `FLUSH_MS`. */
  async flush(): Promise<void> {
    if (this.#samples.length === 0 || this.#clock.now() - this.#flushedAt < FLUSH_MS) return;
    await this.#write((s) => s);
  }

  /**
   * Paced: waits its turn (until `waitUntil`) for one of the slots allowed; else goes at once.
   * Not served in time: back to the queue until the next point of the probe grid, not on the
   * backoff (Mautic answers; it is only slow).
   */
  async #slot(times: { waitUntil: number; leaseUntil: number }): Promise<Admission> {
    const holder = this.#holder();
    const { waitUntil } = times;
    for (;;) {
      if (!paced(this.#known.state, this.settings)) return { kind: 'go', ticket: { probe: false } };
      const call = { holder, now: this.#clock.now(), until: times.leaseUntil, waitUntil };
      await this.#update((s) => (paced(s, this.settings) ? takeSlot(s, call, this.settings) : s));
      if (holder in this.#known.state.slots) {
        return { kind: 'go', ticket: { probe: false, slot: holder } };
      }
      if (this.#clock.now() + POLL_MS > waitUntil) return { kind: 'hold', outcome: this.#slow() };
      await this.#sleep(POLL_MS);
      await this.refresh();
    }
  }

  #slow(): MessageOutcome & { kind: 'retry' } {
    const grid = this.settings.probeBaseMs;
    const message = 'Mautic is slow: every call allowed in flight was busy';
    const notBefore = gridAfter(this.#clock.now(), grid);
    return { kind: 'retry', reason: 'mautic_slow', notBefore, grid, message };
  }

  /** While the circuit is not closed, what items not sent get: back at the next probe. */
  holding(): (MessageOutcome & { kind: 'retry' }) | undefined {
    return this.closed() ? undefined : this.#held();
  }

  /**
   * An item left to the queue with no time of its own (a failed call, the probe's, or one the
   * deadline stopped) while the circuit is not closed: back at the next probe with the items
   * held, not on the backoff of its receive count, which after a long outage runs to minutes and
   * would keep its record's later events (its FIFO group) waiting long after Mautic answers.
   */
  heldIfOpen(outcome: MessageOutcome): MessageOutcome {
    if (outcome.kind !== 'retry' || outcome.notBefore !== undefined || this.closed())
      return outcome;
    return { ...this.#held(), reason: outcome.reason };
  }

  /** The outcome of items held while the circuit is not closed: back at the next probe. */
  #held(): MessageOutcome & { kind: 'retry' } {
    const state = this.#known.state;
    const until = heldUntil(state, this.settings, this.#clock.now());
    const failure = state.lastFailure;
    return {
      kind: 'retry',
      reason: 'mautic_unavailable',
      ...(until === undefined ? {} : { notBefore: until }),
      // Held longer than the next probe (receives running short): on the coarsest probe grid,
      // whose points are probe times whatever the interval then.
      grid: longestInterval(this.settings),
      ...(failure?.status === undefined ? {} : { status: failure.status }),
      message: `Mautic is failing as a whole (circuit ${state.circuit} since ${new Date(state.since).toISOString()})${failure ? `: ${failure.message}` : ''}`,
    };
  }

  /** Applies `change`, the call times gathered and the ticket's slot release, in one write. */
  async #write(change: (state: HealthState) => HealthState, ticket?: Ticket): Promise<void> {
    const samples = this.#samples;
    this.#samples = [];
    this.#flushedAt = this.#clock.now();
    await this.#update((state) => {
      let next = change(state);
      for (const sample of samples) next = recordCallTime(next, sample, this.settings);
      return ticket?.slot === undefined ? next : releaseSlot(next, ticket.slot);
    });
  }

  /**
   * A read-modify-write of the shared state, again on a fresh read when another writer got in
   * first. `change` answering undefined: nothing to write (false). A store that fails: the change
   * is kept in this container's view only, and delivery goes on.
   */
  async #update(change: (state: HealthState) => HealthState | undefined): Promise<boolean> {
    for (let tries = 0; tries < WRITE_TRIES; tries++) {
      const { state, version } = this.#known;
      const next = change(state);
      if (next === undefined) return false;
      if (next === state) return true;
      let written: boolean;
      try {
        written = await this.#store.write(next, version);
      } catch (error) {
        this.#storeFailed('write', error);
        this.#adopt(next, version);
        return true;
      }
      if (written) {
        this.#adopt(next, version + 1);
        return true;
      }
      await this.refresh();
    }
    return false;
  }

  #adopt(next: HealthState, version: number): void {
    const before = this.#known.state;
    this.#known = { state: next, version };
    if (next.circuit !== before.circuit) {
      this.#logger[next.circuit === 'closed' ? 'info' : 'warn']("Mautic's circuit changed", {
        event: 'mautic_circuit',
        circuit: next.circuit,
        nextProbeAt: next.nextProbeAt,
        lastFailure: next.lastFailure?.message,
      });
    }
    if (next.allowance !== before.allowance && next.allowance !== undefined) {
      this.#logger.warn('Calls in flight to Mautic paced', {
        event: 'mautic_paced',
        callsInFlight: next.allowance,
        msPerItem: next.msPerItem,
        usualMsPerItem: next.usualMsPerItem,
      });
    }
  }

  #holder(): string {
    this.#holders += 1;
    return `${this.#id}-${this.#holders}`;
  }

  #storeFailed(step: string, error: unknown): void {
    const now = this.#clock.now();
    if (now - this.#storeLoggedAt < STORE_LOG_MS) return;
    this.#storeLoggedAt = now;
    this.#logger.warn("Mautic's shared health could not be used; this container goes on alone", {
      event: 'health_store_failed',
      step,
      error: describeError(error),
    });
  }
}

/** The time Mautic named in a failure (a 429's reset, a 503's `Retry-After`), if any. */
function namedTime(error: unknown): number | undefined {
  if (error instanceof MauticRateLimitError) return error.resetAt;
  if (error instanceof MauticTransientError) return error.retryAt;
  return undefined;
}
