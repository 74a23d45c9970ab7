import { expect } from 'vitest';

/** Everything an error could show: name, message, stack, own fields and its cause chain. */
function everythingShownBy(error: unknown, depth = 0): string {
  if (depth > 5 || error === undefined || error === null) return '';
  if (!(error instanceof Error)) return String(error);
  const own = Object.entries(error)
    .map(([key, value]) => `${key}=${typeof value === 'object' ? safeJson(value) : String(value)}`)
    .join(' ');
  return `${error.name} ${error.message} ${error.stack ?? ''} ${own} ${everythingShownBy(error.cause, depth + 1)}`;
}

function safeJson(value: unknown): string {
  try {
    return JSON.stringify(value) ?? '';
  } catch {
    return '';
  }
}

/** Asserts that no secret appears anywhere in what the error shows. */
export function expectNoSecrets(error: unknown, secrets: ReadonlyArray<string>): void {
  const shown = everythingShownBy(error);
  expect(shown.length).toBeGreaterThan(0);
  for (const secret of secrets) {
    expect(secret.length).toBeGreaterThan(3);
    expect(shown).not.toContain(secret);
  }
}

/** Runs `action`, which must throw, and returns what it threw. */
export async function thrownBy(action: () => Promise<unknown>): Promise<unknown> {
  try {
    await action();
  } catch (error) {
    return error;
  }
  throw new Error('expected the call to throw, and it returned');
}
