import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  MauticResponseError,
  MauticTokenError,
  MauticTransientError,
} from '../../../functions/core/errors.ts';
import { MauticApiClient } from '../../../functions/core/mautic/mautic-api.ts';
import { MauticOAuthClient } from '../../../functions/core/mautic/mautic-oauth.ts';
import {
  DEFAULT_SIMULATOR_CLIENT,
  type MauticSimulator,
  startMauticSimulator,
} from '../../../mautic-simulator/server.ts';
import { expectNoSecrets, thrownBy } from '../../support/secrets.ts';

const START = Date.parse('2026-11-21T00:00:00Z');
const REDIRECT_URI = 'http://127.0.0.1/callback';
const NON_ADMIN = {
  clientId: '2_nonadmin',
  clientSecret: 'non-admin-secret-value',
  grantTypes: ['authorization_code', 'refresh_token'] as ('authorization_code' | 'refresh_token')[],
  redirectUris: ['http://127.0.0.1'],
};

let now = START;
const clock = { now: () => now };
let sim: MauticSimulator;
let sentInits: RequestInit[];
const recordingFetch = (url: string, init: RequestInit) => {
  sentInits.push(init);
  return fetch(url, init);
};

function oauthClient(
  overrides: Partial<{ clientId: string; clientSecret: string; timeoutMs: number }> = {},
) {
  return new MauticOAuthClient({
    baseUrl: sim.url,
    clientId: overrides.clientId ?? DEFAULT_SIMULATOR_CLIENT.clientId,
    clientSecret: overrides.clientSecret ?? DEFAULT_SIMULATOR_CLIENT.clientSecret,
    fetch: recordingFetch,
    clock,
    ...(overrides.timeoutMs === undefined ? {} : { timeoutMs: overrides.timeoutMs }),
  });
}

/** Follows the authorize URL as a browser would, up to the redirect, and returns the code. */
async function authorize(client: MauticOAuthClient, redirectUri = REDIRECT_URI): Promise<string> {
  const response = await fetch(client.authorizeUrl(redirectUri, 'state-123'), {
    redirect: 'manual',
  });
  expect(response.status).toBe(302);
  const location = new URL(response.headers.get('location') ?? '');
  expect(location.searchParams.get('state')).toBe('state-123');
  return location.searchParams.get('code') ?? '';
}

beforeEach(async () => {
  now = START;
  sentInits = [];
  sim = await startMauticSimulator({
    now: () => now,
    clients: [DEFAULT_SIMULATOR_CLIENT, NON_ADMIN],
  });
});

afterEach(async () => {
  await sim.close();
});

