/**
 * Where the `/sources/{name}` endpoint finds its sources (contract §6). Locally the document is a
 * file with the secrets in it, compiled whole and replaced whole when the file changes
 * (`ReloadableSourceRegistry`). In the cloud the document comes with the deployment and each
 * source's secrets live in a Secrets Manager secret of their own, read at cold start and again
 * after a cache period, so that setting or rotating one needs no deploy (`StoredSecretSources`).
 */
import { describeError, SourceConfigError } from '../errors.ts';
import type { Clock, Logger, SourceSecretStore, StoredSourceSecret } from '../ports.ts';
import {
  type CompiledSource,
  type CompileOptions,
  compileSources,
  parseSourcesDocument,
  type SourceDefinition,
  type SourceRegistry,
} from './sources.ts';

/**
 * Parses and compiles a sources document given as JSON text. Throws a `SourceConfigError` naming
 * the source and the problem; JSON that does not parse is named by line and column only, since
 * the text around the fault may be a secret.
 */
export function compileSourcesText(
  text: string,
  options: CompileOptions = {},
): ReadonlyMap<string, CompiledSource> {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new SourceConfigError(undefined, `is not JSON${jsonErrorPlace(text, error)}`);
  }
  return compileSources(parseSourcesDocument(json), options);
}

/** ` (line L, column C)` from V8's "at position N", or '' when it gives none. */
function jsonErrorPlace(text: string, error: unknown): string {
  const position = /at position (\d+)/.exec(error instanceof Error ? error.message : '')?.[1];
  if (position === undefined) return text.trim() === '' ? ': the file is empty' : '';
  const before = text.slice(0, Number(position)).split('\n');
  return ` (line ${before.length}, column ${(before.at(-1)?.length ?? 0) + 1})`;
}

/**
 * The sources of one document at a time: `replace` swaps in a new version for the next request,
 * which a request already running does not see (it holds its `CompiledSource`).
 */
export class ReloadableSourceRegistry implements SourceRegistry {
  #sources: ReadonlyMap<string, CompiledSource>;

  constructor(sources: ReadonlyMap<string, CompiledSource> = new Map()) {
    this.#sources = sources;
  }

  get(name: string): CompiledSource | undefined {
    return this.#sources.get(name);
  }

  /** The sources' names, in the document's order. */
  names(): string[] {
    return [...this.#sources.keys()];
  }

  replace(sources: ReadonlyMap<string, CompiledSource>): void {
    this.#sources = sources;
  }
}

/** Most secrets one source may hold at once, as the document allows (`verify.secrets`). */
export const MAX_SOURCE_SECRETS = 10;

/**
 * A source's stored secret value: `{"secrets":["…"]}`, newest first; `{}` (how the stack creates
 * it) holds none yet. Throws a `SourceConfigError` for anything else, never quoting the value.
 */
export function parseSourceSecret(source: string, text: string | undefined): string[] {
  let value: unknown;
  try {
    value = JSON.parse(text ?? '{}');
  } catch {
    value = undefined;
  }
  const secrets = (value as { secrets?: unknown } | undefined)?.secrets;
  if (typeof value === 'object' && value !== null && !Array.isArray(value)) {
    if (secrets === undefined) return [];
    if (
      Array.isArray(secrets) &&
      secrets.length <= MAX_SOURCE_SECRETS &&
      secrets.every((secret) => typeof secret === 'string')
    ) {
      return secrets as string[];
    }
  }
  throw new SourceConfigError(
    source,
    `the stored secret must be {"secrets":[…]} with at most ${MAX_SOURCE_SECRETS} strings; set it again with "npx mautic-relay sources set-secret ${source}"`,
  );
}

/** The stored form of a source's secrets (see `parseSourceSecret`). */
export function formatSourceSecret(secrets: ReadonlyArray<string>): string {
  return JSON.stringify({ secrets });
}

interface StoredSecretOptions {
  store: SourceSecretStore;
  /** How long secrets read are used before they are read again. */
  cacheMs: number;
  clock: Clock;
  logger: Logger;
  limits?: CompileOptions['limits'];
}

/** How soon a secret that could not be read is tried again (or the cache period, if shorter). */
const UNREADABLE_RETRY_MS = 15_000;

/**
 * The cloud's sources: the document's definitions (which hold no secret), each compiled with the
 * secrets its stored secret holds. `refresh()` reads them once the cache period has passed; call
 * it before a request. A source whose secret is not set yet authenticates nothing (its requests
 * get 401) and is named in a warning; a stored value that cannot work is named in an error and
 * the source keeps the secrets it had. A secret that cannot be read (the store refused or
 * failed) is named in an error: the source keeps the secrets it had, or, having none, answers
 * 503 until a read succeeds, tried again within 15 s; the other sources and `/events` go on.
 * Nothing here ever quotes a secret.
 */
export class StoredSecretSources implements SourceRegistry {
  readonly #definitions: ReadonlyArray<SourceDefinition>;
  readonly #options: StoredSecretOptions;
  readonly #sources = new Map<string, CompiledSource>();
  /** Each source's stored text as last compiled, to recompile only what changed. */
  readonly #stored = new Map<string, string | undefined>();
  /** The sources whose secret could not be read at the last try: read again sooner, alone. */
  readonly #unread = new Set<string>();
  #nextReadAt = Number.NEGATIVE_INFINITY;
  #nextRetryAt = Number.NEGATIVE_INFINITY;

