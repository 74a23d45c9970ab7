/**
 * Mautic's health as every batch invocation shares it (contract §2, "Mautic's health sets the
 * pace"): a circuit that failures of Mautic as a whole open and the first answered probe closes,
 * and the number of calls in flight that Mautic's own call times allow. Pure: each function takes
 * the state and the time and answers the next state; `mautic-health.ts` reads and writes it
 * through the `HealthStore` port, where every invocation sees it.
 */
import { createHash } from 'node:crypto';
import {
  MauticBatchLimitError,
  MauticError,
  MauticRateLimitError,
  MauticTransientError,
} from '../errors.ts';
import type { HealthState } from '../health-state.ts';

/** How the circuit probes, opens and paces. */
export interface CircuitSettings {
  /** The first probe interval; it doubles after each failed probe. */
  probeBaseMs: number;
  /** No interval above this: the longest is `probeBaseMs × 2^k` within it. */
  probeMaxMs: number;
  /** Calls in flight across invocations while Mautic keeps its usual pace. */
  ceiling: number;
}

/**
 * Distinct calls that fail as Mautic failing, with no answered call between them, that open the
 * circuit. Distinct: an item that fails every call it is in fails one call again and again, and
 * narrowing it down answers calls in between, so a poison item never opens it.
 */
export const FAILURES_TO_OPEN = 3;
/** Failures older than this no longer count towards opening. */
const FAILURE_WINDOW_MS = 60_000;
/** Calls of fewer items say little about the time per item (a call's own overhead dominates). */
export const PACE_MIN_ITEMS = 10;
/** Weights of a new call time in the recent and in the usual level. */
const RECENT_WEIGHT = 0.3;
const USUAL_WEIGHT = 0.02;
/** Slower than this times the usual level: halve the calls in flight; this fast again: one more. */
const SLOW_FACTOR = 2;
const RECOVERED_FACTOR = 1.25;
/**
 * Below this many ms an item (a second for a call of 200) Mautic is not slow, whatever its
 * recent level against its usual one: the jitter of a busy machine around a fast Mautic's few
 * ms would otherwise halve its calls in flight.
 */
const SLOW_FLOOR_MS_PER_ITEM = 5;
/** At most one change of the allowance this often, so that concurrent calls count once. */
const PACE_COOLDOWN_MS = 10_000;

/** Shipped probe intervals: from 5 s up to a minute, neither above `RETRY_BASE_SECONDS`. */
const DEFAULT_PROBE_BASE_SECONDS = 5;
const DEFAULT_PROBE_MAX_SECONDS = 60;

/**
 * The circuit's settings from the configuration. Unset, the probe intervals are the shipped ones
 * but never longer than the first retry delay: an event held by the circuit waits no longer for
 * its next try than it would have without it (and settings compressed for tests compress them).
 * The calls allowed in flight: every invocation's (`maxConcurrency`), each with its entities'.
 */
export function circuitSettings(config: {
  probeBaseSeconds?: number | undefined;
  probeMaxSeconds?: number | undefined;
  retryBaseSeconds: number;
  maxConcurrency: number;
  deliveryConcurrency: number;
}): CircuitSettings {
  const base =
    config.probeBaseSeconds ?? Math.min(DEFAULT_PROBE_BASE_SECONDS, config.retryBaseSeconds);
  const max =
    config.probeMaxSeconds ?? Math.min(DEFAULT_PROBE_MAX_SECONDS, config.retryBaseSeconds);
  return {
    probeBaseMs: base * 1000,
    probeMaxMs: Math.max(base, max) * 1000,
    ceiling: config.maxConcurrency * config.deliveryConcurrency,
  };
}

export function closedHealth(now: number): HealthState {
  return { circuit: 'closed', since: now, failures: [], slots: {} };
}

/**
 * What a failed call says of Mautic: `down` when it failed as Mautic failing (no connection, a
 * reset, a timeout, a 5xx, a 429), `up` when Mautic answered (a refusal, its batch limit, an
 * unreadable 2xx), `unknown` when the call was cut off by the invocation itself.
 */
