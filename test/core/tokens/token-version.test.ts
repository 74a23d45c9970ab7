import { describe, expect, it } from 'vitest';
import type { TokenGranter } from '../../../functions/core/ports.ts';
import type { ClientSecret, TokenSecret } from '../../../functions/core/token-secret.ts';
import {
  currentMauticVersion,
  withMauticVersion,
} from '../../../functions/core/tokens/token-version.ts';

const NOW = Date.parse('2026-12-01T00:00:00Z');
const client: ClientSecret = {
  baseUrl: 'https://mautic.example.com',
  clientId: '1_x',
  clientSecret: 'secret',
  grantType: 'client_credentials',
};
const token = (secondsLeft: number): TokenSecret => ({
  accessToken: 'valid-token',
  accessTokenExpiresAt: new Date(NOW + secondsLeft * 1000).toISOString(),
  obtainedWith: 'client_credentials',
  updatedAt: new Date(NOW - 3_000_000).toISOString(),
  mauticVersion: '5.1.1',
});

/** A granter whose version read answers `answer` (or throws it), counting reads and timeouts. */
function granting(answer: string | undefined | Error) {
  const reads: Array<{ token: string; timeoutMs: number }> = [];
  const granterFor = (_client: ClientSecret, timeoutMs: number): TokenGranter => ({
    clientCredentials: () => Promise.reject(new Error('not called')),
    refresh: () => Promise.reject(new Error('not called')),
    mauticVersion: async (accessToken) => {
      reads.push({ token: accessToken, timeoutMs });
      if (answer instanceof Error) throw answer;
      return answer;
    },
  });
  return { granterFor, reads };
}

describe("Mautic's version for status, asked before a refresher run's token call", () => {
  it('is what an API answer to the still valid stored token names, read with a short timeout', async () => {
    const { granterFor, reads } = granting('7.0.0');

    expect(await currentMauticVersion(token(900), client, NOW, { granterFor })).toBe('7.0.0');
    expect(reads).toEqual([{ token: 'valid-token', timeoutMs: 3_000 }]);
  });

  it('keeps the stored version when the answer names none or the read fails', async () => {
    for (const answer of [undefined, new Error('ECONNRESET')]) {
      const { granterFor } = granting(answer);
      expect(await currentMauticVersion(token(900), client, NOW, { granterFor })).toBe('5.1.1');
    }
  });

  it('asks nothing without a token that still works, nor when the run needs its time', async () => {
    const { granterFor, reads } = granting('7.0.0');

    expect(await currentMauticVersion(undefined, client, NOW, { granterFor })).toBeUndefined();
    expect(await currentMauticVersion(token(2), client, NOW, { granterFor })).toBe('5.1.1');
    const short = { granterFor, remainingMs: () => 15_000 };
    expect(await currentMauticVersion(token(900), client, NOW, short)).toBe('5.1.1');
    expect(reads).toEqual([]);
    const bare = (): TokenGranter => ({
      clientCredentials: () => Promise.reject(new Error('not called')),
      refresh: () => Promise.reject(new Error('not called')),
    });
    expect(await currentMauticVersion(token(900), client, NOW, { granterFor: bare })).toBe('5.1.1');
  });
});

describe("Mautic's version after the token call", () => {
  const granted = (grant: string) => ({ grant, tokens: { accessToken: 'new-token' } });

  it('asks under the new token after a client_credentials grant when it is still unknown', async () => {
    const { granterFor, reads } = granting('6.0.0');

    const result = await withMauticVersion(granted('client_credentials'), undefined, client, {
      granterFor,
    });

    expect(result).toEqual({ ...granted('client_credentials'), mauticVersion: '6.0.0' });
    expect(reads).toEqual([{ token: 'new-token', timeoutMs: 3_000 }]);
  });

  it('never holds up a rotated refresh token, nor asks again what is known', async () => {
    const { granterFor, reads } = granting('6.0.0');

    const rotated = await withMauticVersion(granted('refresh_token'), undefined, client, {
      granterFor,
    });
    const known = await withMauticVersion(granted('client_credentials'), '5.1.1', client, {
      granterFor,
    });

    expect(rotated.mauticVersion).toBeUndefined();
    expect(known.mauticVersion).toBe('5.1.1');
    expect(reads).toEqual([]);
  });
});