describe('MauticOAuthClient grants', () => {
  it('gets a client_credentials token with no refresh token, scope null and an absolute expiry', async () => {
    const tokens = await oauthClient().clientCredentials();

    expect(tokens.accessToken).toMatch(/^[A-Za-z0-9_-]{20,}$/);
    expect(tokens.accessTokenExpiresAt).toBe(START + 3600 * 1000);
    expect(tokens.obtainedAt).toBe(START);
    expect(tokens.scope).toBeNull();
    expect(tokens).not.toHaveProperty('refreshToken');
    const api = new MauticApiClient({ baseUrl: sim.url, fetch });
    await expect(api.list('contacts', {}, { accessToken: tokens.accessToken })).resolves.toEqual({
      total: 0,
      records: [],
    });
  });

  it('sends the client id and secret form-encoded in the body, never as HTTP Basic', async () => {
    await oauthClient().clientCredentials();

    const init = sentInits[0];
    const headers = new Headers(init?.headers);
    expect(headers.get('content-type')).toBe('application/x-www-form-urlencoded');
    expect(headers.has('authorization')).toBe(false);
    const body = new URLSearchParams(String(init?.body));
    expect(body.get('grant_type')).toBe('client_credentials');
    expect(body.get('client_id')).toBe(DEFAULT_SIMULATOR_CLIENT.clientId);
    expect(body.get('client_secret')).toBe(DEFAULT_SIMULATOR_CLIENT.clientSecret);
    expect(init?.redirect).toBe('manual');
  });

  it('exchanges an authorization code for tokens with a refresh token', async () => {
    const client = oauthClient({
      clientId: NON_ADMIN.clientId,
      clientSecret: NON_ADMIN.clientSecret,
    });
    const code = await authorize(client);

    const tokens = await client.exchangeCode(code, REDIRECT_URI);

    expect(tokens.refreshToken).toMatch(/^[A-Za-z0-9_-]{20,}$/);
    expect(tokens.accessTokenExpiresAt).toBe(START + 3600 * 1000);
    const sent = new URLSearchParams(String(sentInits.at(-1)?.body));
    expect(sent.get('grant_type')).toBe('authorization_code');
    expect(sent.get('redirect_uri')).toBe(REDIRECT_URI);
  });

  it('builds the authorize URL Mautic expects', () => {
    const url = new URL(oauthClient().authorizeUrl(REDIRECT_URI, 'abc'));

    expect(url.origin + url.pathname).toBe(`${sim.url}/oauth/v2/authorize`);
    expect(Object.fromEntries(url.searchParams)).toEqual({
      client_id: DEFAULT_SIMULATOR_CLIENT.clientId,
      response_type: 'code',
      redirect_uri: REDIRECT_URI,
      state: 'abc',
    });
  });

  it('rotates the refresh token: the new one works, the old one is invalid_grant, the old access token still works', async () => {
    const client = oauthClient({
      clientId: NON_ADMIN.clientId,
      clientSecret: NON_ADMIN.clientSecret,
    });
    const first = await client.exchangeCode(await authorize(client), REDIRECT_URI);
    now += 60_000;

    const second = await client.refresh(first.refreshToken ?? '');

    expect(second.refreshToken).toBeDefined();
    expect(second.refreshToken).not.toBe(first.refreshToken);
    expect(second.accessToken).not.toBe(first.accessToken);
    expect(second.accessTokenExpiresAt).toBe(now + 3600 * 1000);
    const reuse = await thrownBy(() => client.refresh(first.refreshToken ?? ''));
    expect(reuse).toBeInstanceOf(MauticTokenError);
    expect(reuse).toMatchObject({ reason: 'invalid_grant', status: 400, retryable: false });
    expect((reuse as Error).message).toContain('Invalid refresh token');
    expectNoSecrets(reuse, [first.refreshToken ?? '', NON_ADMIN.clientSecret]);
    const api = new MauticApiClient({ baseUrl: sim.url, fetch });
    await expect(
      api.list('contacts', {}, { accessToken: first.accessToken }),
    ).resolves.toMatchObject({ total: 0 });
    await expect(client.refresh(second.refreshToken ?? '')).resolves.toHaveProperty('refreshToken');
  });
});

