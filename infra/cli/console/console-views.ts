import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError } from '../../../functions/core/errors.ts';
import type { CliIo, Command } from '../command.ts';
import { SetupError, UsageError } from '../errors.ts';
import { parseOptions } from '../options.ts';

/** What a view answers: an HTTP status and a JSON body. */
export interface Answer {
  status: number;
  body: unknown;
}

/**
 * The console's views run the operator commands themselves, with `--json`, on the console's
 * target: what the page shows is what the CLI prints, through the same modules (no second
 * implementation). A command is found by name: one more view's command is a line in the
 * console's list.
 */
export interface CommandRunner {
  /** `name args… --json` on the console's target; its JSON, or its message as an error. */
  run(name: string, args: string[]): Promise<Answer>;
}

export function commandRunner(
  commands: ReadonlyArray<Command>,
  targetArgs: ReadonlyArray<string>,
  io: CliIo,
): CommandRunner {
  const named = new Map(commands.map((command) => [command.name, command]));
  return {
    run: async (name, args) => {
      const command = named.get(name);
      if (!command) return { status: 501, body: { error: `${name} is not in this version` } };
      return runJson(command, [...args, ...targetArgs, '--json'], io);
    },
  };
}

/**
 * One command, its stdout taken as its JSON document and its stderr as notes (the CLI's own
 * words, which hold no secret or record content). A usage mistake is a 400, what cannot be
 * reached a 503, a command that ran and failed answers its JSON with `failed`.
 */
async function runJson(command: Command, argv: string[], io: CliIo): Promise<Answer> {
  const out: string[] = [];
  const notes: string[] = [];
  const quiet: CliIo = {
    ...io,
    stdout: (line) => out.push(line),
    stderr: (text) => notes.push(text.trim()),
    progressBar: false,
    interrupted: () => false,
    readStdin: () => Promise.reject(new UsageError('the console gives no stdin')),
    readSecret: () => Promise.reject(new UsageError('the console reads no secret')),
  };
  try {
    const { values, positionals } = parseOptions(command, argv);
    const code = await command.run(values, positionals, quiet);
    const text = out.join('\n').trim();
    const json: unknown = text === '' ? null : JSON.parse(text);
    return {
      status: 200,
      body: { result: json, failed: code !== 0, notes: notes.filter(Boolean) },
    };
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    if (error instanceof UsageError || error instanceof ConfigError)
      return { status: 400, body: { error: message } };
    if (error instanceof SetupError) return { status: 503, body: { error: message } };
    return { status: 500, body: { error: `${command.name} failed: ${message}` } };
  }
}

/**
 * A payload pasted in the playground, as the file `sources test --payload` reads: in a
 * directory of its own, readable by this user only, removed as soon as the test is done.
 */
export async function withPayloadFile<T>(
  payload: string,
  use: (path: string) => Promise<T>,
): Promise<T> {
  const dir = mkdtempSync(join(tmpdir(), 'mautic-relay-console-'));
  try {
    const path = join(dir, 'payload.json');
    writeFileSync(path, payload, { mode: 0o600 });
    return await use(path);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