export function failureSays(error: unknown): 'down' | 'up' | 'unknown' {
  if (error instanceof MauticRateLimitError) return 'down';
  if (error instanceof MauticTransientError) return error.kind === 'aborted' ? 'unknown' : 'down';
  if (error instanceof MauticBatchLimitError) return 'up';
  if (error instanceof MauticError) return (error.status ?? 0) >= 500 ? 'down' : 'up';
  return 'unknown';
}

/** A call's identity: its items' message ids. The halves of a narrowed call are other calls. */
export function callKey(messageIds: ReadonlyArray<string>): string {
  return createHash('sha256').update(messageIds.join('\n')).digest('base64url').slice(0, 16);
}

/** The first point of the probe grid strictly after `at`: the grid of `step` from the epoch. */
export function gridAfter(at: number, step: number): number {
  return (Math.floor(at / step) + 1) * step;
}

/** The longest probe interval the settings allow: `probeBaseMs × 2^k` within `probeMaxMs`. */
export function longestInterval({ probeBaseMs, probeMaxMs }: CircuitSettings): number {
  let interval = probeBaseMs;
  while (interval * 2 <= probeMaxMs) interval *= 2;
  return interval;
}

/**
 * A failed call that says Mautic is down. Closed, the `FAILURES_TO_OPEN`th distinct such call
 * in a row opens the circuit; half-open, the probe failed: open again with the interval doubled.
 * A time Mautic named (a 429's reset, a `Retry-After`) puts the next probe no earlier.
 */
export function recordFailure(
  state: HealthState,
  failure: { call: string; at: number; status?: number | undefined; message: string },
  settings: CircuitSettings,
  namedUntil?: number,
): HealthState {
  const { call, at } = failure;
  const lastFailure = {
    message: failure.message.slice(0, 300),
    ...(failure.status === undefined ? {} : { status: failure.status }),
  };
  if (state.circuit === 'closed') {
    const failures = [
      ...state.failures.filter((f) => f.call !== call && at - f.at < FAILURE_WINDOW_MS),
      { call, at },
    ];
    if (failures.length < FAILURES_TO_OPEN) return { ...state, failures, lastFailure };
    return opened(state, at, settings.probeBaseMs, lastFailure, namedUntil);
  }
  if (state.circuit === 'half_open') {
    const interval = Math.min(
      (state.probeIntervalMs ?? settings.probeBaseMs) * 2,
      longestInterval(settings),
    );
    return opened(state, at, interval, lastFailure, namedUntil);
  }
  // Already open: a call that started before it opened. Only a named time moves the probe.
  const nextProbeAt = Math.max(state.nextProbeAt ?? 0, namedUntil ?? 0);
  return { ...state, nextProbeAt, lastFailure };
}

function opened(
  state: HealthState,
  at: number,
  interval: number,
  lastFailure: NonNullable<HealthState['lastFailure']>,
  namedUntil: number | undefined,
): HealthState {
  const { probe: _, ...rest } = state;
  return {
    ...rest,
    circuit: 'open',
    since: state.circuit === 'closed' ? at : state.since,
    probeIntervalMs: interval,
    nextProbeAt: Math.max(gridAfter(at, interval), namedUntil ?? 0),
    failures: [],
    lastFailure,
    slots: {},
  };
}

/** Mautic answered a call (whatever it said of the items): the circuit closes, failures clear. */
export function recordAnswer(state: HealthState, at: number): HealthState {
  if (state.circuit === 'closed') {
    return state.failures.length === 0 ? state : { ...state, failures: [] };
  }
  const { probe: _, nextProbeAt: __, probeIntervalMs: ___, lastFailure: ____, ...rest } = state;
  return { ...rest, circuit: 'closed', since: at, failures: [] };
}

/** Whether a probe may start now: open and its time has come, or the last prober's lease ran out. */
export function probeDue(state: HealthState, now: number): boolean {
  if (state.circuit === 'open') return (state.nextProbeAt ?? 0) <= now;
  return state.circuit === 'half_open' && (state.probe?.until ?? 0) <= now;
}

/** Takes the probe for `holder` until `until`, when one is due; else undefined. */
export function takeProbe(
  state: HealthState,
  holder: string,
  now: number,
  until: number,
): HealthState | undefined {
  if (!probeDue(state, now)) return undefined;
  return { ...state, circuit: 'half_open', probe: { holder, until } };
}

