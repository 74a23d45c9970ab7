/**
 * Where the `/sources/{name}` endpoint finds its sources (contract §6). Locally the document is a
 * file with the secrets in it, compiled whole and replaced whole when the file changes
 * (`ReloadableSourceRegistry`). In the cloud the document comes with the deployment and each
 * source's secrets live in a Secrets Manager secret of their own, read at cold start and again
 * after a cache period, so that setting or rotating one needs no deploy (`StoredSecretSources`).
 */
import { describeError, SourceConfigError } from './errors.ts';
import type { Clock, Logger } from './ports.ts';
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

/** Where each source's stored secret is read: the text as stored, undefined when it has none. */
export interface SourceSecretStore {
  read(names: ReadonlyArray<string>): Promise<ReadonlyMap<string, string | undefined>>;
}

interface StoredSecretOptions {
  store: SourceSecretStore;
  /** How long secrets read are used before they are read again. */
  cacheMs: number;
  clock: Clock;
  logger: Logger;
  limits?: CompileOptions['limits'];
}

/**
 * The cloud's sources: the document's definitions (which hold no secret), each compiled with the
 * secrets its stored secret holds. `refresh()` reads them once the cache period has passed; call
 * it before a request. A source whose secret is not set yet authenticates nothing (its requests
 * get 401) and is named in a warning; a stored value that cannot work is named in an error and
 * the source keeps the secrets it had. Neither ever quotes a secret.
 */
export class StoredSecretSources implements SourceRegistry {
  readonly #definitions: ReadonlyArray<SourceDefinition>;
  readonly #options: StoredSecretOptions;
  readonly #sources = new Map<string, CompiledSource>();
  /** Each source's stored text as last compiled, to recompile only what changed. */
  readonly #stored = new Map<string, string | undefined>();
  #readAt: number | undefined;

  /**
   * Throws a `SourceConfigError` naming the source and the problem when an expression does not
   * compile: before any secret is read, so that a bad document stops the function at once.
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
   * Reads the stored secrets when the cache period has passed (always, the first time). The first
   * read's failure throws: the function cannot start without knowing its sources. A later one
   * keeps the secrets in hand for another period and is logged.
   */
  async refresh(): Promise<void> {
    const { clock, cacheMs, store, logger } = this.#options;
    const now = clock.now();
    const first = this.#readAt === undefined;
    if (!first && now - (this.#readAt as number) < cacheMs) return;
    this.#readAt = now;
    let stored: ReadonlyMap<string, string | undefined>;
    try {
      stored = await store.read(this.#definitions.map((definition) => definition.name));
    } catch (error) {
      if (first) throw error;
      logger.error('Could not read the sources’ secrets; still using the last ones read', {
        error: describeError(error),
      });
      return;
    }
    for (const definition of this.#definitions) {
      const text = stored.get(definition.name);
      if (!this.#stored.has(definition.name) || this.#stored.get(definition.name) !== text) {
        this.#take(definition, text);
      }
    }
  }

  /**
   * Compiles `definition` (whose expressions compile: the constructor checked) with the secrets
   * of `text`, or keeps what it had when they cannot work.
   */
  #take(definition: SourceDefinition, text: string | undefined): void {
    const { logger, limits } = this.#options;
    const name = definition.name;
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
      const had = this.#sources.has(name);
      if (!had) {
        // Compiled without secrets, so that it answers 401 rather than 404.
        const bare = compileSources([definition], {
          secretsFor: () => [],
          requireSecrets: false,
          limits,
        });
        this.#sources.set(name, bare.get(name) as CompiledSource);
      }
      const outcome = had
        ? 'the source keeps the secrets it had'
        : 'its requests are refused (401) until a good one is set';
      logger.error(`${error.message}; ${outcome}`, { source: name });
    }
  }
}
