import { afterEach, describe, expect, it } from 'vitest';
import {
  DEFAULT_SIMULATOR_CLIENT,
  type MauticSimulator,
  type MauticSimulatorOptions,
  startMauticSimulator,
} from '../../mautic-simulator/server.ts';

const { clientId, clientSecret } = DEFAULT_SIMULATOR_CLIENT;
const TOKEN_PATTERN = /^[A-Za-z0-9_-]{86}$/;
const START = Date.UTC(2025, 0, 1, 12, 0, 0);

const running: MauticSimulator[] = [];

afterEach(async () => {
  await Promise.all(running.splice(0).map((simulator) => simulator.close()));
});

async function start(options: MauticSimulatorOptions = {}): Promise<MauticSimulator> {
  const simulator = await startMauticSimulator(options);
  running.push(simulator);
  return simulator;
}

/** A clock the test moves by hand. */
function manualClock() {
  const clock = { ms: START, now: () => clock.ms };
  return clock;
}

interface Answer {
  status: number;
  headers: Headers;
  text: string;
  json: () => Record<string, unknown>;
}

async function answer(response: Response): Promise<Answer> {
  const text = await response.text();
  return { status: response.status, headers: response.headers, text, json: () => JSON.parse(text) };
}

function postToken(simulator: MauticSimulator, params: Record<string, string>) {
  return fetch(`${simulator.url}/oauth/v2/token`, {
    method: 'POST',
    body: new URLSearchParams(params),
  }).then(answer);
}

