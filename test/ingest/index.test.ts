import { afterEach, describe, expect, it, vi } from 'vitest';

afterEach(() => {
  vi.unstubAllEnvs();
  vi.resetModules();
});

describe('ingest function cold start', () => {
  it('builds the handler from secrets in the environment', async () => {
    vi.stubEnv('EVENTS_QUEUE_URL', 'https://sqs.eu-west-1.amazonaws.com/123456789012/events');
    vi.stubEnv(
      'WEBHOOK_SECRET',
      'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw, whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYX',
    );
    vi.stubEnv('AWS_REGION', 'eu-west-1');

    const { handler } = await import('../../functions/ingest/index.ts');

    expect(typeof handler).toBe('function');
  });

  it('stops at cold start on a bad webhook secret, naming it by position only', async () => {
    vi.stubEnv('EVENTS_QUEUE_URL', 'https://sqs.eu-west-1.amazonaws.com/123456789012/events');
    vi.stubEnv('WEBHOOK_SECRET', 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw,whsec_c2hvcnQ=');

    await expect(import('../../functions/ingest/index.ts')).rejects.toThrow(
      /webhook secret #2 must encode 24 to 64 bytes/,
    );
  });

  it('stops at cold start when no credential is configured', async () => {
    vi.stubEnv('EVENTS_QUEUE_URL', 'https://sqs.eu-west-1.amazonaws.com/123456789012/events');
    vi.stubEnv('WEBHOOK_SECRET', undefined);
    vi.stubEnv('INGEST_API_KEYS', undefined);
    vi.stubEnv('WEBHOOK_SECRET_ID', undefined);

    await expect(import('../../functions/ingest/index.ts')).rejects.toThrow(
      /WEBHOOK_SECRET_ID or WEBHOOK_SECRET or INGEST_API_KEYS is required/,
    );
  });
});
