/**
 * The test harness around the simulated Mautic: the request log's entries, scripted answers
 * (`inject`, `failAfterApply`), seeded random faults, and what a proxy or web server in front of
 * Mautic answers on its own. None of it is Mautic; server.ts wires it around the routes.
 */
import { exceptionError, HTML, isApiPath, type Reply } from './symfony.ts';

/** Random failures; the same seed gives the same sequence of decisions, one per request in scope. */
export interface SimulatorFaults {
  seed: number;
  /** 0..1: answer 500 (Mautic's generic body), 502 or 503 (a proxy's HTML page). */
  errorRate?: number;
  /** 0..1: destroy the socket without answering. */
  dropRate?: number;
  /**
   * Time to answer (or drop), uniform in [min, max] ms, counted from the request's arrival, plus
   * `perItem` ms for each item of a batch call (its `items` in the request log): a real Mautic
   * saves a batch item by item, so a 200-contact create takes seconds where one takes a fraction
   * of one. A request that passes is applied at once and answered when the time is up.
   */
  latencyMs?: { min: number; max: number; perItem?: number };
  /** 'api' (default): only /api/*; 'all': /oauth/* too. */
  scope?: 'api' | 'all';
}

/** How `failAfterApply` spoils the answer to a request it let through. */
export type AfterApplyFault = 'drop' | 'garble' | 'gateway_timeout';

/** A scripted answer for `inject`. */
export interface InjectedResponse {
  status: number;
  headers?: Record<string, string>;
  body?: string | Buffer;
}

/** One received request. `tokenId` numbers the access token used; the token itself is never kept. */
export interface RequestLogEntry {
  method: string;
  path: string;
  /** Raw query string, with access_token, refresh_token, client_secret and code redacted. */
  query: string;
  /** 0 while unanswered and for a dropped request. */
  status: number;
  /** Items in a batch body, ids in a batch delete or in a segment's contacts/add. */
  items?: number;
  tokenId?: number;
  /** `now()` when the request was received. */
  at: number;
}

/** Which requests a scripted answer applies to. */
export interface RequestMatch {
  method?: string;
  path: string | RegExp;
}

export function check(valid: boolean, message: string): void {
  if (!valid) throw new RangeError(message);
}

const isRate = (value: number | undefined) => value === undefined || (value >= 0 && value <= 1);
export const isCount = (value: number) => Number.isInteger(value) && value >= 1;

function checkFaults(faults: SimulatorFaults | undefined): void {
  if (faults === undefined) return;
  const latency = faults.latencyMs;
  check(Number.isFinite(faults.seed), 'faults.seed must be a finite number');
  check(isRate(faults.errorRate) && isRate(faults.dropRate), 'fault rates must be within 0..1');
  check(
    latency === undefined ||
      (latency.min >= 0 && latency.max >= latency.min && (latency.perItem ?? 0) >= 0),
    'latencyMs needs 0 <= min <= max and perItem >= 0',
  );
}

export function toRateLimit(rateLimit: { limit: number; windowSeconds?: number } | undefined) {
  if (rateLimit === undefined) return undefined;
  const windowSeconds = rateLimit.windowSeconds ?? 3600;
  check(isCount(rateLimit.limit) && isCount(windowSeconds), 'rateLimit needs positive integers');
  return { limit: rateLimit.limit, windowSeconds };
}

const SECRET_QUERY_PARAMS = new Set(['access_token', 'refresh_token', 'client_secret', 'code']);

export function redactQuery(query: string): string {
  return query
    .split('&')
    .map((pair) => {
      const name = pair.split('=')[0] ?? '';
      return SECRET_QUERY_PARAMS.has(name) ? `${name}=REDACTED` : pair;
    })
    .join('&');
}

/** What a proxy in front of Mautic answers when PHP is gone. */
export function proxyErrorPage(status: 502 | 503 | 504): Reply {
  const title = {
    502: '502 Bad Gateway',
    503: '503 Service Temporarily Unavailable',
    504: '504 Gateway Time-out',
  }[status];
  return {
    status,
    headers: { 'content-type': HTML },
    body: `<html>\r\n<head><title>${title}</title></head>\r\n<body>\r\n<center><h1>${title}</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n`,
  };
}

/** Apache's LimitRequestLine default: a longer request line never reaches Mautic. */
const LIMIT_REQUEST_LINE = 8190;

/**
 * Apache's 414 for a request line (method, target and protocol, as it counts them) over 8,190
 * bytes, or undefined for a shorter one. The connection is closed, as Apache does.
 */
export function requestLineTooLong(
  method: string,
  url: string,
  version: string,
): Reply | undefined {
  if (Buffer.byteLength(`${method} ${url} HTTP/${version}`) <= LIMIT_REQUEST_LINE) return undefined;
  return {
    status: 414,
    headers: { 'content-type': 'text/html; charset=iso-8859-1', connection: 'close' },
    body:
      '<!DOCTYPE HTML PUBLIC "-//IETF//DTD HTML 2.0//EN">\n<html><head>\n' +
      '<title>414 Request-URI Too Long</title>\n</head><body>\n<h1>Request-URI Too Long</h1>\n' +
      "<p>The requested URL's length exceeds the capacity\nlimit for this server.<br />\n</p>\n" +
      '</body></html>\n',
  };
}