function api(
  simulator: MauticSimulator,
  method: string,
  path: string,
  options: { token?: string; body?: unknown; contentType?: string } = {},
) {
  const headers: Record<string, string> = {};
  if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`;
  let body: string | null = null;
  if (options.body !== undefined) {
    headers['content-type'] = options.contentType ?? 'application/json';
    body = typeof options.body === 'string' ? options.body : JSON.stringify(options.body);
  }
  return fetch(`${simulator.url}${path}`, { method, headers, body }).then(answer);
}

function oauthErrorBody(status: number, type: string, message: string): string {
  return `{"errors":[{"message":"${message}","code":${status},"type":"${type}"}]}`;
}

async function authorize(simulator: MauticSimulator, query: Record<string, string>) {
  const response = await fetch(
    `${simulator.url}/oauth/v2/authorize?${new URLSearchParams(query)}`,
    { redirect: 'manual' },
  );
  return { ...(await answer(response)), location: response.headers.get('location') ?? '' };
}

async function authorizationCode(simulator: MauticSimulator, redirectUri: string) {
  const { location } = await authorize(simulator, {
    client_id: clientId,
    response_type: 'code',
    redirect_uri: redirectUri,
  });
  return new URL(location).searchParams.get('code') ?? '';
}

describe('token endpoint', () => {
  it('answers client_credentials with the exact Mautic body and no refresh token', async () => {
    const simulator = await start();

    const reply = await postToken(simulator, {
      grant_type: 'client_credentials',
      client_id: clientId,
      client_secret: clientSecret,
    });

    expect(reply.status).toBe(200);
    expect(reply.text).toMatch(
      /^\{"access_token":"[A-Za-z0-9_-]{86}","expires_in":3600,"token_type":"bearer","scope":null\}$/,
    );
    expect(reply.headers.get('cache-control')).toBe('no-store');
    expect(reply.headers.get('pragma')).toBe('no-cache');
  });

  it('issues a refresh token for client_credentials only when configured to', async () => {
    const simulator = await start({ clientCredentialsRefreshToken: true });

    const reply = await postToken(simulator, {
      grant_type: 'client_credentials',
      client_id: clientId,
      client_secret: clientSecret,
    });

    expect(reply.json().refresh_token).toMatch(TOKEN_PATTERN);
  });

  it('accepts the grant as a GET query and as a JSON body too', async () => {
    const simulator = await start();
    const params = {
      grant_type: 'client_credentials',
      client_id: clientId,
      client_secret: clientSecret,
    };

    const viaGet = await fetch(`${simulator.url}/oauth/v2/token?${new URLSearchParams(params)}`);
    const viaJson = await fetch(`${simulator.url}/oauth/v2/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(params),
    });

    expect(viaGet.status).toBe(200);
    expect(viaJson.status).toBe(200);
  });

  it('rotates the refresh token, rejects its reuse and keeps the old access token valid', async () => {
    const simulator = await start();
    const first = simulator.issueToken();
    const refresh = {
      grant_type: 'refresh_token',
      client_id: clientId,
      client_secret: clientSecret,
    };

    const rotated = await postToken(simulator, { ...refresh, refresh_token: first.refreshToken });
    const reused = await postToken(simulator, { ...refresh, refresh_token: first.refreshToken });

    expect(rotated.status).toBe(200);
    const body = rotated.json();
    expect(Object.keys(body)).toEqual([
      'access_token',
      'expires_in',
      'token_type',
      'scope',
      'refresh_token',
    ]);
    expect(body.refresh_token).toMatch(TOKEN_PATTERN);
    expect(body.refresh_token).not.toBe(first.refreshToken);
    expect(reused.status).toBe(400);
    expect(reused.text).toBe(oauthErrorBody(400, 'invalid_grant', 'Invalid refresh token'));
    expect(
      (await api(simulator, 'GET', '/api/contacts', { token: first.accessToken })).status,
    ).toBe(200);
    const next = await postToken(simulator, {
      ...refresh,
      refresh_token: String(body.refresh_token),
    });
    expect(next.status).toBe(200);
  });

  it('reports an expired refresh token and one issued to another client', async () => {
    const clock = manualClock();
    const other = {
      clientId: '2_other',
      clientSecret: 'other-secret',
      grantTypes: ['refresh_token' as const],
      redirectUris: [],
    };
    const simulator = await start({
      now: clock.now,
      refreshTokenLifetimeSeconds: 60,
      clients: [DEFAULT_SIMULATOR_CLIENT, other],
    });
    const mine = simulator.issueToken();
    const theirs = simulator.issueToken('2_other');
    const refresh = {
      grant_type: 'refresh_token',
      client_id: clientId,
      client_secret: clientSecret,
    };

    const foreign = await postToken(simulator, { ...refresh, refresh_token: theirs.refreshToken });
    clock.ms += 60_001;
    const expired = await postToken(simulator, { ...refresh, refresh_token: mine.refreshToken });

    expect(foreign.text).toBe(oauthErrorBody(400, 'invalid_grant', 'Invalid refresh token'));
    expect(expired.text).toBe(oauthErrorBody(400, 'invalid_grant', 'Refresh token has expired'));
  });

  const good = { client_id: clientId, client_secret: clientSecret };
  it.each([
    [
      'a missing grant_type',
      { ...good },
      'invalid_request',
      'Invalid grant_type parameter or parameter missing',
    ],
    [
      'an unknown grant_type',
      { ...good, grant_type: 'foo' },
      'invalid_request',
      'Invalid grant_type parameter or parameter missing',
    ],
    [
      'no client_id',
      { grant_type: 'client_credentials', client_secret: clientSecret },
      'invalid_client',
      'Client id was not found in the headers or body',
    ],
    [
      'an unknown client',
      { ...good, grant_type: 'client_credentials', client_id: '9_unknown' },
      'invalid_client',
      'The client credentials are invalid',
    ],
    [
      'a wrong secret',
      { ...good, grant_type: 'client_credentials', client_secret: 'nope' },
      'invalid_client',
      'The client credentials are invalid',
    ],
    [
      'a missing secret',
      { grant_type: 'client_credentials', client_id: clientId },
      'invalid_client',
      'The client credentials are invalid',
    ],
    [
      'a grant the client may not use',
      { ...good, grant_type: 'password' },
      'unauthorized_client',
      'The grant type is unauthorized for this client_id',
    ],
    [
      'a refresh grant without refresh_token',
      { ...good, grant_type: 'refresh_token' },
      'invalid_request',
      'No \\u0022refresh_token\\u0022 parameter found',
    ],
    [
      'an unknown refresh token',
      { ...good, grant_type: 'refresh_token', refresh_token: 'abc' },
      'invalid_grant',
      'Invalid refresh token',
    ],
    [
      'a code grant without code',
      { ...good, grant_type: 'authorization_code', redirect_uri: 'http://127.0.0.1/cb' },
      'invalid_request',
      'Missing parameter. \\u0022code\\u0022 is required',
    ],
    [
      'a code grant without redirect_uri',
      { ...good, grant_type: 'authorization_code', code: 'abc' },
      'invalid_request',
      'The redirect URI parameter is required.',
    ],
    [
      'an unknown code',
      { ...good, grant_type: 'authorization_code', code: 'abc', redirect_uri: 'http://127.0.0.1' },
      'invalid_grant',
      'Code doesn\\u0027t exist or is invalid for the client',
    ],
    [
      'a non-empty scope',
      { ...good, grant_type: 'client_credentials', scope: 'read' },
      'invalid_scope',
      'An unsupported scope was requested.',
    ],
  ])('answers %s with the rewritten 400 error', async (_case, params, type, message) => {
    const simulator = await start();

    const reply = await postToken(simulator, params);

    expect(reply.status).toBe(400);
    expect(reply.text).toBe(oauthErrorBody(400, type, message));
    expect(reply.headers.get('cache-control')).not.toBe('no-store');
  });

  it('refuses client_credentials to a client that was not created by an admin', async () => {
    const simulator = await start();
    simulator.addClient({
      clientId: '3_editor',
      clientSecret: 's3',
      grantTypes: ['authorization_code', 'refresh_token'],
      redirectUris: ['http://127.0.0.1'],
    });

    const reply = await postToken(simulator, {
      grant_type: 'client_credentials',
      client_id: '3_editor',
      client_secret: 's3',
    });

    expect(reply.text).toBe(
      oauthErrorBody(
        400,
        'unauthorized_client',
        'The grant type is unauthorized for this client_id',
      ),
    );
  });

  it('rejects HTTP Basic credentials and a disabled API with 403', async () => {
    const simulator = await start();
    const disabled = await start({ apiEnabled: false });
    const basic = `Basic ${Buffer.from(`${clientId}:${clientSecret}`).toString('base64')}`;

    const withBasic = await fetch(`${simulator.url}/oauth/v2/token`, {
      method: 'POST',
      headers: { authorization: basic },
      body: new URLSearchParams({ grant_type: 'client_credentials' }),
    }).then(answer);
    const whenDisabled = await postToken(disabled, {
      grant_type: 'client_credentials',
      ...good,
    });

    expect(withBasic.status).toBe(403);
    expect(withBasic.text).toBe(
      oauthErrorBody(
        403,
        'access_denied',
        'Basic Auth disabled. You need to enable HTTP basic auth in the API settings of Mautic\\u0027s Configuration.',
      ),
    );
    expect(whenDisabled.text).toBe(
      oauthErrorBody(
        403,
        'api_disabled',
        'API disabled. You need to enable the API in the API settings of Mautic\\u0027s Configuration.',
      ),
    );
  });
});

