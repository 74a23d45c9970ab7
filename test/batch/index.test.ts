import { afterEach, describe, expect, it, vi } from 'vitest';

const env = {
  MAUTIC_BASE_URL: 'https://mautic.example.com',
  TOKEN_SECRET_ID: 'relay/dev/token',
  EVENTS_QUEUE_URL: 'https://sqs.eu-west-1.amazonaws.com/123456789012/events',
  DEAD_LETTER_QUEUE_URL: 'https://sqs.eu-west-1.amazonaws.com/123456789012/dlq',
  REFRESH_FUNCTION_NAME: 'relay-dev-refresh',
  DEDUP_TABLE_NAME: 'relay-dev-dedup',
  AWS_REGION: 'eu-west-1',
};

afterEach(() => {
  vi.unstubAllEnvs();
  vi.resetModules();
});

describe('batch function cold start', () => {
  it('builds the handler from a valid environment', async () => {
    for (const [name, value] of Object.entries(env)) vi.stubEnv(name, value);

    const { handler } = await import('../../functions/batch/index.ts');

    expect(typeof handler).toBe('function');
  });

  it('fails at cold start naming the missing variable', async () => {
    for (const [name, value] of Object.entries(env)) vi.stubEnv(name, value);
    vi.stubEnv('DEAD_LETTER_QUEUE_URL', undefined);

    await expect(import('../../functions/batch/index.ts')).rejects.toThrow(
      /DEAD_LETTER_QUEUE_URL is required/,
    );
  });
});