/** The PHP notice a 'garble' answer prints before the JSON. */
export const PHP_NOTICE =
  '<br />\n<b>Notice</b>:  Undefined index: alias in /var/www/html/app/bundles/LeadBundle/Model/FieldModel.php on line 1042<br />\n';

interface Script<T> {
  method: string | undefined;
  path: string | RegExp;
  what: T;
  remaining: number;
}

/** Scripted answers: `inject` before Mautic runs, `failAfterApply` after it has. */
export class ScriptedAnswers {
  #injections: Array<Script<InjectedResponse>> = [];
  #afterApply: Array<Script<AfterApplyFault>> = [];

  inject(match: RequestMatch, response: InjectedResponse, times = 1): void {
    check(isCount(times), `times must be a positive integer, got ${times}`);
    const { status } = response;
    check(Number.isInteger(status) && status >= 200 && status <= 599, `bad status ${status}`);
    this.#injections.push(script(match, response, times));
  }

  failAfterApply(match: RequestMatch, how: AfterApplyFault, times = 1): void {
    check(isCount(times), `times must be a positive integer, got ${times}`);
    this.#afterApply.push(script(match, how, times));
  }

  takeInjection(method: string, path: string): Reply | undefined {
    const response = take(this.#injections, method, path);
    if (response === undefined) return undefined;
    return { status: response.status, headers: { ...response.headers }, body: response.body ?? '' };
  }

  takeAfterApply(method: string, path: string): AfterApplyFault | undefined {
    return take(this.#afterApply, method, path);
  }

  #poisons: Array<{ match: Script<undefined>; field: string; value: unknown }> = [];

  /** Every call of `match` whose batch holds an item with `item[field] === value` fails. */
  poison(match: RequestMatch, field: string, value: unknown): void {
    this.#poisons.push({ match: script(match, undefined, 1), field, value });
  }

  /** Whether the request carries a poisoned item (the scripts stay: it fails every time). */
  poisoned(method: string, path: string, body: unknown): boolean {
    const items = Array.isArray(body) ? body : [];
    return this.#poisons.some(
      ({ match, field, value }) =>
        matches(match, method, path) &&
        items.some((item) => typeof item === 'object' && item !== null && item[field] === value),
    );
  }
}

function matches(rule: Script<unknown>, method: string, path: string): boolean {
  if (rule.method !== undefined && rule.method !== method) return false;
  if (typeof rule.path === 'string') return rule.path === path;
  rule.path.lastIndex = 0;
  return rule.path.test(path);
}

function script<T>(match: RequestMatch, what: T, times: number): Script<T> {
  return { method: match.method?.toUpperCase(), path: match.path, what, remaining: times };
}

function take<T>(scripts: Array<Script<T>>, method: string, path: string): T | undefined {
  const index = scripts.findIndex((rule) => matches(rule, method, path));
  const rule = scripts[index];
  if (rule === undefined) return undefined;
  rule.remaining -= 1;
  if (rule.remaining === 0) scripts.splice(index, 1);
  return rule.what;
}

/** One request's fault: when to answer, and whether to drop it, fail it or let it through. */
export type FaultDraw =
  | { waitMs: number; kind: 'pass' }
  | { waitMs: number; kind: 'drop' }
  | { waitMs: number; kind: 'error'; status: 500 | 502 | 503 };

/** mulberry32: tiny, seedable, and good enough to spread fault decisions. */
function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Seeded random faults; three draws per request in scope, so a seed fixes the whole sequence. */
export class FaultDice {
  #faults: { config: SimulatorFaults; random: () => number } | undefined;

  constructor(config: SimulatorFaults | undefined) {
    this.set(config);
  }

  set(config: SimulatorFaults | undefined): void {
    checkFaults(config);
    this.#faults = config && { config: { ...config }, random: mulberry32(config.seed) };
  }

  /** The fault of a request to `path` carrying `items` batch items (none: 0). */
  draw(path: string, items = 0): FaultDraw | undefined {
    if (this.#faults === undefined) return undefined;
    const { config, random } = this.#faults;
    if (!isApiPath(path) && !(config.scope === 'all' && path.startsWith('/oauth/'))) {
      return undefined;
    }
    const [decision, pick, wait] = [random(), random(), random()];
    const dropRate = config.dropRate ?? 0;
    const { min, max, perItem = 0 } = config.latencyMs ?? { min: 0, max: 0 };
    const waitMs = min + Math.floor(wait * (max - min + 1)) + perItem * items;
    if (decision < dropRate) return { waitMs, kind: 'drop' };
    if (decision < dropRate + (config.errorRate ?? 0)) {
      const status = ([500, 502, 503] as const)[Math.min(2, Math.floor(pick * 3))] ?? 500;
      return { waitMs, kind: 'error', status };
    }
    return { waitMs, kind: 'pass' };
  }
}

/** The answer a fault of kind 'error' gives. */
export function faultReply(status: 500 | 502 | 503): Reply {
  return status === 500 ? exceptionError(500) : proxyErrorPage(status);
}
