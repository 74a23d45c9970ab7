#!/usr/bin/env node
/**
 * `npx mautic-relay`: the operator commands (contract §4, and `--help`). AWS is reached through
 * the usual AWS environment (AWS_REGION or AWS_PROFILE, and credentials); `--local` commands
 * find the running `npm start` from the endpoints file it keeps.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { runCli } from './cli.ts';
import { UsageError } from './errors.ts';

// A reader that stops early (`… | head`) closes the pipe: what is left to print has nowhere to
// go, which is no failure of the command. Any other write error is.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code !== 'EPIPE') throw error;
    process.exit(process.exitCode ?? 0);
  });
}

let interrupted = false;
process.on('SIGINT', () => {
  // A second Ctrl-C stops at once; the first lets the batch in hand finish.
  if (interrupted) process.exit(130);
  interrupted = true;
  process.stderr.write('\nStopping after the batch in hand (Ctrl-C again to stop now)…\n');
});

process.exitCode = await runCli(process.argv.slice(2), {
  stdout: (line) => process.stdout.write(`${line}\n`),
  stderr: (text) => process.stderr.write(text),
  env: process.env,
  progressBar: process.stderr.isTTY === true,
  now: Date.now,
  sleep: (ms) => sleep(ms),
  interrupted: () => interrupted,
  readStdin: readStdinBytes,
  readSecret,
});

/** All of stdin, byte for byte. */
async function readStdinBytes(): Promise<Uint8Array> {
  if (process.stdin.isTTY)
    process.stderr.write('Reading the JSON body from stdin (end with Ctrl-D)\n');
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/**
 * A secret from stdin: typed at a terminal, without echo (raw mode until Enter; Backspace
 * deletes, Ctrl-U clears, Ctrl-C cancels); piped, all of stdin, trimmed.
 */
async function readSecret(prompt: string): Promise<string> {
  const stdin = process.stdin;
  if (!stdin.isTTY) {
    const chunks: Buffer[] = [];
    for await (const chunk of stdin) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks).toString('utf8').trim();
  }

  process.stderr.write(prompt);
  const wasRaw = stdin.isRaw;
  let onData: (chunk: string) => void = () => {};
  let onEnd: () => void = () => {};
  try {
    stdin.setRawMode(true);
    stdin.setEncoding('utf8');
    return await new Promise<string>((resolve, reject) => {
      let typed: string[] = [];
      onEnd = () => resolve(typed.join('').trim());
      onData = (chunk) => {
        // Arrow keys and the like arrive as escape sequences: none of them is part of a secret.
        // biome-ignore lint/suspicious/noControlCharactersInRegex: matches terminal escape sequences.
        const keys = chunk.replace(/\x1b\[[0-9;?]*[ -/]*[@-~]|\x1bO.|\x1b/g, '');
        for (const key of keys) {
          if (key === '\r' || key === '\n' || key === '\x04') return onEnd();
          if (key === '\x03') return reject(new UsageError('Cancelled.'));
          if (key === '\x7f' || key === '\b') typed = typed.slice(0, -1);
          else if (key === '\x15') typed = [];
          else if (key >= ' ') typed.push(key);
        }
      };
      stdin.on('data', onData).once('end', onEnd);
      stdin.resume();
    });
  } finally {
    stdin.off('data', onData).off('end', onEnd);
    stdin.setRawMode(wasRaw);
    stdin.pause();
    process.stderr.write('\n');
  }
}
