import type { ParseArgsOptionsConfig } from 'node:util';

/** What the CLI talks to besides AWS; the bin passes the process's, tests their own. */
export interface CliIo {
  stdout: (line: string) => void;
  stderr: (text: string) => void;
  env: Readonly<Record<string, string | undefined>>;
  /** True when stderr is a terminal: progress bars are drawn there. */
  progressBar: boolean;
  now: () => number;
  sleep: (ms: number) => Promise<void>;
  /** True once Ctrl-C was pressed: a redrive stops after the batch in hand. */
  interrupted: () => boolean;
  readStdin: () => Promise<Uint8Array>;
  readSecret: (prompt: string) => Promise<string>;
}

/** The parsed options of a command, as node's parseArgs gives them. */
export type Values = Record<string, string | boolean | string[] | undefined>;

/**
 * An operator command, as its own module declares it: the dispatcher (cli.ts) lists it, prints
 * its help and parses its options, and the command does the rest.
 */
export interface Command {
  /** The word after `npx mautic-relay`. */
  name: string;
  usage: string;
  summary: string;
  /** The options and environment, for --help. */
  details: string;
  options: ParseArgsOptionsConfig;
  positionals: number;
  /** Checks everything it can before any AWS call; resolves the exit code. */
  run: (values: Values, positionals: string[], io: CliIo) => Promise<number>;
}
