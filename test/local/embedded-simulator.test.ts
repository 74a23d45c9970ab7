import { describe, expect, it } from 'vitest';
import { loadLocalConfig } from '../../infra/local/local-config.ts';
import { startMautic } from '../../infra/local/local-edges.ts';

/** What `npm start` embeds when MAUTIC_BASE_URL is unset: the Mautic line it plays. */
async function embeddedVersion(env: Record<string, string>): Promise<string | null> {
  const stops: Array<() => Promise<void>> = [];
  try {
    const { credential, simulated } = await startMautic(loadLocalConfig(env), stops);
    expect(simulated).toBe(true);
    const granted = await fetch(`${credential.baseUrl}/oauth/v2/token`, {
      method: 'POST',
      body: new URLSearchParams({
        grant_type: 'client_credentials',
        client_id: credential.clientId,
        client_secret: credential.clientSecret,
      }),
    });
    const { access_token: token } = (await granted.json()) as { access_token: string };
    const answer = await fetch(`${credential.baseUrl}/api/contacts`, {
      headers: { authorization: `Bearer ${token}` },
    });
    return answer.headers.get('mautic-version');
  } finally {
    for (const stop of stops.reverse()) await stop();
  }
}

describe("npm start's embedded simulator (MAUTIC_SIMULATOR_VERSION)", () => {
  it('plays Mautic 5.1 by default and the line the setting names', async () => {
    expect(await embeddedVersion({})).toBe('5.1.1');
    expect(await embeddedVersion({ MAUTIC_SIMULATOR_VERSION: '7' })).toBe('7.0.0');
  });

  it('refuses a line it does not know, and the setting beside MAUTIC_BASE_URL', () => {
    expect(() => loadLocalConfig({ MAUTIC_SIMULATOR_VERSION: '8' })).toThrow(
      /MAUTIC_SIMULATOR_VERSION must be one of 5\.1, 5\.2, 6, 7/,
    );
    expect(() =>
      loadLocalConfig({
        MAUTIC_BASE_URL: 'https://mautic.example.com',
        MAUTIC_CLIENT_ID: '1_a',
        MAUTIC_CLIENT_SECRET: 'b',
        MAUTIC_SIMULATOR_VERSION: '7',
      }),
    ).toThrow(/MAUTIC_SIMULATOR_VERSION sets the embedded simulator/);
  });
});
