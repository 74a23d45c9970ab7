/**
 * A Mautic 5.1.1 simulator: the OAuth2 server and the classic REST API for the 24 entities of
 * entities.ts, on a real HTTP server bound to 127.0.0.1. It is the test double for the whole project
 * and the Mautic of the local stack, written from docs/mautic.md (the § numbers in this folder
 * refer to it) and independent of functions/, so it can judge the client there.
 *
 * Faithful where a client can tell: status codes, bodies byte for byte (PHP's escaped slashes,
 * Symfony's \u0027), the array-or-object serialization of batch responses, and which bodies
 * Mautic ignores (a JSON body sent as text/plain is ignored, as FOSRestBundle does). This file
 * wires the HTTP server (options, request log, rate limit, the web server's request-line limit)
 * around Mautic's routing; harness.ts holds the scripted answers and faults, oauth.ts the OAuth2
 * server, rest.ts the REST routes, store.ts the records, and symfony.ts and php.ts the framework
 * and language mechanics they share (README.md lists every file).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  type AfterApplyFault,
  check,
  FaultDice,
  faultReply,
  type InjectedResponse,
  isCount,
  PHP_NOTICE,
  proxyErrorPage,
  type RequestLogEntry,
  type RequestMatch,
  redactQuery,
  requestLineTooLong,
  ScriptedAnswers,
  type SimulatorFaults,
  toRateLimit,
} from './harness.ts';
import { addClient, respond, type State } from './kernel.ts';
import { listenOnLoopback } from './loopback.ts';
import { addBySegmentFilters } from './memberships.ts';
import { issueTokens, type SimulatorClient } from './oauth.ts';
import { parsePhpQuery } from './php.ts';
import { readBody } from './read-body.ts';
import { batchItemCount, createEntityState, listRecords, seedRecord } from './rest.ts';
import { contactMemberships } from './store.ts';
import { decodeBody, exceptionError, HTML, type Reply, type SimRequest } from './symfony.ts';
import { type MauticLine, mauticLine } from './versions.ts';

/** Options of `startMauticSimulator`; every one has Mautic's default. */
export interface MauticSimulatorOptions {
  /** Default 0 (ephemeral); the host is always 127.0.0.1. */
  port?: number;
  /** Default: DEFAULT_SIMULATOR_CLIENT only. */
  clients?: SimulatorClient[];
  accessTokenLifetimeSeconds?: number;
  refreshTokenLifetimeSeconds?: number;
  /** Mautic issues no refresh token for client_credentials; true makes it issue one. */
  clientCredentialsRefreshToken?: boolean;
  /** api_batch_max_limit, default 200. */
  batchMaxLimit?: number;
  /** api_rate_limiter_limit per access token and window (default 3600 s); default off. */
  rateLimit?: { limit: number; windowSeconds?: number };
  /** false answers 403 api_disabled on /api and /oauth. */
  apiEnabled?: boolean;
  /**
   * The Mautic played: a line (`5.1`, the default, `5.2`, `6`, `7`) or a version such as
   * `5.2.0` (versions.ts). It answers as that version does where versions differ, and its
   * API controllers name it in `Mautic-Version`.
   */
  mauticVersion?: string;
  faults?: SimulatorFaults;
  /** Epoch ms, default Date.now; drives every expiry and rate window. */
  now?: () => number;
}

