/**
 * The stand-ins refuse a setting the cloud would refuse (a RangeError naming it), so the local
 * stack cannot be set up in a way the cloud could not.
 */
export function requireInteger(name: string, value: number, min: number, max: number): void {
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new RangeError(`${name} must be an integer from ${min} to ${max}, got ${value}`);
  }
}

export function requireRange(name: string, value: number, min: number, max: number): void {
  if (!Number.isFinite(value) || value < min || value > max) {
    throw new RangeError(`${name} must be a number from ${min} to ${max}, got ${value}`);
  }
}
