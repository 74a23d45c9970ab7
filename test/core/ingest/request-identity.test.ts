import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { requestIdentity } from '../../../functions/core/ingest/request-identity.ts';
import { parseApiKey } from '../../../functions/core/ingest/webhook-auth.ts';

const body = new TextEncoder().encode('{"entity":"contacts"}');
const API_KEY = 'relay-test-api-key-0123456789';

describe('requestIdentity', () => {
  it('names a signed request by its webhook-id alone, whichever secret signed it', () => {
    const identity = requestIdentity({ kind: 'webhook', webhookId: 'msg_1' }, 'ignored', body);

    expect(identity).toEqual({
      key: 'webhook:msg_1',
      bodyHash: createHash('sha256').update(body).digest('base64'),
    });
  });

  it('names an API-key request by a digest of the key and its Idempotency-Key, never the key itself', () => {
    const keyDigest = parseApiKey(API_KEY);
    const identity = requestIdentity({ kind: 'api-key', keyDigest }, 'order-1', body);
    const other = requestIdentity(
      { kind: 'api-key', keyDigest: parseApiKey('another-api-key-0123456789') },
      'order-1',
      body,
    );

    expect(identity?.key).toBe(`api-key:${keyDigest.toString('hex')}:order-1`);
    expect(identity?.key).not.toContain(API_KEY);
    expect(other?.key).not.toBe(identity?.key);
  });

  it('gives an API-key request without an Idempotency-Key (or an empty one) no identity', () => {
    const sender = { kind: 'api-key', keyDigest: parseApiKey(API_KEY) } as const;

    expect(requestIdentity(sender, undefined, body)).toBeUndefined();
    expect(requestIdentity(sender, '  ', body)).toBeUndefined();
  });

  it('keeps signed ids and API-key ids apart, and tells bodies apart by their hash', () => {
    const signed = requestIdentity({ kind: 'webhook', webhookId: 'x' }, undefined, body);
    const keyed = requestIdentity({ kind: 'api-key', keyDigest: parseApiKey(API_KEY) }, 'x', body);
    const otherBody = requestIdentity(
      { kind: 'webhook', webhookId: 'x' },
      undefined,
      new TextEncoder().encode('{"entity":"contacts"} '),
    );

    expect(keyed?.key).not.toBe(signed?.key);
    expect(otherBody?.key).toBe(signed?.key);
    expect(otherBody?.bodyHash).not.toBe(signed?.bodyHash);
  });
});
