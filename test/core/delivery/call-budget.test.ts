import { describe, expect, it } from 'vitest';
import {
  callTimeoutMs,
  DEFAULT_CALL_TIMEOUT_MS,
  itemsThatFit,
  nextBatchFits,
} from '../../../functions/core/delivery/call-budget.ts';
import {
  LEARN_MIN_ITEMS,
  MauticItemTime,
} from '../../../functions/core/delivery/mautic-item-time.ts';

describe("Mautic's observed time per item", () => {
  it('knows nothing until a call of enough items was answered', () => {
    const time = new MauticItemTime();
    time.observe(1, 500);
    time.observe(LEARN_MIN_ITEMS - 1, 5_000);
    expect(time.msPerItem).toBeUndefined();
    time.observe(200, 5_000);
    expect(time.msPerItem).toBe(25);
  });

  it('moves half way towards a full call, less for a smaller one', () => {
    const full = new MauticItemTime();
    full.observe(200, 5_000);
    full.observe(200, 10_000);
    expect(full.msPerItem).toBeCloseTo(37.5);

    const partial = new MauticItemTime();
    partial.observe(200, 5_000);
    partial.observe(50, 2_500);
    // A quarter of a call: 1 − 0.5^0.25 ≈ 0.159 of the way from 25 to 50.
    expect(partial.msPerItem).toBeCloseTo(25 + 25 * (1 - 0.5 ** 0.25));
  });

  it('a Mautic that slowed down is believed within a few calls', () => {
    const time = new MauticItemTime();
    for (let i = 0; i < 10; i++) time.observe(200, 1_000);
    for (let i = 0; i < 4; i++) time.observe(200, 6_000);
    expect(time.msPerItem).toBeGreaterThan(28);
  });

  it('ignores nonsense', () => {
    const time = new MauticItemTime();
    time.observe(Number.NaN, 100);
    time.observe(100, -1);
    time.observe(100, Number.NaN);
    expect(time.msPerItem).toBeUndefined();
  });
});

describe('the budget of one call', () => {
  it.each([
    // [items, ms per item, cap, timeout]
    [200, undefined, undefined, DEFAULT_CALL_TIMEOUT_MS],
    [200, undefined, 5_000, 5_000],
    [200, 25, undefined, 20_000],
    [200, 100, undefined, 80_000],
    [200, 100, 60_000, 60_000],
    // A call's own part is not per item: never under 10 s.
    [200, 1, undefined, 10_000],
    [1, 25, undefined, 10_000],
  ])('%i items at %s ms each, capped at %s: a timeout of %i ms', (items, ms, cap, timeout) => {
    expect(callTimeoutMs(items, ms, cap)).toBe(timeout);
  });

  it.each([
    // [ms left, ms per item, items, that fit]
    [7_500, 25, 200, 200],
    [7_499, 25, 200, 199],
    [3_750, 25, 200, 100],
    [30, 25, 200, 0],
    [-5, 25, 200, 0],
    // Nothing observed: the batch is not guessed smaller.
    [1_000, undefined, 200, 200],
  ])('%i ms left at %s ms per item: %i items, %i fit', (left, ms, items, fit) => {
    expect(itemsThatFit(left, ms, items)).toBe(fit);
  });

  it('goes on to a next batch only when both are expected to end in time', () => {
    const batch = { current: 200, batchSize: 200, gatherMs: 2_000 };
    expect(nextBatchFits(15_000, 25, batch)).toBe(true);
    expect(nextBatchFits(14_999, 25, batch)).toBe(false);
    // The next batch cannot start before its gathering is over.
    expect(nextBatchFits(15_000, 25, { ...batch, gatherMs: 8_000 })).toBe(false);
    expect(nextBatchFits(15_500, 25, { ...batch, gatherMs: 8_000 })).toBe(true);
    expect(nextBatchFits(1_000_000, undefined, batch)).toBe(false);
  });
});