describe('MauticOAuthClient token errors', () => {
  it('reports a wrong secret as invalid_client without echoing the secret', async () => {
    const error = await thrownBy(() =>
      oauthClient({ clientSecret: 'wrong-secret-xyz' }).clientCredentials(),
    );

    expect(error).toBeInstanceOf(MauticTokenError);
    expect(error).toMatchObject({
      reason: 'invalid_client',
      mauticType: 'invalid_client',
      status: 400,
    });
    expect((error as Error).message).toContain('The client credentials are invalid');
    expectNoSecrets(error, ['wrong-secret-xyz', DEFAULT_SIMULATOR_CLIENT.clientSecret]);
  });

  it('reports an unknown client id as invalid_client', async () => {
    const error = await thrownBy(() => oauthClient({ clientId: '99_nobody' }).clientCredentials());

    expect(error).toMatchObject({ reason: 'invalid_client' });
  });

  it('reports client_credentials on a non-admin credential as unauthorized_client', async () => {
    const client = oauthClient({
      clientId: NON_ADMIN.clientId,
      clientSecret: NON_ADMIN.clientSecret,
    });

    const error = await thrownBy(() => client.clientCredentials());

    expect(error).toBeInstanceOf(MauticTokenError);
    expect(error).toMatchObject({
      reason: 'unauthorized_client',
      mauticType: 'unauthorized_client',
    });
    expectNoSecrets(error, [NON_ADMIN.clientSecret]);
  });

  it('reports an expired refresh token as invalid_grant', async () => {
    await sim.close();
    sim = await startMauticSimulator({ now: () => now, refreshTokenLifetimeSeconds: 60 });
    const client = oauthClient();
    const code = await authorize(client);
    const tokens = await client.exchangeCode(code, REDIRECT_URI);
    now += 61_000;

    const error = await thrownBy(() => client.refresh(tokens.refreshToken ?? ''));

    expect(error).toMatchObject({ reason: 'invalid_grant' });
    expect((error as Error).message).toContain('Refresh token has expired');
    expectNoSecrets(error, [tokens.refreshToken ?? '', tokens.accessToken]);
  });

  it('reports a used or expired authorization code as invalid_grant', async () => {
    const client = oauthClient();
    const used = await authorize(client);
    await client.exchangeCode(used, REDIRECT_URI);
    const late = await authorize(client);
    now += 31_000;

    const reused = await thrownBy(() => client.exchangeCode(used, REDIRECT_URI));
    const expired = await thrownBy(() => client.exchangeCode(late, REDIRECT_URI));

    expect(reused).toMatchObject({ reason: 'invalid_grant' });
    expect(expired).toMatchObject({ reason: 'invalid_grant' });
    expect((expired as Error).message).toContain('The authorization code has expired');
  });

  it('reports a redirect URI that differs from the authorize one as other', async () => {
    const client = oauthClient();
    const code = await authorize(client);

    const error = await thrownBy(() => client.exchangeCode(code, 'http://127.0.0.1/elsewhere'));

    expect(error).toMatchObject({ reason: 'other', mauticType: 'redirect_uri_mismatch' });
  });

  it('reads the raw OAuth error form {"error","error_description"}', async () => {
    sim.inject(
      { path: '/oauth/v2/token' },
      {
        status: 400,
        headers: { 'content-type': 'application/json' },
        body: '{"error":"invalid_grant","error_description":"Invalid refresh token"}',
      },
    );
    sim.inject(
      { path: '/oauth/v2/token' },
      {
        status: 400,
        headers: { 'content-type': 'application/json' },
        body: '{"error":"unsupported_grant_type","error_description":null}',
      },
    );

    const described = await thrownBy(() => oauthClient().refresh('some-refresh-token'));
    const bare = await thrownBy(() => oauthClient().refresh('some-refresh-token'));

    expect(described).toMatchObject({ reason: 'invalid_grant', mauticType: 'invalid_grant' });
    expect((described as Error).message).toContain('Invalid refresh token');
    expect(bare).toMatchObject({ reason: 'other', mauticType: 'unsupported_grant_type' });
    expectNoSecrets(described, ['some-refresh-token']);
  });

  it('reports a 403 api_disabled as other', async () => {
    await sim.close();
    sim = await startMauticSimulator({ now: () => now, apiEnabled: false });

    const error = await thrownBy(() => oauthClient().clientCredentials());

    expect(error).toMatchObject({ reason: 'other', mauticType: 'api_disabled', status: 403 });
  });

  it('treats 5xx, a dropped connection and a timeout at the token endpoint as transient', async () => {
    sim.inject({ path: '/oauth/v2/token' }, { status: 503, body: '<html>busy</html>' });
    const server = await thrownBy(() => oauthClient().clientCredentials());
    sim.setFaults({ seed: 1, dropRate: 1, scope: 'all' });
    const dropped = await thrownBy(() => oauthClient().clientCredentials());
    sim.setFaults({ seed: 1, latencyMs: { min: 400, max: 400 }, scope: 'all' });
    const slow = await thrownBy(() => oauthClient({ timeoutMs: 50 }).clientCredentials());

    expect(server).toBeInstanceOf(MauticTransientError);
    expect(server).toMatchObject({ kind: 'server', status: 503, retryable: true });
    expect(dropped).toMatchObject({ kind: 'network', retryable: true });
    expect(slow).toMatchObject({ kind: 'timeout', retryable: true });
    for (const error of [server, dropped, slow])
      expectNoSecrets(error, [DEFAULT_SIMULATOR_CLIENT.clientSecret]);
  });
});

