/**
 * Sources (contract §6): the document an operator writes, `{ "sources": { "<name>": { verify,
 * filter?, map, idempotencyKey? } } }`, and its compilation into what the `/sources/{name}`
 * endpoint runs per request. Parsing checks the shape; compiling turns every JSONata expression
 * into a function once per document, never per request. Every problem is a `SourceConfigError`
 * naming the source and the problem, never a secret.
 */
import type jsonata from 'jsonata';
import {
  CredentialError,
  describeError,
  SourceConfigError,
  SourceEvaluationError,
} from '../errors.ts';
import { standardWebhookHeaders } from '../ingest/webhook-auth.ts';
import { lazy } from '../lazy.ts';
import * as z from '../zod.ts';
import { compiler } from './source-compiler.ts';
import {
  checkSourceSecrets,
  readableHeaders,
  refusedSourceCheck,
  type VerifyScheme,
  type VerifySettings,
  verifySchema,
  verifySource,
} from './source-verify.ts';

/** What a source may be called (contract §6): also what `/sources/{name}` looks up. */
export const SOURCE_NAME_PATTERN = /^[a-z][a-z0-9-]{0,63}$/;

/** One source as the document gives it. */
export interface SourceDefinition {
  name: string;
  verify: VerifySettings;
  /** The document's own secrets (`verify.secret` or `verify.secrets`); [] when it gives none. */
  secrets: string[];
  filter?: string | undefined;
  map: string;
  idempotencyKey?: string | undefined;
}

/** Request headers, names lower-case (as `IngestRequest` has them). */
type SourceHeaders = Readonly<Record<string, string | undefined>>;

/**
 * What a mapping yields: the events, not yet validated (the endpoint checks them with the
 * ingest's own rules), or why it failed. `pointer` is a JSON pointer (RFC 6901) into the list of
 * events the mapping yielded, `/<index>/<path inside the event>` (`eventPointer`), or `''` when
 * the mapping as a whole failed (it threw, timed out, or yielded no event objects).
 */
type MapResult =
  | { kind: 'events'; events: unknown[] }
  | { kind: 'failed'; error: string; pointer: string };

/** The pointer of a field of one mapped event: `pathInEvent` is a JSON pointer inside that event. */
export function eventPointer(index: number, pathInEvent = ''): string {
  return `/${index}${pathInEvent}`;
}

/**
 * The sources as configured now: the `/sources/{name}` endpoint asks it per request, so a new
 * version of the document (hot reload) takes effect for the next request. Undefined: no source
 * of that name.
 */
export interface SourceRegistry {
  get(name: string): CompiledSource | undefined;
}

/** A source ready for requests: its expressions compiled, its secrets in hand. */
export interface CompiledSource {
  readonly name: string;
  readonly verify: VerifySettings;
  /**
   * True when the source cannot check a request now because its secret could not be read (the
   * cloud's store failed): its requests get 503, to be sent again, not 401.
   */
  readonly secretUnreadable?: boolean;
  /** True when one of the source's secrets signed the raw body (never, when it has none). */
  authenticate(raw: Uint8Array, headers: SourceHeaders, nowMs: number): boolean;
  /** Which check refused a request `authenticate` refused, for the log (no value, no secret). */
  refusedCheck(headers: SourceHeaders, nowMs: number): string;
  /**
   * The headers the expressions see as `$headers`: all but the signature and credential ones.
   * What a `mapping_failed` dead letter keeps, so a redrive maps with what the first try saw.
   */
  mappingHeaders(headers: SourceHeaders): Record<string, string>;
  /**
   * Whether the request is for this relay: true without a filter; otherwise the filter's result
   * under JSONata's own truthiness (`$boolean`: nothing, `''`, `0`, `[]`, `{}` are false), as
   * its predicates use. Throws a `SourceEvaluationError` when the filter fails.
   */
  filter(body: unknown, headers: SourceHeaders): Promise<boolean>;
  /** The events the request carries; never throws (a failure is `{ kind: 'failed' }`). */
  map(body: unknown, headers: SourceHeaders): Promise<MapResult>;
  /**
   * The request's id for de-duplication, or undefined for none (the key yields nothing or `''`).
   * Without an `idempotencyKey`, the scheme's default: `stripe` the body's `id`, `shopify`
   * `X-Shopify-Webhook-Id`, `github` `X-GitHub-Delivery`, `standard-webhooks` its `webhook-id`
   * (or `svix-id`); none for `hmac` and `api-key`. Throws a `SourceEvaluationError` when the
   * expression fails or yields neither a string nor a number, or more than 256 characters.
   */
  idempotencyKey(body: unknown, headers: SourceHeaders): Promise<string | undefined>;
}