describe('authorization code flow', () => {
  it('redirects at once with state and code, and the code works exactly once', async () => {
    const simulator = await start();

    const reply = await authorize(simulator, {
      client_id: clientId,
      response_type: 'code',
      redirect_uri: 'http://127.0.0.1/callback?x=1',
      state: 'st ate',
    });
    const code = new URL(reply.location).searchParams.get('code') ?? '';
    const exchange = {
      grant_type: 'authorization_code',
      client_id: clientId,
      client_secret: clientSecret,
      code,
      redirect_uri: 'http://127.0.0.1/callback?x=1',
    };
    const first = await postToken(simulator, exchange);
    const second = await postToken(simulator, exchange);

    expect(reply.status).toBe(302);
    expect(reply.location).toMatch(/^http:\/\/127\.0\.0\.1\/callback\?x=1&state=st\+ate&code=/);
    expect(code).toMatch(TOKEN_PATTERN);
    expect(first.status).toBe(200);
    expect(first.json()).toMatchObject({ token_type: 'bearer', scope: null });
    expect(first.json().refresh_token).toMatch(TOKEN_PATTERN);
    expect(second.text).toBe(
      oauthErrorBody(400, 'invalid_grant', 'Code doesn\\u0027t exist or is invalid for the client'),
    );
  });

  it('lets a code live 30 seconds by the injected clock', async () => {
    const clock = manualClock();
    const simulator = await start({ now: clock.now });
    const exchange = {
      grant_type: 'authorization_code',
      client_id: clientId,
      client_secret: clientSecret,
      redirect_uri: 'http://127.0.0.1/cb',
    };

    const onTime = await authorizationCode(simulator, 'http://127.0.0.1/cb');
    clock.ms += 30_000;
    const accepted = await postToken(simulator, { ...exchange, code: onTime });
    const late = await authorizationCode(simulator, 'http://127.0.0.1/cb');
    clock.ms += 30_001;
    const rejected = await postToken(simulator, { ...exchange, code: late });

    expect(accepted.status).toBe(200);
    expect(rejected.text).toBe(
      oauthErrorBody(400, 'invalid_grant', 'The authorization code has expired'),
    );
  });

  it('binds the code to its redirect URI', async () => {
    const simulator = await start();
    const code = await authorizationCode(simulator, 'http://127.0.0.1/one');

    const reply = await postToken(simulator, {
      grant_type: 'authorization_code',
      client_id: clientId,
      client_secret: clientSecret,
      code,
      redirect_uri: 'http://127.0.0.1/two',
    });

    expect(reply.text).toBe(
      oauthErrorBody(400, 'redirect_uri_mismatch', 'The redirect URI is missing or do not match'),
    );
  });

  it.each([
    ['another host behind the same prefix', 'http://127.0.0.1.evil.example/cb'],
    ['another port', 'http://127.0.0.1:8080/cb'],
    ['a path traversal', 'http://127.0.0.1/a/../b'],
    ['another scheme', 'https://127.0.0.1/cb'],
  ])('refuses a redirect URI with %s', async (_case, redirectUri) => {
    const simulator = await start();

    const reply = await authorize(simulator, {
      client_id: clientId,
      response_type: 'code',
      redirect_uri: redirectUri,
    });

    expect(reply.status).toBe(400);
    expect(reply.text).toBe(
      oauthErrorBody(
        400,
        'redirect_uri_mismatch',
        'The redirect URI provided does not match registered URI(s).',
      ),
    );
  });

  it('requires a redirect URI, a known client and response_type=code', async () => {
    const simulator = await start();

    const missing = await authorize(simulator, { client_id: clientId, response_type: 'code' });
    const unknown = await authorize(simulator, { client_id: '7_nobody', response_type: 'code' });
    const implicit = await authorize(simulator, {
      client_id: clientId,
      response_type: 'token',
      redirect_uri: 'http://127.0.0.1/cb',
      state: 's',
    });

    expect(missing.text).toBe(
      oauthErrorBody(
        400,
        'redirect_uri_mismatch',
        'The redirect URI is mandatory and was not supplied.',
      ),
    );
    expect(unknown.status).toBe(404);
    expect(unknown.text).toBe(
      '{"errors":[{"message":"Client not found.","code":404,"type":null}]}',
    );
    expect(implicit.status).toBe(302);
    expect(implicit.location).toBe('http://127.0.0.1/cb?error=unsupported_response_type&state=s');
  });
});

describe('bearer checks', () => {
  it('answers a missing, unknown or expired token with 401 and no WWW-Authenticate', async () => {
    const clock = manualClock();
    const simulator = await start({ now: clock.now, accessTokenLifetimeSeconds: 60 });
    const { accessToken } = simulator.issueToken();

    const missing = await api(simulator, 'GET', '/api/contacts');
    const unknown = await api(simulator, 'GET', '/api/contacts', { token: 'nope' });
    clock.ms += 60_000;
    const lastMoment = await api(simulator, 'GET', '/api/contacts', { token: accessToken });
    clock.ms += 1;
    const expired = await api(simulator, 'GET', '/api/contacts', { token: accessToken });

    expect(missing.status).toBe(401);
    expect(missing.text).toBe(oauthErrorBody(401, 'access_denied', 'API authorization denied.'));
    expect(missing.headers.get('www-authenticate')).toBeNull();
    expect(unknown.text).toBe(
      oauthErrorBody(401, 'invalid_grant', 'The access token provided is invalid.'),
    );
    expect(lastMoment.status).toBe(200);
    expect(expired.text).toBe(
      oauthErrorBody(401, 'invalid_grant', 'The access token provided has expired.'),
    );
  });

  it('expires every token on demand and accepts the token as a query parameter', async () => {
    const simulator = await start();
    const { accessToken } = simulator.issueToken();

    const viaQuery = await api(simulator, 'GET', `/api/contacts?access_token=${accessToken}`);
    simulator.expireAccessTokens();
    const after = await api(simulator, 'GET', '/api/contacts', { token: accessToken });
    const fresh = await api(simulator, 'GET', '/api/contacts', {
      token: simulator.issueToken().accessToken,
    });

    expect(viaQuery.status).toBe(200);
    expect(after.status).toBe(401);
    expect(after.json()).toMatchObject({ errors: [{ type: 'invalid_grant' }] });
    expect(fresh.status).toBe(200);
  });
});

