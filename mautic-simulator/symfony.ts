/**
 * Requests and responses as Symfony and FOSRestBundle shape them for the Mautic simulator
 * (docs/mautic.md §4.2, §6.1): the body listener, the parameter bag, and the JSON error answers
 * that both the OAuth2 endpoints and the REST controllers give.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { type PhpArray, parsePhpQuery, phpArrayToJs } from './php.ts';
import { phpJsonEncode } from './php-json.ts';

/** What the simulator sends back. */
export interface Reply {
  status: number;
  headers: Record<string, string>;
  body: string | Buffer;
}

/** The request body after PHP and the FOSRest body listener: parsed, decoded, ignored or invalid. */
export type DecodedBody =
  | { kind: 'none' }
  | { kind: 'invalid' }
  | { kind: 'form'; params: PhpArray }
  | { kind: 'json'; value: unknown };

/** A request as the simulator's handlers see it. */
export interface SimRequest {
  method: string;
  path: string;
  query: PhpArray;
  headers: IncomingHttpHeaders;
  body: DecodedBody;
}

/** Symfony's default content type for a plain Response. */
export const HTML = 'text/html; charset=UTF-8';
const JSON_CONTENT_TYPES = new Set(['application/json', 'application/x-json']);
const FORM_CONTENT_TYPE = 'application/x-www-form-urlencoded';

/**
 * What PHP and FOSRestBundle's body listener make of a body: form bodies are parsed, JSON bodies
 * decoded (for /api routes even without a Content-Type, their _format being json), and any other
 * body is ignored, a JSON body sent as text/plain included. Invalid JSON or a scalar is 'invalid'.
 */
export function decodeBody(
  method: string,
  path: string,
  headers: IncomingHttpHeaders,
  raw: Buffer,
): DecodedBody {
  if (!['POST', 'PUT', 'PATCH', 'DELETE'].includes(method)) return { kind: 'none' };
  const type = (headers['content-type'] ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
  const text = raw.toString('utf8');
  if (type === FORM_CONTENT_TYPE) return { kind: 'form', params: parsePhpQuery(text) };
  const json = JSON_CONTENT_TYPES.has(type) || (type === '' && isApiPath(path));
  // FOSRest skips PHP-empty content, which includes the body "0".
  if (!json || text === '' || text === '0') return { kind: 'none' };
  try {
    const value: unknown = JSON.parse(text);
    return value !== null && typeof value === 'object'
      ? { kind: 'json', value }
      : { kind: 'invalid' };
  } catch {
    return { kind: 'invalid' };
  }
}

/** The decoded body as Symfony's parameter bag (`$request->request`). */
export function bodyParams(body: DecodedBody): Record<string, unknown> {
  const value =
    body.kind === 'form' ? phpArrayToJs(body.params) : body.kind === 'json' ? body.value : {};
  if (value === null || typeof value !== 'object') return {};
  if (Array.isArray(value)) return Object.fromEntries(value.map((item, index) => [index, item]));
  return value as Record<string, unknown>;
}

/** Whether Mautic's `^/api` firewall covers the path. */
export function isApiPath(path: string): boolean {
  return path === '/api' || path.startsWith('/api/');
}

/** filter_var with FILTER_REQUIRE_SCALAR: a string, or undefined when missing or not scalar. */
export function scalar(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (typeof value === 'number') return String(value);
  if (typeof value === 'boolean') return value ? '1' : '';
  return undefined;
}

/** PHP truthiness of a string parameter. */
export function truthy(value: string | undefined): value is string {
  return value !== undefined && value !== '' && value !== '0';
}

function genericMessage(status: number): string {
  return `Looks like I encountered an error (error #${status}). If I do it again, please report me to the system administrator!`;
}

/**
 * The version an API controller's view names in `Mautic-Version` (kernel.ts puts the version
 * played in its place). Only those views carry it: not the token endpoint, the firewall's 401,
 * ApiSubscriber's rewrites or ExceptionController's answers.
 */
const MAUTIC_VERSION = '5.1.1';

/** Symfony JsonResponse (ApiSubscriber rewrites, ExceptionController): JSON_HEX_* escaping. */
function symfonyJson(status: number, payload: unknown): Reply {
  return {
    status,
    headers: {
      'content-type': 'application/json',
      'cache-control': 'no-cache, private',
    },
    body: phpJsonEncode(payload, { hex: true }),
  };
}

/** ApiSubscriber's rewrite of an OAuth2 error: `{"errors":[{message, code, type}]}` (§1.7). */
export function oauthError(status: number, type: string, message: string): Reply {
  return symfonyJson(status, { errors: [{ message, code: status, type }] });
}

/** ExceptionController (§6.4): the generic message unless a not-found message is shown. */
export function exceptionError(status: number, message = genericMessage(status)): Reply {
  return symfonyJson(status, { errors: [{ message, code: status, type: null }] });
}

/**
 * What PHP throws where Mautic's code meets a value it did not expect (a TypeError, a database
 * error): the route answers ExceptionController's generic 500. Work done before it stays done.
 */
export class PhpError extends Error {}

/** A FOSRest view of an API controller: JMS escaping and the Mautic-Version header. */
export function view(status: number, payload: unknown): Reply {
  return {
    status,
    headers: {
      'content-type': 'application/json',
      'cache-control': 'no-cache, private',
      'mautic-version': MAUTIC_VERSION,
    },
    body: phpJsonEncode(payload),
  };
}

/** FetchCommonApiController::returnError outside batch mode: `type` is null, so omitted. */
export function returnError(status: number, message: string, details: unknown = []): Reply {
  return view(status, { errors: [{ code: status, message, details }] });
}