/** A running simulator. */
export interface MauticSimulator {
  /** Base URL without a trailing slash, e.g. http://127.0.0.1:41234. */
  readonly url: string;
  /** Closes the server and every open socket. */
  close(): Promise<void>;
  /**
   * Stored records of an entity of entities.ts ('contacts', 'companies', …) as flat field maps, in
   * id order; a contact with Do Not Contact entries also has `doNotContact` (channel, reason,
   * comments, channelId).
   */
  records(entity: string): Array<Record<string, unknown> & { id: number }>;
  /** Every request received, in order, token endpoint included (a snapshot). */
  readonly requests: readonly RequestLogEntry[];
  clearRequests(): void;
  /** Replaces the fault settings and restarts the random sequence from their seed. */
  setFaults(faults: SimulatorFaults | undefined): void;
  /** Replaces the rate limit and forgets every counter. */
  setRateLimit(rateLimit: { limit: number; windowSeconds?: number } | undefined): void;
  /**
   * Answers the next `times` (default 1) requests matching `method` (any if absent) and `path`
   * (exact pathname, or a RegExp tested on it) with `response`, before any other processing.
   */
  inject(match: RequestMatch, response: InjectedResponse, times?: number): void;
  /**
   * Handles the next `times` (default 1) requests matching `match` as usual, so Mautic applies
   * them, then fails to tell: 'drop' destroys the connection instead of answering; 'garble'
   * answers as PHP does when a notice is printed before the response (status 200, text/html,
   * the notice then the JSON); 'gateway_timeout' answers as a proxy in front of a slow Mautic
   * does (504 page) while Mautic went on. For "was it applied?" tests.
   */
  failAfterApply(match: RequestMatch, how: AfterApplyFault, times?: number): void;
  /**
   * A poison item: every call of `match` whose batch holds an item with `item[field] ===
   * value` answers Mautic's generic 500 (§6.4) and applies nothing, as Mautic's item-specific
   * exceptions in a batch edit do (a contact whose stage others share, an id deleted
   * meanwhile). It stays until the simulator stops. For "one bad item" tests.
   */
  poison(match: RequestMatch, field: string, value: unknown): void;
  addClient(client: SimulatorClient): void;
  /** Mints an access and refresh token as a grant would (default client: the first one). */
  issueToken(clientId?: string): { accessToken: string; refreshToken: string };
  /** Every access token issued so far is expired from now on. */
  expireAccessTokens(): void;
  /**
   * Revokes every token issued so far, as an admin deleting the credential's tokens would: access
   * tokens answer 401 "invalid", refresh tokens `invalid_grant`.
   */
  revokeTokens(): void;
  /**
   * Inserts a record of any entity directly, with no validation; an `id` in it is ignored,
   * `dateAdded` (ISO-8601) is kept, a contact's `doNotContact` items become its entries and its
   * `tags` tags.
   */
  seed(entity: string, record: Record<string, unknown>): { id: number };
  /**
   * A contact's segments and campaigns (with their manually added / removed flags; a manually
   * removed row is no longer a membership) and company links (which one is primary), in id
   * order; undefined when there is no such contact.
   */
  memberships(contactId: number): ContactMemberships | undefined;
  /**
   * Puts a contact in a segment as the segment's filters would (manually_added 0), which the API
   * cannot: removing it through the API then keeps the row as manually removed.
   */
  addBySegmentFilters(segmentId: number, contactId: number): void;
  /**
   * A user opens the record for editing (Mautic's checked out), until `checkIn`. On 7.x the API
   * then refuses to edit an email with a 409; earlier lines edit it all the same.
   */
  checkOut(entity: string, id: number, user?: string): void;
  checkIn(entity: string, id: number): void;
}

type ContactMemberships = NonNullable<ReturnType<typeof contactMemberships>>;

/** The credential every simulator knows unless `clients` says otherwise. */
export const DEFAULT_SIMULATOR_CLIENT: SimulatorClient = {
  clientId: '1_simulator',
  clientSecret: 'simulator-secret',
  grantTypes: ['authorization_code', 'refresh_token', 'client_credentials'],
  redirectUris: ['http://127.0.0.1'],
};

const MAX_BODY_BYTES = 32 * 1024 * 1024;
const MAX_HEADER_BYTES = 1024 * 1024;
function send(res: ServerResponse, entry: RequestLogEntry, reply: Reply): void {
  entry.status = reply.status;
  if (res.destroyed || res.headersSent) return;
  res.writeHead(reply.status, reply.headers);
  res.end(reply.body);
}

/** Mautic 7 removed the API rate limiter (UPGRADE-7.0.md): a limit there would be no Mautic's. */
function checkRateLimit(line: MauticLine, rateLimit: MauticSimulatorOptions['rateLimit']) {
  check(
    rateLimit === undefined || line.rateLimiter,
    `Mautic ${line.version} has no API rate limiter (removed in 7.0)`,
  );
  return toRateLimit(rateLimit);
}

