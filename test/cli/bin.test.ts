import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';

/** The bin as a shell runs it; its output piped to a reader that may go away. */
function runBin(args: string[], options: { closeStdout: boolean }) {
  const child = spawn('node', ['infra/cli/mautic-relay.ts', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  // As `… | head` does once it has its lines: the read end is gone before the bin writes.
  if (options.closeStdout) child.stdout.destroy();
  let out = '';
  let err = '';
  child.stdout.on('data', (chunk: Buffer) => {
    out += chunk.toString();
  });
  child.stderr.on('data', (chunk: Buffer) => {
    err += chunk.toString();
  });
  return new Promise<{ code: number | null; out: string; err: string }>((resolve) =>
    child.once('close', (code) => resolve({ code, out, err })),
  );
}

describe('npx mautic-relay, the bin', () => {
  it('ends quietly when the reader of its output has gone (… | head): no stack trace', async () => {
    const { code, err } = await runBin(['help'], { closeStdout: true });
    expect(err).toBe('');
    expect(code).toBe(0);
  });

  it('prints as usual when the reader stays', async () => {
    const { code, out, err } = await runBin(['help'], { closeStdout: false });
    expect(out).toContain('Usage: npx mautic-relay COMMAND');
    expect(err).toBe('');
    expect(code).toBe(0);
  });
});