  /**
   * Throws a `SourceConfigError` naming the source and the problem when an expression does not
   * compile: before any secret is read, so that a bad document stops the function at once.
   * `loadSourceCompiler()` must have been awaited.
   */
  constructor(definitions: ReadonlyArray<SourceDefinition>, options: StoredSecretOptions) {
    compileSources(definitions, { requireSecrets: false, limits: options.limits });
    this.#definitions = definitions;
    this.#options = options;
  }

  get(name: string): CompiledSource | undefined {
    return this.#sources.get(name);
  }

  /**
   * Reads every stored secret when the cache period has passed (always, the first time), and in
   * between, every 15 s, only those that could not be read. Never throws for a secret that
   * cannot be read: the function starts, and that source alone answers 503.
   */
  async refresh(): Promise<void> {
    const { clock, cacheMs, store } = this.#options;
    const now = clock.now();
    const all = now >= this.#nextReadAt;
    if (!all && (this.#unread.size === 0 || now < this.#nextRetryAt)) return;
    if (all) this.#nextReadAt = now + cacheMs;
    this.#nextRetryAt = now + Math.min(cacheMs, UNREADABLE_RETRY_MS);
    const definitions = all
      ? this.#definitions
      : this.#definitions.filter(({ name }) => this.#unread.has(name));
    let stored: ReadonlyMap<string, StoredSourceSecret>;
    try {
      stored = await store.read(definitions.map((definition) => definition.name));
    } catch (error) {
      // A store that breaks its promise of one answer per source: every source unread.
      stored = new Map(definitions.map(({ name }) => [name, { unreadable: error }]));
    }
    for (const definition of definitions) {
      const secret = stored.get(definition.name) ?? { unreadable: new Error('no answer') };
      if ('unreadable' in secret) this.#unreadable(definition, secret.unreadable);
      else {
        this.#unread.delete(definition.name);
        if (this.#stored.get(definition.name) !== secret.text || !this.#stored.has(definition.name))
          this.#take(definition, secret.text);
      }
    }
  }

  /** A secret that could not be read: the source stays as it was, or answers 503 for now. */
  #unreadable(definition: SourceDefinition, error: unknown): void {
    const name = definition.name;
    this.#unread.add(name);
    const had = this.#stored.has(name);
    if (!had) this.#sources.set(name, { ...this.#bare(definition), secretUnreadable: true });
    this.#options.logger.error(
      `Source "${name}": its secret could not be read; ${had ? 'the source stays as it was' : 'its requests get 503 (send again) until it can be'}, tried again within ${UNREADABLE_RETRY_MS / 1000} s`,
      { event: 'source_secret_unreadable', source: name, error: describeError(error) },
    );
  }

  /** The source compiled without secrets: it answers 401 rather than 404. */
  #bare(definition: SourceDefinition): CompiledSource {
    const bare = compileSources([definition], {
      secretsFor: () => [],
      requireSecrets: false,
      limits: this.#options.limits,
    });
    return bare.get(definition.name) as CompiledSource;
  }

  /**
   * Compiles `definition` (whose expressions compile: the constructor checked) with the secrets
   * of `text`, or keeps what it had when they cannot work.
   */
  #take(definition: SourceDefinition, text: string | undefined): void {
    const { logger, limits } = this.#options;
    const name = definition.name;
    const had = this.#stored.has(name);
    this.#stored.set(name, text);
    try {
      const secrets = parseSourceSecret(name, text);
      const compiled = compileSources([definition], {
        secretsFor: () => secrets,
        requireSecrets: false,
        limits,
      });
      this.#sources.set(name, compiled.get(name) as CompiledSource);
      if (secrets.length === 0) {
        logger.warn(
          `Source "${name}" has no secret yet: its requests are refused (401) until one is set with "npx mautic-relay sources set-secret ${name} --env <environment>"`,
          { source: name },
        );
      }
    } catch (error) {
      if (!(error instanceof SourceConfigError)) throw error;
      if (!had) this.#sources.set(name, this.#bare(definition));
      const outcome = had
        ? 'the source keeps the secrets it had'
        : 'its requests are refused (401) until a good one is set';
      logger.error(`${error.message}; ${outcome}`, { source: name });
    }
  }
}