/** The state behind one simulator, its options checked. */
function createState(options: MauticSimulatorOptions): State {
  const now = options.now ?? Date.now;
  const line = mauticLine(options.mauticVersion ?? '5.1');
  const state: State = {
    now,
    clients: new Map(),
    accessLifetimeSeconds: options.accessTokenLifetimeSeconds ?? 3600,
    refreshLifetimeSeconds: options.refreshTokenLifetimeSeconds ?? 1_209_600,
    clientCredentialsRefreshToken: options.clientCredentialsRefreshToken ?? false,
    apiEnabled: options.apiEnabled ?? true,
    rateLimit: checkRateLimit(line, options.rateLimit),
    rateWindows: new Map(),
    accessTokens: new Map(),
    refreshTokens: new Map(),
    authCodes: new Map(),
    lastTokenId: 0,
    entities: createEntityState(now, options.batchMaxLimit ?? 200, line),
  };
  for (const client of options.clients ?? [DEFAULT_SIMULATOR_CLIENT]) {
    addClient(state.clients, client);
  }
  check(
    isCount(state.accessLifetimeSeconds) &&
      isCount(state.refreshLifetimeSeconds) &&
      isCount(state.entities.batchMaxLimit),
    'token lifetimes and batchMaxLimit must be positive integers',
  );
  return state;
}

/** What one running simulator's requests share. */
interface Harness {
  state: State;
  log: RequestLogEntry[];
  scripts: ScriptedAnswers;
  faults: FaultDice;
  /** Aborted by close(), so a request held back by latency cannot keep the process alive. */
  closing: AbortController;
}

/** Reads a request into what the routes see, and logs it. */
async function receive(harness: Harness, req: IncomingMessage, res: ServerResponse) {
  const { body: raw } = await readBody(req, MAX_BODY_BYTES);
  if (raw.length > MAX_BODY_BYTES) {
    // Answered as a bug is (a generic 500, below); the rest of the body stays unread.
    res.setHeader('connection', 'close');
    throw new RangeError('request body too large');
  }
  const method = (req.method ?? 'GET').toUpperCase();
  const [path = '/', rawQuery = ''] = (req.url ?? '/').split(/\?(.*)/s);
  const request: SimRequest = {
    method,
    path,
    query: parsePhpQuery(rawQuery),
    headers: req.headers,
    body: decodeBody(method, path, req.headers, raw),
  };
  const entry: RequestLogEntry = {
    method,
    path,
    query: redactQuery(rawQuery),
    status: 0,
    at: harness.state.now(),
  };
  const items = batchItemCount(request);
  if (items !== undefined) entry.items = items;
  harness.log.push(entry);
  return { request, entry };
}

async function serve(harness: Harness, req: IncomingMessage, res: ServerResponse) {
  const arrived = performance.now();
  const { request, entry } = await receive(harness, req, res);
  const { method, path } = request;
  // The web server refuses an over-long request line before anything behind it sees it.
  const refused = requestLineTooLong(req.method ?? 'GET', req.url ?? '/', req.httpVersion);
  const injected = refused ?? harness.scripts.takeInjection(method, path);
  if (injected !== undefined) return send(res, entry, injected);
  const decoded = request.body.kind === 'json' ? request.body.value : undefined;
  if (harness.scripts.poisoned(method, path, decoded)) {
    return send(res, entry, exceptionError(500));
  }
  const fault = harness.faults.draw(path, entry.items);
  // The latency is the time to answer, counted from the request's arrival, as a real server's
  // is: its own work is part of it. A request that passes is applied first and answered when
  // the latency is over (or at once, if the work took longer); otherwise the 50 ms of a bench's
  // "Mautic at 50 ms per call" would be 50 ms plus the simulator's parsing and writing.
  // False when close() came meanwhile: nothing is answered then.
  const { signal } = harness.closing;
  const waitOutLatency = async () => {
    const left = arrived + (fault?.waitMs ?? 0) - performance.now();
    if (left > 0) await sleep(left, undefined, { signal }).catch(() => undefined);
    return !signal.aborted;
  };
  if (signal.aborted) return;
  if (fault?.kind === 'drop' || fault?.kind === 'error') {
    if (!(await waitOutLatency())) return;
    if (fault.kind === 'drop') return void req.socket.destroy();
    return send(res, entry, faultReply(fault.status));
  }
  const reply = respond(harness.state, request, entry);
  // failAfterApply: the work is done, the answer is lost or spoilt.
  const spoilt = harness.scripts.takeAfterApply(method, path);
  if (!(await waitOutLatency())) return;
  if (spoilt === 'drop') return void req.socket.destroy();
  if (spoilt === 'garble') {
    const body = Buffer.concat([Buffer.from(PHP_NOTICE), Buffer.from(reply.body)]);
    // The notice went out before any header was set: PHP's defaults, no Mautic-Version.
    const headers = { 'content-type': HTML };
    return send(res, entry, { status: 200, headers, body });
  }
  send(res, entry, spoilt === 'gateway_timeout' ? proxyErrorPage(504) : reply);
}

