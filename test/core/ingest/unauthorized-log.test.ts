/**
 * A 401 of POST /events in the operator's log: one warning that says which check refused (no
 * credential, a stale timestamp, a bad signature, an unknown key…), with the request id, and never
 * a credential's value, the sender's or the relay's. The sender's answer is the same whatever
 * failed (contract §1).
 */
import { describe, expect, it } from 'vitest';
import { acceptEvents } from '../../../functions/core/ingest/ingest.ts';
import { parseCredentials } from '../../../functions/core/ingest/webhook-auth.ts';
import {
  API_KEY,
  contact,
  INGEST_LIMITS,
  NOW,
  NOW_SECONDS,
  OTHER_SECRET,
  recordingQueue,
  signedHeaders,
  WEBHOOK_SECRET,
} from '../../support/ingest.ts';
import { recorder } from '../../support/observe.ts';

const BODY = JSON.stringify(contact(1));
const WRONG_KEY = 'a-key-the-relay-never-issued-0123';

async function post(headers: Record<string, string>) {
  const log = recorder();
  const response = await acceptEvents(
    {
      body: new TextEncoder().encode(BODY),
      headers: { 'content-type': 'application/json', ...headers },
      requestId: 'request-7',
    },
    {
      credentials: async () =>
        parseCredentials({ webhookSecrets: [WEBHOOK_SECRET], apiKeys: [API_KEY] }),
      queue: recordingQueue(),
      clock: { now: () => NOW },
      newId: () => 'id',
      limits: INGEST_LIMITS,
      logger: log.logger,
    },
  );
  return { response, log };
}

describe('the 401 log line', () => {
  it.each([
    ['no credential at all', {}, /^no credential: neither the webhook-id/],
    [
      'a timestamp 10 minutes old',
      signedHeaders(BODY, { timestamp: NOW_SECONDS - 600 }),
      /^webhook-timestamp -600 s from the ingest's clock \(at most ±300 s\)$/,
    ],
    [
      'a signature by a secret the relay does not have',
      signedHeaders(BODY, { secret: OTHER_SECRET }),
      /^bad signature: no webhook secret of the relay signed/,
    ],
    [
      'a signed request missing its signature header',
      { 'webhook-id': 'msg_1', 'webhook-timestamp': String(NOW_SECONDS) },
      /^webhook headers incomplete/,
    ],
    [
      'a malformed signature header',
      { ...signedHeaders(BODY), 'webhook-signature': 'v1;abc' },
      /^webhook-signature malformed/,
    ],
    ['an unknown API key', { authorization: `Bearer ${WRONG_KEY}` }, /^unknown API key/],
    ['a Basic authorization', { authorization: `Basic ${WRONG_KEY}` }, /^Authorization is not/],
    [
      'a bad signature and an unknown key',
      { ...signedHeaders(BODY, { secret: OTHER_SECRET }), authorization: `Bearer ${WRONG_KEY}` },
      /^bad signature: .*; unknown API key/,
    ],
  ])('names the check that refused: %s', async (_, headers, check) => {
    const { response, log } = await post(headers as Record<string, string>);

    expect(response).toEqual({
      status: 401,
      body: { error: { code: 'unauthorized', message: 'Authentication failed.' } },
    });
    const [line, ...more] = log.events('unauthorized');
    expect(more).toEqual([]);
    expect(line?.level).toBe('warn');
    expect(line?.fields.requestId).toBe('request-7');
    expect(String(line?.fields.check)).toMatch(check);
    // Never a credential: the sender's key or signature, nor the relay's secrets.
    const text = log.text();
    for (const value of [WRONG_KEY, API_KEY, WEBHOOK_SECRET, OTHER_SECRET])
      expect(text).not.toContain(value);
    const signature = (headers as Record<string, string>)['webhook-signature'];
    if (signature) expect(text).not.toContain(signature.slice(3));
  });

  it('logs nothing of the kind for a request it lets in', async () => {
    const { response, log } = await post(signedHeaders(BODY));
    expect(response.status).toBe(202);
    expect(log.events('unauthorized')).toEqual([]);
  });
});
