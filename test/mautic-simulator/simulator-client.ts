import { afterEach } from 'vitest';
import {
  type MauticSimulator,
  type MauticSimulatorOptions,
  startMauticSimulator,
} from '../../mautic-simulator/server.ts';

/** One answer of the simulator, read whole. */
export interface Answer {
  status: number;
  headers: Headers;
  text: string;
  json: () => Record<string, unknown>;
}

/** A started simulator with a token, and calls to its REST API over HTTP. */
export interface Session {
  sim: MauticSimulator;
  get(path: string): Promise<Answer>;
  post(path: string, body?: unknown, contentType?: string): Promise<Answer>;
  send(method: string, path: string, body?: unknown): Promise<Answer>;
}

const running: MauticSimulator[] = [];

afterEach(async () => {
  await Promise.all(running.splice(0).map((sim) => sim.close()));
});

/** Starts a simulator that the current test's afterEach closes. */
export async function session(options: MauticSimulatorOptions = {}): Promise<Session> {
  const sim = await startMauticSimulator(options);
  running.push(sim);
  const token = sim.issueToken().accessToken;
  const send = async (method: string, path: string, body?: unknown, contentType?: string) => {
    const headers: Record<string, string> = { authorization: `Bearer ${token}` };
    if (body !== undefined) headers['content-type'] = contentType ?? 'application/json';
    const response = await fetch(`${sim.url}${path}`, {
      method,
      headers,
      body: body === undefined ? null : typeof body === 'string' ? body : JSON.stringify(body),
    });
    const text = await response.text();
    return {
      status: response.status,
      headers: response.headers,
      text,
      json: () => JSON.parse(text) as Record<string, unknown>,
    };
  };
  return {
    sim,
    get: (path) => send('GET', path),
    post: (path, body, contentType) => send('POST', path, body, contentType),
    send: (method, path, body) => send(method, path, body),
  };
}

/** The body of a controller's returnError (PHP's json_encode escapes slashes). */
export function errorBody(status: number, message: string, details: unknown = []): string {
  return JSON.stringify({ errors: [{ code: status, message, details }] }).replaceAll('/', '\\/');
}

/** ExceptionController's generic body (what a PHP error or a database error gives). */
export function genericError(status: number): string {
  return `{"errors":[{"message":"Looks like I encountered an error (error #${status}). If I do it again, please report me to the system administrator!","code":${status},"type":null}]}`;
}

/** The ids of a contact list answer, in order. */
export function idsOf(answer: Answer): number[] {
  return Object.keys(answer.json().contacts as object).map(Number);
}
