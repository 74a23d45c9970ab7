/**
 * Mautic's shared health as it is stored (`circuit.ts` decides with it): the data and its
 * schema, which the store's adapter and the operator's `status` read it with.
 */
import { lazy } from './lazy.ts';
import * as z from './zod.ts';

const circuitNames = ['closed', 'open', 'half_open'] as const;

/** The shared state, as stored (its schema checks what a store hands back); built at first use. */
const healthStateSchema = lazy(() =>
  z.object({
    circuit: z.enum(circuitNames),
    /** When the circuit entered this state (epoch ms). */
    since: z.number(),
    /** Open: no call before this; the events held come back then, together (a point of the grid). */
    nextProbeAt: z.optional(z.number()),
    /** Open or half-open: the probe interval in force, `probeBaseMs × 2^k`. */
    probeIntervalMs: z.optional(z.number()),
    /** Half-open: the call that probes, and until when its lease holds (then another may). */
    probe: z.optional(z.object({ holder: z.string(), until: z.number() })),
    /** Closed: the distinct calls that failed as Mautic failing since the last answered one. */
    failures: z.array(z.object({ call: z.string(), at: z.number() })),
    /** The last failure that said Mautic is down (never a token or a record's content). */
    lastFailure: z.optional(z.object({ status: z.optional(z.number()), message: z.string() })),
    /** Mautic's time per item: its recent level (fast average) and its usual one (slow), in ms. */
    msPerItem: z.optional(z.number()),
    usualMsPerItem: z.optional(z.number()),
    /** Calls in flight allowed across invocations; absent or the ceiling: not paced. */
    allowance: z.optional(z.number()),
    /** When the allowance last changed. */
    pacedAt: z.optional(z.number()),
    /** While paced: each call in flight by its holder, with the end of its lease. */
    slots: z.record(z.string(), z.number()),
    /** While paced: the calls waiting for a slot, first come first served, each until it gives up. */
    queue: z.optional(z.array(z.object({ holder: z.string(), until: z.number() }))),
  }),
);
export type HealthState = z.infer<ReturnType<typeof healthStateSchema>>;

/** The key of the item that holds it in the de-duplication table (no TTL: never swept). */
export const HEALTH_ITEM_KEY = 'mautic#health';

/** The stored JSON as a state, or undefined when it is not one (another release's, or broken). */
export function parseHealthState(text: string | undefined): HealthState | undefined {
  if (text === undefined) return undefined;
  try {
    const parsed = healthStateSchema().safeParse(JSON.parse(text));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}
