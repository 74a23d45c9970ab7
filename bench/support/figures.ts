/**
 * What every bench reads and prints the same way: its positional arguments, nearest-rank
 * percentiles, rounded figures for the `SUMMARY {json}` line, and the load average that tells a
 * reader how busy the machine was meanwhile. Kept in one place so that two benches' p99 or load
 * figures mean the same thing.
 */
import { loadavg } from 'node:os';

/** A positional argument that must be a positive integer; `fallback` when it is absent. */
export function positiveInteger(text: string | undefined, fallback: number, name: string): number {
  if (text === undefined) return fallback;
  const value = Number(text);
  if (!Number.isInteger(value) || value < 1)
    throw new RangeError(`${name} must be a positive integer`);
  return value;
}

/** Nearest-rank percentile of sorted values. */
export function percentile(sorted: ReadonlyArray<number>, fraction: number): number {
  const rank = Math.max(1, Math.ceil(fraction * sorted.length));
  return sorted[rank - 1] ?? Number.NaN;
}

/** `value` to `digits` decimals, as a number, so that the SUMMARY line stays readable. */
export function round(value: number, digits: number): number {
  return Number(value.toFixed(digits));
}

/** The 1, 5 and 15 minute load averages as a bench's header shows them: "0.52 0.61 0.70". */
export function loadAverage(): string {
  return loadavg()
    .map((value) => value.toFixed(2))
    .join(' ');
}