/**
 * Bounds on one evaluation. jsonata 2.2 enforces them itself (its "guardrails" options, see
 * docs/guardrails.md in jsonata-js/jsonata): before each step of its eval-apply loop it checks
 * the elapsed time (D1012) and the depth of that loop (D1011), and it caps every sequence it
 * builds (D2015). An outer timer could not do it: evaluation is a chain of microtasks, so no
 * timer fires until it ends. What they cannot stop is one slow native call, a catastrophic
 * regular expression above all; the operator writes the regexes, and the body is at most 1 MiB.
 */
interface EvaluationLimits {
  /** @default 500 */
  timeoutMs: number;
  /** Nesting of evaluation steps, which recursion grows. @default 500 (jsonata's own example) */
  maxDepth: number;
  /** Longest sequence, intermediate ones included. @default 1,000,000 */
  maxSequence: number;
}

const DEFAULT_EVALUATION_LIMITS: EvaluationLimits = {
  timeoutMs: 500,
  maxDepth: 500,
  maxSequence: 1_000_000,
};

export interface CompileOptions {
  /**
   * Each source's secrets when they live outside the document (in the cloud, Secrets Manager);
   * when given, it is the only place secrets come from. @default the document's own
   */
  secretsFor?: ((name: string) => ReadonlyArray<string>) | undefined;
  /**
   * Refuse a source without a secret, which could authenticate nothing. `sources test` and
   * `cdk synth`, which verify nothing, turn it off. @default true
   */
  requireSecrets?: boolean | undefined;
  limits?: Partial<EvaluationLimits> | undefined;
}

/** Reads a sources document (parsed JSON); throws a `SourceConfigError` at the first bad source. */
export function parseSourcesDocument(json: unknown): SourceDefinition[] {
  const document = schemas().document.safeParse(json);
  if (!document.success) throw new SourceConfigError(undefined, describeIssues(document.error));
  // The names are read from the input itself: zod's copy would turn a "__proto__" source (an
  // own key, as JSON.parse makes it) into a prototype, dropping it without a word.
  const sources = (json as { sources: Record<string, unknown> }).sources;
  return Object.entries(sources).map(([name, value]) => parseSource(name, value));
}

/**
 * Compiles every source's expressions, once, and gives each its secrets (see `CompileOptions`).
 * Throws a `SourceConfigError` naming the source, the expression's role and jsonata's message
 * and position for an expression that does not compile, or the source and the secret's position
 * for a secret that cannot work. `loadSourceCompiler()` must have been awaited.
 */
export function compileSources(
  definitions: ReadonlyArray<SourceDefinition>,
  options: CompileOptions = {},
): ReadonlyMap<string, CompiledSource> {
  const limits = { ...DEFAULT_EVALUATION_LIMITS, ...options.limits };
  const compiled = new Map<string, CompiledSource>();
  for (const definition of definitions) {
    if (compiled.has(definition.name)) {
      throw new SourceConfigError(definition.name, 'the name is given twice');
    }
    const secrets = options.secretsFor?.(definition.name) ?? definition.secrets;
    checkSecrets(definition.name, definition.verify, secrets);
    if (options.requireSecrets !== false && secrets.length === 0) {
      throw new SourceConfigError(definition.name, 'no secret is configured');
    }
    compiled.set(definition.name, compileSource(definition, [...secrets], limits));
  }
  return compiled;
}

type Role = 'filter' | 'map' | 'idempotencyKey';