/**
 * When the events held while the circuit is not closed come back: open, at the next probe;
 * half-open, at the probe after the one in flight should it fail (its answer comes soon).
 */
export function heldUntil(
  state: HealthState,
  settings: CircuitSettings,
  now: number,
): number | undefined {
  if (state.circuit === 'open') return state.nextProbeAt;
  if (state.circuit === 'half_open') {
    const interval = state.probeIntervalMs ?? settings.probeBaseMs;
    return gridAfter(now, Math.min(interval * 2, longestInterval(settings)));
  }
  return undefined;
}

/**
 * An answered call's time: the recent and usual levels of Mautic's time per item move towards
 * it, and the calls allowed in flight follow (AIMD): halved when the recent level is well above
 * the usual one, one more when it is back near it; at most one change per cooldown.
 */
export function recordCallTime(
  state: HealthState,
  call: { items: number; ms: number; at: number },
  settings: CircuitSettings,
): HealthState {
  if (call.items < PACE_MIN_ITEMS) return state;
  const sample = call.ms / call.items;
  const recent = mix(state.msPerItem, sample, RECENT_WEIGHT);
  const usual = mix(state.usualMsPerItem, sample, USUAL_WEIGHT);
  const next = { ...state, msPerItem: recent, usualMsPerItem: usual };
  if (state.pacedAt !== undefined && call.at - state.pacedAt < PACE_COOLDOWN_MS) return next;
  const allowance = Math.min(state.allowance ?? settings.ceiling, settings.ceiling);
  if (recent > SLOW_FACTOR * usual && recent >= SLOW_FLOOR_MS_PER_ITEM && allowance > 1) {
    return { ...next, allowance: Math.max(1, Math.floor(allowance / 2)), pacedAt: call.at };
  }
  if (recent <= RECOVERED_FACTOR * usual && allowance < settings.ceiling) {
    // Back at the ceiling: not paced any more, no slots taken.
    if (allowance + 1 < settings.ceiling)
      return { ...next, allowance: allowance + 1, pacedAt: call.at };
    const { allowance: _, ...unpaced } = next;
    return { ...unpaced, pacedAt: call.at };
  }
  return next;
}

function mix(level: number | undefined, sample: number, weight: number): number {
  return level === undefined ? sample : level + weight * (sample - level);
}

/** Whether calls are paced now: fewer allowed in flight than the ceiling. */
export function paced(state: HealthState, settings: CircuitSettings): boolean {
  return (state.allowance ?? settings.ceiling) < settings.ceiling;
}

/**
 * A call's turn while paced: it takes a slot (held until `until`) when fewer than the calls
 * allowed hold one and no call waits before it; else it joins the queue (until `waitUntil`, when
 * it gives up) and waits its turn: first come, first served, so that an invocation going from
 * call to call cannot keep the slot from another. Ended leases and waits (a crashed
 * invocation's) are dropped. Undefined: nothing to change (still waiting).
 */
export function takeSlot(
  state: HealthState,
  call: { holder: string; now: number; until: number; waitUntil: number },
  settings: CircuitSettings,
): HealthState | undefined {
  const { holder, now } = call;
  const live = Object.entries(state.slots).filter(([, end]) => end > now);
  const queue = (state.queue ?? []).filter((waiting) => waiting.until > now);
  const first = queue[0]?.holder ?? holder;
  const allowed = Math.min(state.allowance ?? settings.ceiling, settings.ceiling);
  if (live.length < allowed && first === holder) {
    const slots = { ...Object.fromEntries(live), [holder]: call.until };
    return { ...state, slots, queue: queue.filter((waiting) => waiting.holder !== holder) };
  }
  if (queue.some((waiting) => waiting.holder === holder)) return undefined;
  return { ...state, queue: [...queue, { holder, until: call.waitUntil }] };
}

export function releaseSlot(state: HealthState, holder: string): HealthState {
  if (!(holder in state.slots)) return state;
  const { [holder]: _, ...slots } = state.slots;
  return { ...state, slots };
}