describe('rate limiter', () => {
  it('counts per token in a fixed window and answers the extra call with 429', async () => {
    const clock = manualClock();
    const simulator = await start({ now: clock.now, rateLimit: { limit: 2 } });
    const { accessToken } = simulator.issueToken();
    const reset = String(Math.floor(START / 1000) + 3600);

    const replies = [];
    for (let i = 0; i < 3; i++) {
      replies.push(await api(simulator, 'GET', '/api/contacts', { token: accessToken }));
    }
    const otherToken = await api(simulator, 'GET', '/api/contacts', {
      token: simulator.issueToken().accessToken,
    });
    clock.ms += 3600_000;
    const nextWindow = await api(simulator, 'GET', '/api/contacts', { token: accessToken });

    expect(replies.map((reply) => reply.status)).toEqual([200, 200, 429]);
    expect(replies.map((reply) => reply.headers.get('x-ratelimit-remaining'))).toEqual([
      '1',
      '0',
      '0',
    ]);
    const limited = replies[2];
    expect(limited?.headers.get('x-ratelimit-limit')).toBe('2');
    expect(limited?.headers.get('x-ratelimit-reset')).toBe(reset);
    expect(limited?.headers.get('retry-after')).toBeNull();
    expect(limited?.headers.get('content-type')).toBe('text/html; charset=UTF-8');
    expect(limited?.text).toBe(
      '{ "errors": [ { "code": 429, "message": "You exceeded the rate limit of 2 API calls per hour.", "details": [] } ]}',
    );
    expect(otherToken.status).toBe(200);
    expect(nextWindow.status).toBe(200);
  });

  it('does not count rejected authentication and can be switched off', async () => {
    const simulator = await start({ rateLimit: { limit: 1 } });
    const { accessToken } = simulator.issueToken();

    await api(simulator, 'GET', '/api/contacts', { token: 'wrong' });
    const first = await api(simulator, 'GET', '/api/contacts', { token: accessToken });
    simulator.setRateLimit(undefined);
    const unlimited = await api(simulator, 'GET', '/api/contacts', { token: accessToken });

    expect(first.status).toBe(200);
    expect(unlimited.status).toBe(200);
    expect(unlimited.headers.get('x-ratelimit-limit')).toBeNull();
  });
});