function compileSource(
  definition: SourceDefinition,
  secrets: string[],
  limits: EvaluationLimits,
): CompiledSource {
  const { name, verify } = definition;
  const compile = (role: Role, text: string | undefined) =>
    text === undefined ? undefined : compileExpression(name, role, text, limits);
  const filter = compile('filter', definition.filter);
  const map = compile('map', definition.map) as jsonata.Expression;
  const key = compile('idempotencyKey', definition.idempotencyKey);
  const defaultKey = DEFAULT_KEYS[verify.scheme];
  const mappingHeaders = (headers: SourceHeaders) => readableHeaders(verify, headers);
  const evaluate = (expression: jsonata.Expression, body: unknown, headers: SourceHeaders) =>
    oneAtATime(() => expression.evaluate(body, { headers: mappingHeaders(headers) }));

  return {
    name,
    verify,
    authenticate: (raw, headers, nowMs) => verifySource(verify, secrets, raw, headers, nowMs),
    refusedCheck: (headers, nowMs) => refusedSourceCheck(verify, secrets.length, headers, nowMs),
    mappingHeaders,
    async filter(body, headers) {
      if (filter === undefined) return true;
      const result = await evaluate(filter, body, headers).catch((error: unknown) => {
        throw new SourceEvaluationError(name, 'filter', `filter: ${jsonataProblem(error)}`);
      });
      return typeof result === 'boolean'
        ? result
        : (await truthiness().evaluate(null, { v: result })) === true;
    },
    async map(body, headers) {
      try {
        return toEvents(await evaluate(map, body, headers));
      } catch (error) {
        return { kind: 'failed', error: `map: ${jsonataProblem(error)}`, pointer: '' };
      }
    },
    async idempotencyKey(body, headers) {
      if (key === undefined) return defaultKey?.(body, mappingHeaders(headers));
      const result = await evaluate(key, body, headers).catch((error: unknown) => {
        throw new SourceEvaluationError(
          name,
          'idempotencyKey',
          `idempotencyKey: ${jsonataProblem(error)}`,
        );
      });
      const problem = keyProblem(result);
      if (problem !== undefined) throw new SourceEvaluationError(name, 'idempotencyKey', problem);
      return result === undefined || result === '' ? undefined : String(result);
    },
  };
}

/** JSONata's truthiness (`$boolean`), for a filter's non-boolean result; made at first use. */
const truthiness = lazy(() => compiler()('$boolean($v)'));

/** An idempotency key this long is not an id but a mistake (a whole object's text, say). */
const MAX_KEY_LENGTH = 256;

function keyProblem(result: unknown): string | undefined {
  if (result === undefined) return undefined;
  if (typeof result !== 'string' && !(typeof result === 'number' && Number.isFinite(result))) {
    return `idempotencyKey: must yield a string or a number, not ${kindOf(result)}`;
  }
  if (String(result).length > MAX_KEY_LENGTH) {
    return `idempotencyKey: yields more than ${MAX_KEY_LENGTH} characters`;
  }
  return undefined;
}

/** The scheme's own request id, when the source gives no `idempotencyKey` (contract §6). */
const DEFAULT_KEYS: Partial<
  Record<VerifyScheme, (body: unknown, headers: Record<string, string>) => string | undefined>
> = {
  stripe: (body) => {
    const id =
      typeof body === 'object' && body !== null ? (body as { id?: unknown }).id : undefined;
    return typeof id === 'string' && id !== '' ? id : undefined;
  },
  shopify: (_body, headers) => headers['x-shopify-webhook-id'],
  github: (_body, headers) => headers['x-github-delivery'],
  'standard-webhooks': (_body, headers) => standardWebhookHeaders(headers).id,
};

/**
 * One event object or an array of them. The result is copied as JSON, so what is validated
 * and queued is plain data: jsonata's sequences are arrays with extra flags, its objects have no
 * prototype, and a function it yields has no JSON form.
 */
function toEvents(result: unknown): MapResult {
  if (result === undefined) {
    return failed('map: yields nothing; an expression for "nothing to do" yields []');
  }
  const plain: unknown = typeof result === 'function' ? result : JSON.parse(JSON.stringify(result));
  if (Array.isArray(plain)) return { kind: 'events', events: plain };
  if (typeof plain === 'object' && plain !== null) return { kind: 'events', events: [plain] };
  return failed(`map: must yield an event object or an array of them, not ${kindOf(plain)}`);
}