/**
 * Starts a simulator on 127.0.0.1.
 *
 * @example
 * const mautic = await startMauticSimulator();
 * const { accessToken } = mautic.issueToken();
 * await fetch(`${mautic.url}/api/contacts/batch/new`, {
 *   method: 'POST',
 *   headers: { authorization: `Bearer ${accessToken}`, 'content-type': 'application/json' },
 *   body: JSON.stringify([{ email: 'ada@example.com' }]),
 * });
 * await mautic.close();
 */
export async function startMauticSimulator(
  options: MauticSimulatorOptions = {},
): Promise<MauticSimulator> {
  const harness: Harness = {
    state: createState(options),
    log: [],
    scripts: new ScriptedAnswers(),
    faults: new FaultDice(options.faults),
    closing: new AbortController(),
  };
  // Room for request lines far over Apache's limit, so that they get its 414, not Node's 431.
  const server = createServer({ maxHeaderSize: MAX_HEADER_BYTES }, (req, res) => {
    serve(harness, req, res).catch(() => {
      // A bug in the simulator must look like a Mautic 500, not hang the client.
      if (!res.headersSent && !res.destroyed) {
        const reply = exceptionError(500);
        res.writeHead(reply.status, reply.headers).end(reply.body);
      }
    });
  });
  const port = await listenOnLoopback(server, options.port);
  return simulatorHandle(harness, server, `http://127.0.0.1:${port}`);
}

function simulatorHandle(
  harness: Harness,
  server: ReturnType<typeof createServer>,
  url: string,
): MauticSimulator {
  const { state, scripts, closing } = harness;
  return {
    url,
    async close() {
      if (closing.signal.aborted) return;
      closing.abort();
      const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await stopped;
    },
    records: (entity) => listRecords(state.entities, entity),
    get requests() {
      return harness.log.map((entry) => ({ ...entry }));
    },
    clearRequests() {
      harness.log = [];
    },
    setFaults: (faults) => harness.faults.set(faults),
    setRateLimit(rateLimit) {
      state.rateLimit = checkRateLimit(state.entities.line, rateLimit);
      state.rateWindows.clear();
    },
    inject: (match, response, times) => scripts.inject(match, response, times),
    failAfterApply: (match, how, times) => scripts.failAfterApply(match, how, times),
    poison: (match, field, value) => scripts.poison(match, field, value),
    addClient: (client) => addClient(state.clients, client),
    issueToken(clientId) {
      const client =
        clientId === undefined ? state.clients.values().next().value : state.clients.get(clientId);
      if (client === undefined) throw new TypeError(`Unknown client "${clientId ?? '(none)'}"`);
      const tokens = issueTokens(state, client.clientId, null, true);
      return { accessToken: tokens.accessToken, refreshToken: tokens.refreshToken ?? '' };
    },
    expireAccessTokens() {
      for (const token of state.accessTokens.values()) token.forcedExpired = true;
    },
    revokeTokens() {
      state.accessTokens.clear();
      state.refreshTokens.clear();
    },
    seed: (entity, record) => seedRecord(state.entities, entity, record),
    memberships: (contactId) => contactMemberships(state.entities, contactId),
    addBySegmentFilters: (segmentId, contactId) =>
      addBySegmentFilters(state.entities, segmentId, contactId),
    checkOut(entity, id, user = 'Admin User') {
      state.entities.checkedOut.set(`${entity}:${id}`, { user, at: state.now() });
    },
    checkIn: (entity, id) => void state.entities.checkedOut.delete(`${entity}:${id}`),
  };
}