describe('batch endpoints', () => {
  async function withToken(options: MauticSimulatorOptions = {}) {
    const simulator = await start(options);
    return { simulator, token: simulator.issueToken().accessToken };
  }

  it('creates contacts and answers with arrays when every item succeeds', async () => {
    const { simulator, token } = await withToken();

    const reply = await api(simulator, 'POST', '/api/contacts/batch/new', {
      token,
      body: [{ email: 'ada@example.com', firstname: 'Ada' }, { email: 'alan@example.com' }],
    });

    expect(reply.status).toBe(201);
    expect(reply.headers.get('mautic-version')).toBe('5.1.1');
    const body = reply.json();
    expect(body.statusCodes).toEqual([201, 201]);
    expect(body.errors).toBeUndefined();
    expect(body.contacts).toMatchObject([
      { id: 1, fields: { all: { id: '1', email: 'ada@example.com', firstname: 'Ada' } } },
      { id: 2 },
    ]);
    expect(simulator.records('contacts')).toMatchObject([
      { id: 1, email: 'ada@example.com', firstname: 'Ada' },
      { id: 2, email: 'alan@example.com' },
    ]);
  });

  it('keys the contacts by index when an item in the middle fails', async () => {
    const { simulator, token } = await withToken();

    const reply = await api(simulator, 'POST', '/api/contacts/batch/new', {
      token,
      body: [{ email: 'a@example.com' }, { email: 'not-an-email' }, { email: 'c@example.com' }],
    });

    expect(reply.status).toBe(201);
    const body = reply.json();
    expect(body.statusCodes).toEqual([201, 400, 201]);
    expect(Object.keys(body.contacts as object)).toEqual(['0', '2']);
    expect(Array.isArray(body.contacts)).toBe(false);
    expect(body.errors).toEqual({
      1: {
        code: 400,
        message: 'email: not-an-email is invalid.',
        details: { email: ['not-an-email is invalid.'] },
        type: null,
      },
    });
  });

  it('answers errors as an array when only item 0 fails', async () => {
    const { simulator, token } = await withToken();

    const reply = await api(simulator, 'POST', '/api/contacts/batch/new', {
      token,
      body: [{ email: 'a^b@example.com' }, { email: 'b@example.com' }],
    });

    const body = reply.json();
    expect(body.errors).toEqual([
      {
        code: 400,
        message: 'email: a^b@example.com has characters not allowed in email addresses.',
        details: { email: ['a^b@example.com has characters not allowed in email addresses.'] },
        type: null,
      },
    ]);
    expect(Object.keys(body.contacts as object)).toEqual(['1']);
    expect(Array.isArray(body.contacts)).toBe(false);
  });

  it('upserts by email, case-insensitively and after sanitizing, without blanking fields', async () => {
    const { simulator, token } = await withToken();
    const existing = simulator.seed('contacts', { email: 'Ada@Example.com', firstname: 'Ada' });

    const reply = await api(simulator, 'POST', '/api/contacts/batch/new', {
      token,
      body: [
        { email: 'ada@example.COM', firstname: '', lastname: 'Lovelace', id: 99 },
        { email: 'ada@example.com,', points: 0 },
        { email: 'grace@example.com' },
      ],
    });

    const body = reply.json();
    expect(body.statusCodes).toEqual([200, 200, 201]);
    expect(body.contacts).toMatchObject([
      { id: existing.id },
      { id: existing.id },
      { id: existing.id + 1 },
    ]);
    expect(simulator.records('contacts')).toMatchObject([
      { id: existing.id, email: 'ada@example.com', firstname: 'Ada', lastname: 'Lovelace' },
      { email: 'grace@example.com' },
    ]);
  });

  it('creates then merges a duplicate email within one batch', async () => {
    const { simulator, token } = await withToken();

    const reply = await api(simulator, 'POST', '/api/contacts/batch/new', {
      token,
      body: [{ email: 'dup@example.com' }, { email: 'DUP@example.com', city: 'Paris' }],
    });

    const body = reply.json();
    expect(body.statusCodes).toEqual([201, 200]);
    expect(body.contacts).toMatchObject([{ id: 1 }, { id: 1 }]);
    expect(simulator.records('contacts')).toHaveLength(1);
  });

  it('refuses an email two contacts share, and upserts again once one is gone', async () => {
    const { simulator, token } = await withToken();
    const newer = simulator.seed('contacts', {
      email: 'Old@Example.com',
      dateAdded: '2024-06-01T00:00:00+00:00',
    });
    const older = simulator.seed('contacts', {
      email: 'old@example.com',
      dateAdded: '2024-01-01T00:00:00+00:00',
    });
    const upsert = async (email: string) => {
      const body = (
        await api(simulator, 'POST', '/api/contacts/batch/new', { token, body: [{ email }] })
      ).json();
      const [status] = body.statusCodes as number[];
      const contact = (body.contacts as Record<string, { id: number }>)[0];
      return { status, id: contact?.id };
    };
    const put = (item: Record<string, unknown>) =>
      api(simulator, 'PUT', '/api/contacts/batch/edit', { token, body: [item] });

    // The upsert picks the most recently added one; UniqueCustomField then counts two holders.
    expect(await upsert('OLD@example.com')).toEqual({ status: 422, id: undefined });
    await api(simulator, 'DELETE', `/api/contacts/batch/delete?ids=${older.id}`, { token });
    expect(await upsert('old@example.com')).toEqual({ status: 200, id: newer.id });
    await put({ id: newer.id, email: 'moved@example.com' });
    expect(await upsert('Moved@example.com')).toEqual({ status: 200, id: newer.id });
    expect(await upsert('old@example.com')).toMatchObject({ status: 201 });
    // PUT clears the fields it is not sent, the email included.
    await put({ id: newer.id, firstname: 'Ada' });
    expect(await upsert('moved@example.com')).toMatchObject({ status: 201 });
    expect(simulator.records('contacts').map((contact) => contact.email)).toEqual([
      undefined,
      'old@example.com',
      'moved@example.com',
    ]);
  });

  it('edits with PATCH, answers 404 per unknown item and creates on PUT', async () => {
    const { simulator, token } = await withToken();
    const { id } = simulator.seed('contacts', { email: 'a@example.com', city: 'Rome' });

    const patch = await api(simulator, 'PATCH', '/api/contacts/batch/edit', {
      token,
      body: [
        { id: 999, city: 'Oslo' },
        { id, city: '', firstname: 'Al' },
      ],
    });
    const put = await api(simulator, 'PUT', '/api/contacts/batch/edit', {
      token,
      body: [{ id: 'rubbish', email: 'new@example.com' }],
    });

    expect(patch.status).toBe(200);
    const patched = patch.json();
    expect(patched.statusCodes).toEqual([404, 200]);
    expect(patched.errors).toEqual([{ message: 'Item was not found.', code: 404, type: 'api' }]);
    expect(Object.keys(patched.contacts as object)).toEqual(['1']);
    expect(put.status).toBe(200);
    expect(put.json()).toMatchObject({ statusCodes: [201], contacts: [{ id: id + 1 }] });
    expect(simulator.records('contacts')).toMatchObject([
      { id, email: 'a@example.com', city: 'Rome', firstname: 'Al' },
      { id: id + 1, email: 'new@example.com' },
    ]);
  });

  it('overwrites blanks on PUT and with overwriteWithBlank', async () => {
    const { simulator, token } = await withToken();
    const first = simulator.seed('contacts', { email: 'a@example.com', city: 'Rome' });
    const second = simulator.seed('contacts', { email: 'b@example.com', city: 'Oslo' });

    await api(simulator, 'PUT', '/api/contacts/batch/edit', {
      token,
      body: [{ id: first.id, email: 'a@example.com', city: '' }],
    });
    await api(simulator, 'PATCH', '/api/contacts/batch/edit', {
      token,
      body: [{ id: second.id, city: '', overwriteWithBlank: true }],
    });

    expect(simulator.records('contacts')).toMatchObject([{ city: '' }, { city: '' }]);
  });

  it('answers an id-less PATCH item 404, and a PUT one 400 after creating it', async () => {
    const { simulator, token } = await withToken();
    const { id } = simulator.seed('contacts', { email: 'a@example.com' });

    const patch = await api(simulator, 'PATCH', '/api/contacts/batch/edit', {
      token,
      body: [{ id, firstname: 'A' }, { firstname: 'B' }],
    });
    const put = await api(simulator, 'PUT', '/api/contacts/batch/edit', {
      token,
      body: [{ id, firstname: 'C' }, { firstname: 'D' }],
    });

    // id_missing is set first, then PATCH's not-found replaces it (real-mautic-5.1.1).
    expect(patch.json()).toMatchObject({
      statusCodes: [200, 404],
      errors: { 1: { message: 'Item was not found.', code: 404, type: 'api' } },
    });
    // PUT creates the item, but its status is the id_missing error's.
    expect(put.json()).toMatchObject({
      statusCodes: [200, 400],
      errors: { 1: { message: 'mautic.api.call.id_missing', code: 400, type: 'api' } },
      contacts: [{ id }, { id: id + 1 }],
    });
    expect(simulator.records('contacts').map((contact) => contact.firstname)).toEqual(['C', 'D']);
  });

  it("edits the next item's record with an id-less item's fields, as BatchIdToEntityHelper does", async () => {
    const { simulator, token } = await withToken();
    const first = simulator.seed('contacts', { email: 'a@example.com' });
    const second = simulator.seed('contacts', { email: 'b@example.com' });

    const reply = await api(simulator, 'PATCH', '/api/contacts/batch/edit', {
      token,
      body: [{ id: first.id, city: 'Oslo' }, { city: 'Lima' }, { id: second.id, city: 'Rome' }],
    });

    expect(reply.json()).toMatchObject({
      statusCodes: [200, 400, 404],
      contacts: { 0: { id: first.id }, 1: { id: second.id } },
    });
    expect(simulator.records('contacts').map((contact) => contact.city)).toEqual(['Oslo', 'Lima']);
  });

  it('deletes by query ids, skips missing ones silently and keys by request position', async () => {
    const { simulator, token } = await withToken();
    for (const email of ['a@example.com', 'b@example.com', 'c@example.com', 'd@example.com']) {
      simulator.seed('contacts', { email });
    }

    const csv = await api(simulator, 'DELETE', '/api/contacts/batch/delete?ids=1,99,3', { token });
    const brackets = await api(simulator, 'DELETE', '/api/contacts/batch/delete?ids[]=2&ids[]=4', {
      token,
    });

    expect(csv.status).toBe(200);
    const body = csv.json();
    expect(Object.keys(body)).toEqual(['contacts']);
    expect(body.contacts).toMatchObject({ 0: { id: 1 }, 2: { id: 3 } });
    expect(brackets.json().contacts).toMatchObject([{ id: 2 }, { id: 4 }]);
    expect(simulator.records('contacts')).toEqual([]);
    expect(simulator.requests.map((entry) => entry.items)).toEqual([3, 2]);
  });

  it('answers HTTP 500 above the batch limit and processes exactly the limit', async () => {
    const { simulator, token } = await withToken();
    const items = (count: number) =>
      Array.from({ length: count }, (_, i) => ({ email: `c${i}@example.com` }));

    const over = await api(simulator, 'POST', '/api/contacts/batch/new', {
      token,
      body: items(201),
    });
    const atLimit = await api(simulator, 'POST', '/api/contacts/batch/new', {
      token,
      body: items(200),
    });

    expect(over.status).toBe(500);
    expect(over.text).toBe(
      '{"errors":[{"code":500,"message":"A max of 200 entities are supported at a time.","details":[]}]}',
    );
    expect(atLimit.status).toBe(201);
    expect(simulator.records('contacts')).toHaveLength(200);
  });

  it('takes the batch limit from the options', async () => {
    const { simulator, token } = await withToken({ batchMaxLimit: 2 });

    const reply = await api(simulator, 'POST', '/api/companies/batch/new', {
      token,
      body: [{ companyname: 'A' }, { companyname: 'B' }, { companyname: 'C' }],
    });

    expect(reply.status).toBe(500);
    expect(reply.json()).toEqual({
      errors: [{ code: 500, message: 'A max of 2 entities are supported at a time.', details: [] }],
    });
  });

  it('answers malformed and empty bodies as Mautic does', async () => {
    const { simulator, token } = await withToken();
    const post = (body: string, contentType?: string) =>
      api(simulator, 'POST', '/api/contacts/batch/new', {
        token,
        body,
        ...(contentType === undefined ? {} : { contentType }),
      });
    const generic = (code: number) =>
      `{"errors":[{"message":"Looks like I encountered an error (error #${code}). If I do it again, please report me to the system administrator!","code":${code},"type":null}]}`;

    const notJson = await post('{oops');
    const scalar = await post('42');
    const object = await post('{"email":"a@example.com"}');
    const scalars = await post('["a@example.com"]');
    const empty = await post('[]');
    const asText = await post('[{"email":"a@example.com"}]', 'text/plain');

    expect([notJson.status, notJson.text]).toEqual([400, generic(400)]);
    expect(scalar.status).toBe(400);
    expect([object.status, object.text]).toEqual([500, generic(500)]);
    expect(scalars.status).toBe(500);
    expect([empty.status, empty.text]).toEqual([201, '{"contacts":[],"statusCodes":[]}']);
    expect([asText.status, asText.text]).toEqual([201, '{"contacts":[],"statusCodes":[]}']);
    expect(simulator.records('contacts')).toEqual([]);
  });

  it('reads form bodies the PHP way and JSON bodies that carry no content type', async () => {
    const { simulator, token } = await withToken();

    const form = await fetch(`${simulator.url}/api/contacts/batch/new`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: `access_token=${token}&0[email]=f%40example.com&1[email]=g%40example.com`,
    }).then(answer);
    const untyped = await fetch(`${simulator.url}/api/segments/batch/new`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}` },
      body: new Blob(['[{"name":"A/B \u00e9"}]']),
    }).then(answer);

    expect(form.status).toBe(201);
    expect(form.json().statusCodes).toEqual([201, 201]);
    expect(simulator.requests[0]?.items).toBe(2);
    expect(untyped.status).toBe(201);
    expect(untyped.text).toContain('"name":"A\\/B \\u00e9"');
    expect(simulator.records('segments')).toMatchObject([{ name: 'A/B \u00e9' }]);
  });

  it('answers unknown API paths with the exception controller 404', async () => {
    const { simulator, token } = await withToken();

    const reply = await api(simulator, 'GET', '/api/points/groups', { token });

    expect(reply.status).toBe(404);
    expect(reply.text).toBe(
      '{"errors":[{"message":"Requested URL not found: \\/api\\/points\\/groups","code":404,"type":null}]}',
    );
  });

  it('answers segments under lists and requires a name', async () => {
    const { simulator, token } = await withToken();

    const created = await api(simulator, 'POST', '/api/segments/batch/new', {
      token,
      body: [{ name: 'Newsletter' }, { description: 'no name' }],
    });
    const list = await api(simulator, 'GET', '/api/segments', { token });

    const body = created.json();
    expect(body.statusCodes).toEqual([201, 400]);
    expect(body.lists).toMatchObject([{ id: 1, name: 'Newsletter' }]);
    expect(body.errors).toEqual({
      1: {
        code: 400,
        message: 'name: A value is required.',
        details: { name: ['A value is required.'] },
        type: null,
      },
    });
    expect(list.json()).toMatchObject({ total: 1, lists: [{ id: 1, name: 'Newsletter' }] });
  });

  it('refuses a second company of the same name, ignoring case and trailing spaces', async () => {
    const { simulator, token } = await withToken();

    const reply = await api(simulator, 'POST', '/api/companies/batch/new', {
      token,
      body: [{ companyname: 'Acme' }, { companyname: 'ACME  ' }, { companyname: 'Globex' }],
    });
    const rename = await api(simulator, 'PATCH', '/api/companies/batch/edit', {
      token,
      body: [{ id: 2, companyname: 'acme' }],
    });

    const unique = {
      code: 422,
      message: 'companyname: This field must be unique.',
      details: { companyname: ['This field must be unique.'] },
      type: null,
    };
    expect(reply.json()).toMatchObject({
      statusCodes: [201, 422, 201],
      companies: {
        0: { id: 1, score: 0, fields: { all: { id: 1, companyname: 'Acme' } } },
        2: { id: 2 },
      },
      errors: { 1: unique },
    });
    // A refused edit item is still listed, as it was.
    expect(rename.json()).toMatchObject({
      statusCodes: [422],
      companies: [{ id: 2, fields: { all: { companyname: 'Globex' } } }],
      errors: [unique],
    });
    expect(simulator.records('companies').map((company) => company.companyname)).toEqual([
      'Acme',
      'Globex',
    ]);
  });

  it('requires a company name and a valid company email, and writes blanks on PATCH', async () => {
    const { simulator, token } = await withToken();

    const created = await api(simulator, 'POST', '/api/companies/batch/new', {
      token,
      body: [{ companycity: 'Oslo' }, { companyname: 'Acme', companyemail: 'not-an-email' }],
    });
    const { id } = simulator.seed('companies', { companyname: 'Seed', companycity: 'Rome' });
    const blanked = await api(simulator, 'PATCH', '/api/companies/batch/edit', {
      token,
      body: [{ id, companycity: '', companynumber_of_employees: 0 }],
    });

    expect(created.json()).toMatchObject({
      statusCodes: [400, 400],
      errors: [
        {
          code: 400,
          message: 'companyname: This field is required.',
          details: { companyname: ['This field is required.'] },
        },
        { code: 400, message: 'companyemail: not-an-email is invalid.' },
      ],
    });
    expect(blanked.json()).toMatchObject({ statusCodes: [200] });
    expect(simulator.records('companies')).toMatchObject([
      { id, companyname: 'Seed', companycity: '', companynumber_of_employees: 0 },
    ]);
  });
});

describe('reading entities', () => {
  it('answers an empty contact list exactly as Mautic does', async () => {
    const simulator = await start();
    const token = simulator.issueToken().accessToken;

    const contacts = await api(simulator, 'GET', '/api/contacts', { token });
    const segments = await api(simulator, 'GET', '/api/segments', { token });

    expect(contacts.text).toBe('{"total":"0","contacts":{}}');
    expect(segments.text).toBe('{"total":0,"lists":[]}');
  });

  it('keys contacts by id, counts as a string and filters with search, start and limit', async () => {
    const simulator = await start();
    const token = simulator.issueToken().accessToken;
    for (const name of ['ada', 'alan', 'grace']) {
      simulator.seed('contacts', { email: `${name}@example.com`, firstname: name });
    }

    const all = await api(simulator, 'GET', '/api/contacts', { token });
    const byEmail = await api(simulator, 'GET', '/api/contacts?search=email:GRACE@example.com', {
      token,
    });
    const byIds = await api(simulator, 'GET', '/api/contacts?search=ids:1,3', { token });
    const byText = await api(simulator, 'GET', '/api/contacts?search=al', { token });
    const page = await api(simulator, 'GET', '/api/contacts?start=1&limit=1', { token });

    expect(all.json().total).toBe('3');
    expect(Object.keys(all.json().contacts as object)).toEqual(['1', '2', '3']);
    expect(Object.keys(byEmail.json().contacts as object)).toEqual(['3']);
    expect(Object.keys(byIds.json().contacts as object)).toEqual(['1', '3']);
    expect(Object.keys(byText.json().contacts as object)).toEqual(['2']);
    expect(page.json()).toMatchObject({ total: '3', contacts: { 2: { id: 2 } } });
    expect(Object.keys(page.json().contacts as object)).toEqual(['2']);
  });

  it('answers one contact or the controller 404', async () => {
    const simulator = await start();
    const token = simulator.issueToken().accessToken;
    const { id } = simulator.seed('contacts', { email: 'ada@example.com' });

    const found = await api(simulator, 'GET', `/api/contacts/${id}`, { token });
    const missing = await api(simulator, 'GET', '/api/contacts/42', { token });

    expect(found.json()).toMatchObject({
      contact: { id, fields: { all: { email: 'ada@example.com' } } },
    });
    expect(found.json().contact).toHaveProperty('dateAdded', expect.stringMatching(/\+00:00$/));
    expect(missing.status).toBe(404);
    expect(missing.text).toBe(
      '{"errors":[{"code":404,"message":"Item was not found.","details":[]}]}',
    );
  });
});

describe('faults and scripted answers', () => {
  async function statusSequence(seed: number): Promise<Array<number | 'dropped'>> {
    const simulator = await start({ faults: { seed, errorRate: 0.4, dropRate: 0.2 } });
    const token = simulator.issueToken().accessToken;
    const statuses: Array<number | 'dropped'> = [];
    for (let i = 0; i < 15; i++) {
      try {
        statuses.push((await api(simulator, 'GET', '/api/contacts', { token })).status);
      } catch {
        statuses.push('dropped');
      }
    }
    expect(simulator.requests.map((entry) => entry.status)).toEqual(
      statuses.map((status) => (status === 'dropped' ? 0 : status)),
    );
    return statuses;
  }

  it('repeats the same fault sequence for the same seed', async () => {
    const first = await statusSequence(7);
    const second = await statusSequence(7);

    expect(second).toEqual(first);
    expect(first).toContain(200);
    expect(first.some((status) => status === 'dropped' || status >= 500)).toBe(true);
  });

  it('drops connections on /api only by default, and can be switched off', async () => {
    const simulator = await start({ faults: { seed: 1, dropRate: 1 } });
    const token = simulator.issueToken().accessToken;

    await expect(api(simulator, 'GET', '/api/contacts', { token })).rejects.toThrow();
    const tokenEndpoint = await postToken(simulator, {
      grant_type: 'client_credentials',
      client_id: clientId,
      client_secret: clientSecret,
    });
    simulator.setFaults(undefined);
    const healed = await api(simulator, 'GET', '/api/contacts', { token });

    expect(tokenEndpoint.status).toBe(200);
    expect(healed.status).toBe(200);
    expect(simulator.requests.map((entry) => entry.status)).toEqual([0, 200, 200]);
  });

  it('delays answers by the configured latency', async () => {
    const simulator = await start({ faults: { seed: 3, latencyMs: { min: 60, max: 60 } } });
    const token = simulator.issueToken().accessToken;

    const started = performance.now();
    const reply = await api(simulator, 'GET', '/api/contacts', { token });

    expect(reply.status).toBe(200);
    expect(performance.now() - started).toBeGreaterThanOrEqual(55);
  });

  it('takes longer for a larger batch: latencyMs.perItem per item of the call', async () => {
    const simulator = await start({
      faults: { seed: 3, latencyMs: { min: 0, max: 0, perItem: 30 } },
    });
    const token = simulator.issueToken().accessToken;
    const body = Array.from({ length: 10 }, (_, i) => ({ email: `slow${i}@example.com` }));

    const started = performance.now();
    const reply = await api(simulator, 'POST', '/api/contacts/batch/new', { token, body });

    expect(reply.status).toBe(201);
    expect(simulator.requests.at(-1)?.items).toBe(10);
    expect(performance.now() - started).toBeGreaterThanOrEqual(295);
    await expect(
      start({ faults: { seed: 3, latencyMs: { min: 0, max: 0, perItem: -1 } } }),
    ).rejects.toThrow(/perItem >= 0/);
  });

  it('does the work of a passing request inside the latency: applied first, answered when it is over', async () => {
    const simulator = await start({ faults: { seed: 3, latencyMs: { min: 1_000, max: 1_000 } } });
    const token = simulator.issueToken().accessToken;

    let answered = false;
    const reply = api(simulator, 'POST', '/api/contacts/batch/new', {
      token,
      body: [{ email: 'early@example.com' }],
    }).finally(() => {
      answered = true;
    });
    const deadline = performance.now() + 800;
    while (simulator.records('contacts').length === 0 && performance.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }

    expect(simulator.records('contacts')).toHaveLength(1);
    expect(answered).toBe(false);
    expect((await reply).status).toBe(201);
  });

  it('answers injected responses first, the given number of times', async () => {
    const simulator = await start();
    simulator.inject(
      { method: 'post', path: /\/batch\/new$/ },
      { status: 503, headers: { 'retry-after': '1' }, body: 'busy' },
      2,
    );
    const token = simulator.issueToken().accessToken;
    const send = () =>
      api(simulator, 'POST', '/api/contacts/batch/new', {
        token,
        body: [{ email: 'a@example.com' }],
      });

    const replies = [await send(), await send(), await send()];

    expect(replies.map((reply) => reply.status)).toEqual([503, 503, 201]);
    expect(replies[0]?.text).toBe('busy');
    expect(replies[0]?.headers.get('retry-after')).toBe('1');
    expect(simulator.requests.map((entry) => [entry.status, entry.items])).toEqual([
      [503, 1],
      [503, 1],
      [201, 1],
    ]);
    expect(simulator.records('contacts')).toHaveLength(1);
  });
});

describe('request log', () => {
  it('numbers the tokens used and never keeps a token or secret', async () => {
    const simulator = await start();
    const first = simulator.issueToken();
    const second = simulator.issueToken();

    await api(simulator, 'GET', '/api/contacts', { token: first.accessToken });
    await api(simulator, 'GET', `/api/contacts?access_token=${second.accessToken}&limit=5`);
    await fetch(
      `${simulator.url}/oauth/v2/token?${new URLSearchParams({
        grant_type: 'refresh_token',
        client_id: clientId,
        client_secret: clientSecret,
        refresh_token: first.refreshToken,
      })}`,
    );

    const log = simulator.requests;
    expect(log.map((entry) => entry.tokenId)).toEqual([1, 2, undefined]);
    expect(log[1]?.query).toBe('access_token=REDACTED&limit=5');
    const serialized = JSON.stringify(log);
    for (const secret of [
      first.accessToken,
      second.accessToken,
      first.refreshToken,
      clientSecret,
    ]) {
      expect(serialized).not.toContain(secret);
    }
    simulator.clearRequests();
    expect(simulator.requests).toEqual([]);
  });
});