function failed(error: string): MapResult {
  return { kind: 'failed', error, pointer: '' };
}

function kindOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}

/** The evaluation running now, or the last one: the next waits for it. */
let evaluating: Promise<unknown> = Promise.resolve();

/**
 * One evaluation at a time in a process. jsonata's time limit is wall-clock time, and
 * evaluations running together take turns (each step is a promise), so each would be charged
 * for the others': 80 at once each took the time of all 80 and every one timed out. The local
 * ingest serves requests concurrently (a Lambda instance one at a time); evaluation is CPU work,
 * so running them one after another costs no throughput.
 */
function oneAtATime<T>(run: () => Promise<T>): Promise<T> {
  const result = evaluating.then(run, run);
  evaluating = result.catch(() => undefined);
  return result;
}

function compileExpression(
  source: string,
  role: Role,
  text: string,
  limits: EvaluationLimits,
): jsonata.Expression {
  // `$eval` runs a string as an expression: with a payload's text, the sender would write the
  // mapping. Refused wherever it appears (an alias like `$e := $eval` names it too).
  if (/\$eval\b/.test(text)) {
    throw new SourceConfigError(
      source,
      `${role} uses $eval, which would run the payload as an expression`,
    );
  }
  const compile = compiler();
  try {
    return compile(text, {
      timeout: limits.timeoutMs,
      stack: limits.maxDepth,
      sequence: limits.maxSequence,
    });
  } catch (error) {
    throw new SourceConfigError(source, `${role} does not compile: ${jsonataProblem(error)}`);
  }
}

/** jsonata throws plain objects `{ code, position, token, message }`, not `Error`s. */
function jsonataProblem(error: unknown): string {
  if (typeof error !== 'object' || error === null || error instanceof Error) {
    return describeError(error);
  }
  const { code, position, message } = error as {
    code?: unknown;
    position?: unknown;
    message?: unknown;
  };
  const where = typeof position === 'number' ? ` at position ${position}` : '';
  return `${String(message)} (${String(code)}${where})`;
}

function checkSecrets(name: string, verify: VerifySettings, secrets: ReadonlyArray<string>): void {
  try {
    checkSourceSecrets(verify, secrets);
  } catch (error) {
    // A CredentialError names the secret by position, never by value.
    if (error instanceof CredentialError) throw new SourceConfigError(name, error.message);
    throw error;
  }
}

// ——— The document's shape ———

/** The document's schemas, made at the first document read (lazy.ts says why). */
const schemas = lazy(() => {
  const expression = z.string().check(z.regex(/\S/, 'must be a JSONata expression, not blank'));
  return {
    source: z.strictObject({
      verify: verifySchema(),
      filter: z.optional(expression),
      map: expression,
      idempotencyKey: z.optional(expression),
    }),
    document: z.strictObject({ sources: z.record(z.string(), z.unknown()) }),
  };
});

function parseSource(name: string, value: unknown): SourceDefinition {
  if (!SOURCE_NAME_PATTERN.test(name)) {
    throw new SourceConfigError(name.slice(0, 80), `the name must match ${SOURCE_NAME_PATTERN}`);
  }
  const parsed = schemas().source.safeParse(value);
  if (!parsed.success) throw new SourceConfigError(name, describeIssues(parsed.error));
  const { verify: given, filter, map, idempotencyKey } = parsed.data;
  const { secret, secrets: list, ...settings } = given;
  const verify: VerifySettings =
    settings.scheme === 'hmac' ? { ...settings, header: settings.header.toLowerCase() } : settings;
  const secrets = list ?? (secret === undefined ? [] : [secret]);
  checkSecrets(name, verify, secrets);
  return { name, verify, secrets, filter, map, idempotencyKey };
}

/** Zod's issues as `path: message`; zod's messages quote no input value, so no secret. */
function describeIssues(error: z.core.$ZodError): string {
  return error.issues
    .map((issue) => {
      const path = issue.path.map(String).join('.');
      return path === '' ? issue.message : `${path}: ${issue.message}`;
    })
    .join('; ');
}
