/**
 * Every Mautic call passes Mautic's shared health (`mautic-health.ts`, contract §2: Mautic's
 * health sets the pace): the gate that admits, holds or paces a call and records what its answer
 * or failure says of Mautic, and the choice of the one small item a call probes with.
 */
import { IN_CALL_RETRY } from '../retry-policy.ts';
import { isUpserted } from './answer-policy.ts';
import type { Chunk, PlannedItem } from './batch-plan.ts';
import { callKey } from './circuit.ts';
import type { CallKind, DeliveryDeps } from './delivery-calls.ts';
import type { MessageOutcome } from './failure-policy.ts';

/** A call through the health gate: answered, failed, or its items held without a call. */
export type GatedCall<T> =
  | { kind: 'held'; outcome: MessageOutcome }
  | { kind: 'probe_one' }
  | { kind: 'answered'; answer: T; started: number }
  | { kind: 'failed'; error: unknown; started: number };

/**
 * One Mautic call, admitted by Mautic's shared health first (`mautic-health.ts`): held while the
 * circuit is open (waited for when the next probe comes within 15 s), the probe when one
 * is due, in a slot while paced; what its answer or failure says of Mautic is recorded for every
 * invocation. `leaseUntil`: when the call is aborted at the latest.
 */
export async function gatedCall<T>(
  { health, clock, itemTime }: Pick<DeliveryDeps, 'health' | 'clock' | 'itemTime'>,
  call: {
    items: ReadonlyArray<PlannedItem>;
    kind: CallKind;
    /**
     * The delivery run's: no call starts after `callsUntil`, each is aborted by `leaseUntil`. It
     * waits for a probe once at most: once its items were held or its probe failed, the rest are
     * held at once, so the invocation ends soon and never waits probe after probe.
     */
    run: { mayWait: boolean; callsUntil: number; leaseUntil: number };
  },
  send: () => Promise<T>,
): Promise<GatedCall<T>> {
  // A wait leaves the call its own expected time (Mautic's pace) before calls must stop.
  const expected = 1.5 * (itemTime?.msPerItem ?? 0) * call.items.length;
  const waitMs = call.run.mayWait ? IN_CALL_RETRY.maxInRunWaitMs : 0;
  const waitUntil = Math.min(call.run.callsUntil - expected, clock.now() + waitMs);
  // A lookup is one small call whatever its references: it may probe whole.
  const several = call.kind !== 'lookup' && call.items.length > 1;
  const admission = await health?.admit({ waitUntil, leaseUntil: call.run.leaseUntil, several });
  if (admission?.kind === 'probe_one') return admission;
  if (admission?.kind === 'hold') {
    if (admission.outcome.reason === 'mautic_unavailable') call.run.mayWait = false;
    return { kind: 'held', outcome: admission.outcome };
  }
  const ticket = admission?.ticket;
  const started = clock.now();
  try {
    const answer = await send();
    // A lookup's time says nothing of the time per item of a write.
    const items = call.kind === 'lookup' ? 0 : call.items.length;
    if (health && ticket) await health.answered(ticket, { items, ms: clock.now() - started });
    return { kind: 'answered', answer, started };
  } catch (error) {
    const key = callKey(call.items.flatMap((item) => item.messageIds));
    if (health && ticket) await health.failed(ticket, key, error);
    if (ticket?.probe) call.run.mayWait = false;
    return { kind: 'failed', error, started };
  }
}

/**
 * While Mautic's circuit is open, a call of several items is first made with one alone, the probe
 * (contract §2: one small call): an item that is safe to send again (not a create Mautic might
 * double unseen), else the first; then the rest. Undefined when the call may go whole (closed, or
 * another call probing: it waits for that one's answer).
 */
export function probeItem(
  { health, mauticVersion }: Pick<DeliveryDeps, 'health' | 'mauticVersion'>,
  chunk: Chunk,
  items: ReadonlyArray<PlannedItem>,
): { probe: PlannedItem; rest: PlannedItem[] } | undefined {
  // While another call probes, the whole call waits for its answer instead.
  if (items.length < 2 || health === undefined || health.closed() || health.probing())
    return undefined;
  const probe =
    items.find(
      (item) =>
        chunk.action !== 'create' || isUpserted(chunk.entity, item.payload, mauticVersion?.value),
    ) ?? items[0];
  if (probe === undefined) return undefined;
  return { probe, rest: items.filter((item) => item !== probe) };
}
