import { Metrics } from '@aws-lambda-powertools/metrics';

/** What the console's chart counts, per minute (contract §4, `console`). */
const FLOWS = ['accepted', 'delivered', 'retrying', 'deadLettered'] as const;
export type Flow = (typeof FLOWS)[number];

/** The metrics the batch function emits that the chart counts, by the flow they count. */
const COUNTED: Record<string, Flow> = {
  EventsDelivered: 'delivered',
  EventsRetried: 'retrying',
  EventsRejected: 'deadLettered',
};

const MINUTE_MS = 60_000;
/** An hour of minutes: what the chart shows. */
const KEPT_MINUTES = 60;

/** The last hour's counts of one minute each, oldest first, and the last Mautic call times. */
export interface FlowReport {
  /** The start of the first minute, ISO 8601. */
  start: string;
  periodSeconds: number;
  counts: Record<Flow, number[]>;
  /** Mautic's batch calls in the last five minutes, and their mean time; null when none. */
  mautic: { calls: number; meanMs: number | null };
}

/**
 * The local stack's per-minute counters. In the cloud the same numbers are CloudWatch metrics
 * the stack already emits; locally metrics are switched off, so the console's chart reads these
 * through the control endpoint. Counts only, never an event's content.
 */
export class FlowCounters {
  readonly #minutes = new Map<number, Record<Flow, number>>();
  readonly #calls: Array<{ at: number; ms: number }> = [];
  readonly #now: () => number;

  constructor(now: () => number = Date.now) {
    this.#now = now;
  }

  add(flow: Flow, count: number): void {
    const minute = Math.floor(this.#now() / MINUTE_MS);
    let counts = this.#minutes.get(minute);
    if (!counts) {
      counts = { accepted: 0, delivered: 0, retrying: 0, deadLettered: 0 };
      this.#minutes.set(minute, counts);
      // Only the last hour is ever shown: older minutes go as new ones come.
      for (const old of this.#minutes.keys())
        if (old <= minute - KEPT_MINUTES) this.#minutes.delete(old);
    }
    counts[flow] += count;
  }

  mauticCall(ms: number): void {
    const at = this.#now();
    this.#calls.push({ at, ms });
    while ((this.#calls[0]?.at ?? at) < at - 5 * MINUTE_MS) this.#calls.shift();
  }

  report(): FlowReport {
    const now = this.#now();
    const last = Math.floor(now / MINUTE_MS);
    const first = last - KEPT_MINUTES + 1;
    const counts = Object.fromEntries(FLOWS.map((flow) => [flow, [] as number[]])) as Record<
      Flow,
      number[]
    >;
    for (let minute = first; minute <= last; minute++)
      for (const flow of FLOWS) counts[flow].push(this.#minutes.get(minute)?.[flow] ?? 0);
    const recent = this.#calls.filter(({ at }) => at >= now - 5 * MINUTE_MS);
    const total = recent.reduce((sum, { ms }) => sum + ms, 0);
    return {
      start: new Date(first * MINUTE_MS).toISOString(),
      periodSeconds: 60,
      counts,
      mautic: {
        calls: recent.length,
        meanMs: recent.length === 0 ? null : Math.round(total / recent.length),
      },
    };
  }
}

/**
 * The batch function's Powertools metrics, counted here too: the handler emits them as in the
 * cloud (where they reach CloudWatch), and the counters see the same numbers.
 */
export class CountingMetrics extends Metrics {
  readonly #counters: FlowCounters;

  constructor(counters: FlowCounters, options: ConstructorParameters<typeof Metrics>[0]) {
    super(options);
    this.#counters = counters;
  }

  override addMetric(...args: Parameters<Metrics['addMetric']>): this {
    const [name, , value] = args;
    const flow = COUNTED[name];
    if (flow) this.#counters.add(flow, value);
    if (name === 'MauticLatency') this.#counters.mauticCall(value);
    return super.addMetric(...args);
  }
}