describe('MauticOAuthClient token parsing', () => {
  const answer = (body: unknown) =>
    sim.inject(
      { path: '/oauth/v2/token' },
      { status: 200, headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) },
    );

  it('accepts token_type in any case, expires_in as a numeric string and an empty scope', async () => {
    answer({
      access_token: 'a'.repeat(86),
      expires_in: '120',
      token_type: 'Bearer',
      scope: '',
      refresh_token: 'r'.repeat(86),
    });

    const tokens = await oauthClient().clientCredentials();

    expect(tokens).toEqual({
      accessToken: 'a'.repeat(86),
      accessTokenExpiresAt: START + 120_000,
      refreshToken: 'r'.repeat(86),
      scope: '',
      obtainedAt: START,
    });
  });

  it('takes no version from a token answer, even one that names it: Mautic names none there', async () => {
    sim.inject(
      { path: '/oauth/v2/token' },
      {
        status: 200,
        headers: { 'content-type': 'application/json', 'mautic-version': '5.1.1' },
        body: JSON.stringify({
          access_token: 'a'.repeat(86),
          expires_in: 3600,
          token_type: 'bearer',
          scope: null,
        }),
      },
    );

    const tokens = await oauthClient().clientCredentials();

    expect(tokens).not.toHaveProperty('mauticVersion');
  });

  it('asks the version with one cheap API read under a valid token, and none under a refused one', async () => {
    const tokens = await oauthClient().clientCredentials();
    sim.clearRequests();

    const version = await oauthClient().mauticVersion(tokens.accessToken);
    sim.revokeTokens();
    const refused = await oauthClient().mauticVersion(tokens.accessToken);

    expect(version).toBe('5.1.1');
    expect(refused).toBeUndefined();
    expect(sim.requests.map((r) => [r.method, r.path, r.status])).toEqual([
      ['GET', '/api/contacts', 200],
      ['GET', '/api/contacts', 401],
    ]);
    // A lookup of contact id 0: nothing is found, nothing is changed.
    expect(sim.requests[0]?.query).toContain('where');
  });

  it.each([
    ['a body that is not JSON', 'not json'],
    ['a JSON array', '[]'],
    ['no access_token', JSON.stringify({ expires_in: 3600, token_type: 'bearer', scope: null })],
    [
      'a token_type other than bearer',
      JSON.stringify({ access_token: 'x', expires_in: 3600, token_type: 'mac' }),
    ],
    ['a missing expires_in', JSON.stringify({ access_token: 'x', token_type: 'bearer' })],
    [
      'a negative expires_in',
      JSON.stringify({ access_token: 'x', expires_in: -5, token_type: 'bearer' }),
    ],
    [
      'a numeric scope',
      JSON.stringify({ access_token: 'x', expires_in: 60, token_type: 'bearer', scope: 3 }),
    ],
    [
      'a numeric refresh_token',
      JSON.stringify({ access_token: 'x', expires_in: 60, token_type: 'bearer', refresh_token: 7 }),
    ],
  ])('rejects a 200 answer with %s as a typed response error', async (_what, body) => {
    sim.inject(
      { path: '/oauth/v2/token' },
      { status: 200, headers: { 'content-type': 'application/json' }, body },
    );

    const error = await thrownBy(() => oauthClient().clientCredentials());

    expect(error).toBeInstanceOf(MauticResponseError);
    expect(error).toMatchObject({ status: 200, path: '/oauth/v2/token' });
  });

  it('refuses empty arguments and a base URL with credentials before any request', () => {
    expect(() => oauthClient().refresh('')).toThrow(TypeError);
    expect(() => oauthClient().exchangeCode('', REDIRECT_URI)).toThrow(TypeError);
    expect(() => oauthClient({ clientSecret: '' })).toThrow(/clientSecret/);
    const withCredentials = () =>
      new MauticOAuthClient({
        baseUrl: 'https://user:hunter22@mautic.example.com',
        clientId: 'a_b',
        clientSecret: 's',
        fetch,
        clock,
      });
    expect(withCredentials).toThrow(/without user name or password/);
    expect(withCredentials).not.toThrow(/hunter22/);
    expect(sentInits).toHaveLength(0);
  });
});
