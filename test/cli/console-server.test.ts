/**
 * The console's security rules, each against the real server on 127.0.0.1 (contract §4,
 * `console`): loopback only, the Host checked, the token required, changes only by POST with
 * the token header, JSON answers with no secret.
 */
import { request } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import type { Route } from '../../infra/cli/console/console-routes.ts';
import {
  type ConsoleServer,
  startConsoleServer,
  TOKEN_HEADER,
} from '../../infra/cli/console/console-server.ts';

let server: ConsoleServer | undefined;
const calls: string[] = [];

afterEach(async () => {
  await server?.close();
  server = undefined;
  calls.length = 0;
});

const routes: Record<string, Route> = {
  '/api/read': {
    method: 'GET',
    handle: async () => {
      calls.push('read');
      return { status: 200, body: { ok: true } };
    },
  },
  '/api/change': {
    method: 'POST',
    handle: async (_, body) => {
      calls.push(`change ${JSON.stringify(body)}`);
      return { status: 200, body: { changed: true } };
    },
  },
};

/** One request with exactly these headers (fetch would not let a test set Host). */
function send(
  path: string,
  options: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<{ status: number; headers: Record<string, unknown>; text: string }> {
  const { port } = server as ConsoleServer;
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path,
        method: options.method ?? 'GET',
        headers: { host: `127.0.0.1:${port}`, ...options.headers },
        timeout: 5000,
      },
      (res) => {
        let text = '';
        res.on('data', (chunk: Buffer) => {
          text += chunk.toString();
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
      },
    );
    req.on('error', reject);
    req.end(options.body);
  });
}

async function started() {
  server = await startConsoleServer(routes);
  const url = new URL(server.url);
  const token = url.searchParams.get('token') ?? '';
  const login = await send(`/?token=${token}`);
  const cookie = String((login.headers['set-cookie'] as string[])[0]).split(';')[0] ?? '';
  return { url, token, login, cookie };
}

describe('the console server', () => {
  it('listens on 127.0.0.1 only, on a free port, and prints a URL with a long random token', async () => {
    const { url, token } = await started();
    expect(url.hostname).toBe('127.0.0.1');
    expect(Number(url.port)).toBeGreaterThan(0);
    expect(token).toMatch(/^[\w-]{43}$/);
  });

  it('turns the token into an HttpOnly, SameSite=Strict cookie and takes it out of the address', async () => {
    const { login, cookie } = await started();
    expect(login.status).toBe(303);
    expect(login.headers.location).toBe('/');
    const setCookie = String((login.headers['set-cookie'] as string[])[0]);
    expect(setCookie).toContain('HttpOnly');
    expect(setCookie).toContain('SameSite=Strict');
    const page = await send('/', { headers: { cookie } });
    expect(page.status).toBe(200);
    expect(page.headers['content-security-policy']).toContain("default-src 'none'");
    expect((await send('/api/read', { headers: { cookie } })).status).toBe(200);
  });

  it('refuses every request without the token, and a wrong token', async () => {
    const { token } = await started();
    for (const path of ['/', '/console.js', '/api/read', '/api/session']) {
      const answer = await send(path);
      expect(answer.status, path).toBe(401);
      expect(answer.headers['content-type']).toContain('application/json');
    }
    expect((await send(`/?token=${token.slice(1)}x`)).status).toBe(401);
    expect(
      (await send('/api/read', { headers: { cookie: 'mautic_relay_console=nope' } })).status,
    ).toBe(401);
    expect(calls).toEqual([]);
  });

  it('refuses a Host other than 127.0.0.1 or localhost on its port (DNS rebinding)', async () => {
    const { cookie } = await started();
    const port = (server as ConsoleServer).port;
    for (const host of [
      'evil.example',
      `evil.example:${port}`,
      '127.0.0.1:1',
      `127.0.0.2:${port}`,
    ]) {
      const answer = await send('/api/read', { headers: { host, cookie } });
      expect(answer.status, host).toBe(403);
    }
    expect(
      (await send('/api/read', { headers: { host: `localhost:${port}`, cookie } })).status,
    ).toBe(200);
    expect(calls).toEqual(['read']);
  });

  it('takes a change only by POST, with the token header as well as the cookie (CSRF)', async () => {
    const { cookie, token } = await started();
    expect((await send('/api/change', { headers: { cookie } })).status).toBe(405);
    const json = { cookie, 'content-type': 'application/json' };
    const noHeader = await send('/api/change', { method: 'POST', headers: json, body: '{}' });
    expect(noHeader.status).toBe(403);
    const wrong = { ...json, [TOKEN_HEADER]: 'x' };
    expect((await send('/api/change', { method: 'POST', headers: wrong, body: '{}' })).status).toBe(
      403,
    );
    const form = {
      cookie,
      [TOKEN_HEADER]: token,
      'content-type': 'application/x-www-form-urlencoded',
    };
    expect((await send('/api/change', { method: 'POST', headers: form, body: 'a=1' })).status).toBe(
      415,
    );
    expect(calls).toEqual([]);
    const good = { ...json, [TOKEN_HEADER]: token };
    const done = await send('/api/change', { method: 'POST', headers: good, body: '{"a":1}' });
    expect(done.status).toBe(200);
    expect(calls).toEqual(['change {"a":1}']);
    expect((await send('/api/read', { method: 'POST', headers: good, body: '{}' })).status).toBe(
      405,
    );
  });
});
