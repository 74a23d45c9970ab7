/**
 * The rules the functions read their environment by (config.ts): plain functions, not zod
 * schemas. Every cold start reads the environment, and building and first running the schemas
 * of a function's configuration took several milliseconds of its INIT (issue 38); these rules
 * take microseconds. Each rule returns a variable's value, read from the environment's string,
 * or throws a `SettingProblem` saying what is wrong with it; `readSettings` names the variable.
 */
import { ConfigError, SettingProblem } from '../core/errors.ts';

/** One variable's rule: its value read from the environment, or a `SettingProblem` thrown. */
export type Rule<T> = (value: string | undefined) => T;

/** What a record of rules reads: each variable's value. */
export type Settings<R extends Record<string, Rule<unknown>>> = {
  [name in keyof R]: ReturnType<R[name]>;
};

/**
 * A rule across variables, checked once each is valid: the variable it names and the problem
 * when it is broken, else undefined.
 */
export type CrossCheck<S> = (settings: S) => [name: string, problem: string] | undefined;

function wrong(problem: string): never {
  throw new SettingProblem(problem);
}

/**
 * Reads each variable of `rules` from `env` and, when every one is valid, checks `across` them.
 * A `ConfigError` names every problem found, each as `NAME problem` (never a value).
 */
export function readSettings<R extends Record<string, Rule<unknown>>>(
  env: Readonly<Record<string, string | undefined>>,
  rules: R,
  across: ReadonlyArray<CrossCheck<Settings<R>>> = [],
): Settings<R> {
  const values: Record<string, unknown> = {};
  const problems: string[] = [];
  for (const [name, rule] of Object.entries(rules)) {
    try {
      values[name] = rule(env[name]);
    } catch (error) {
      if (!(error instanceof SettingProblem)) throw error;
      problems.push(`${name} ${error.message}`);
    }
  }
  const settings = values as Settings<R>;
  if (problems.length === 0) {
    for (const check of across) {
      const broken = check(settings);
      if (broken !== undefined) problems.push(broken.join(' '));
    }
  }
  if (problems.length > 0) throw new ConfigError(`Invalid configuration: ${problems.join('; ')}`);
  return settings;
}

/** Set and not empty. */
export const required: Rule<string> = (value) =>
  value === undefined || value === '' ? wrong('is required') : value;

/** Unset, or set and not empty. */
export const optional: Rule<string | undefined> = (value) =>
  value === '' ? wrong('must not be empty') : value;

/** A whole number in [min, max]; unset, `fallback`. */
export function integer(min: number, max: number): Rule<number | undefined>;
export function integer(min: number, max: number, fallback: number): Rule<number>;
export function integer(min: number, max: number, fallback?: number): Rule<number | undefined> {
  return (value) => {
    if (value === undefined) return fallback;
    if (!/^\d+$/.test(value)) return wrong('must be a whole number');
    const number = Number(value);
    if (number < min) return wrong(`must be at least ${min}`);
    if (number > max) return wrong(`must be at most ${max}`);
    return number;
  };
}

/** A comma-separated list, each item trimmed and empty ones dropped; unset, empty. */
export const commaList: Rule<string[]> = (value) =>
  (value ?? '')
    .split(',')
    .map((item) => item.trim())
    .filter((item) => item !== '');

/** A comma-separated list (`commaList`) whose every item matches `pattern`; `problem` if not. */
export function listOf(pattern: RegExp, problem: string): Rule<string[]> {
  return (value) => {
    const items = commaList(value);
    return items.every((item) => pattern.test(item)) ? items : wrong(problem);
  };
}

/**
 * An http(s) URL with its `//`, trimmed, without the tabs and line breaks the URL parser would
 * ignore (as zod's `z.url` read it before).
 */
export const httpUrl: Rule<string> = (value) => {
  const trimmed = value?.trim() ?? '';
  if (!/^https?:\/\//i.test(trimmed) || !URL.canParse(trimmed))
    return wrong('must be an http(s) URL');
  return trimmed.replace(/[\t\n\r]/g, '');
};
