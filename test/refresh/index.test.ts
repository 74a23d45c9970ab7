import { afterEach, describe, expect, it, vi } from 'vitest';

afterEach(() => {
  vi.unstubAllEnvs();
  vi.resetModules();
});

describe('refresh function cold start', () => {
  it('builds the handler from a valid environment', async () => {
    vi.stubEnv('CLIENT_SECRET_ID', 'MauticRelay/dev/client');
    vi.stubEnv('TOKEN_SECRET_ID', 'MauticRelay/dev/token');
    vi.stubEnv('AWS_REGION', 'eu-west-1');

    const { handler } = await import('../../functions/refresh/index.ts');

    expect(typeof handler).toBe('function');
  });

  it('fails naming the variable', async () => {
    vi.stubEnv('CLIENT_SECRET_ID', 'MauticRelay/dev/client');
    vi.stubEnv('TOKEN_SECRET_ID', undefined);
    vi.stubEnv('REFRESH_AHEAD_SECONDS', '5');

    await expect(import('../../functions/refresh/index.ts')).rejects.toThrow(
      /TOKEN_SECRET_ID is required; REFRESH_AHEAD_SECONDS must be at least 60/,
    );
  });
});
