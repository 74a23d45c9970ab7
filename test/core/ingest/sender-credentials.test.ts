import { describe, expect, it } from 'vitest';
import { CredentialError } from '../../../functions/core/errors.ts';
import {
  credentialLists,
  readSenderCredentials,
  writeSenderCredentials,
} from '../../../functions/core/ingest/sender-credentials.ts';
import { expectNoSecrets, thrownBy } from '../../support/secrets.ts';

const SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
const KEY = 'ingest-api-key-0123456789';
const GENERATED = 'abcdefghijklmnopqrstuvwxyz012345';

describe('sender credentials', () => {
  it('reads the first format with positional ids and no creation times, generated secret first', () => {
    const senders = readSenderCredentials(
      JSON.stringify({ generatedSecret: GENERATED, webhookSecrets: [SECRET], apiKeys: [KEY] }),
    );
    expect(senders).toEqual([
      { id: 'generated', kind: 'webhook_secret', value: `whsec_${GENERATED}`, createdAt: null },
      { id: 'webhook-secret-1', kind: 'webhook_secret', value: SECRET, createdAt: null },
      { id: 'api-key-1', kind: 'api_key', value: KEY, createdAt: null },
    ]);
    expect(credentialLists(senders)).toEqual({
      webhookSecrets: [
        { id: 'generated', value: `whsec_${GENERATED}` },
        { id: 'webhook-secret-1', value: SECRET },
      ],
      apiKeys: [{ id: 'api-key-1', value: KEY }],
    });
  });

  it('writes the senders format, keeping the ids and the generated secret where the stack put it', () => {
    const before = readSenderCredentials(
      JSON.stringify({ generatedSecret: GENERATED, webhookSecrets: [SECRET], apiKeys: [KEY] }),
    );
    const added = {
      id: 'snd_1',
      kind: 'api_key' as const,
      value: 'another-api-key-0123456789',
      createdAt: '2026-11-24T00:00:00.000Z',
    };
    const written = writeSenderCredentials([...before, added]);
    expect(JSON.parse(written)).toEqual({
      generatedSecret: GENERATED,
      senders: [
        { id: 'webhook-secret-1', kind: 'webhook_secret', secret: SECRET, createdAt: null },
        { id: 'api-key-1', kind: 'api_key', secret: KEY, createdAt: null },
        { id: 'snd_1', kind: 'api_key', secret: added.value, createdAt: added.createdAt },
      ],
    });
    expect(readSenderCredentials(written)).toEqual([...before, added]);
  });

  it('drops generatedSecret once the generated sender is removed', () => {
    const senders = readSenderCredentials(
      JSON.stringify({ generatedSecret: GENERATED, apiKeys: [KEY] }),
    );
    const written = JSON.parse(writeSenderCredentials(senders.slice(1)));
    expect(written).toEqual({
      senders: [{ id: 'api-key-1', kind: 'api_key', secret: KEY, createdAt: null }],
    });
  });

  it.each([
    ['not JSON', `{"webhookSecrets":["${SECRET}"`],
    ['a list', JSON.stringify([SECRET])],
    ['webhookSecrets not strings', JSON.stringify({ webhookSecrets: [1], apiKeys: [KEY] })],
    ['generatedSecret not a string', JSON.stringify({ generatedSecret: 5 })],
    ['senders not a list', JSON.stringify({ senders: { id: 'x' } })],
    ['a sender without id', JSON.stringify({ senders: [{ kind: 'api_key', secret: KEY }] })],
    [
      'a sender of an unknown kind',
      JSON.stringify({ senders: [{ id: 'a', kind: 'password', secret: KEY }] }),
    ],
    ['a sender without secret', JSON.stringify({ senders: [{ id: 'a', kind: 'api_key' }] })],
    [
      'a bad createdAt',
      JSON.stringify({ senders: [{ id: 'a', kind: 'api_key', secret: KEY, createdAt: 1 }] }),
    ],
    [
      'two senders with one id',
      JSON.stringify({
        apiKeys: [KEY],
        senders: [{ id: 'api-key-1', kind: 'webhook_secret', secret: SECRET }],
      }),
    ],
    ['a sender that is not an object', JSON.stringify({ senders: [SECRET] })],
  ])('refuses %s without quoting a value', async (_, text) => {
    const error = await thrownBy(async () => readSenderCredentials(text));
    expect(error).toBeInstanceOf(CredentialError);
    expectNoSecrets(String(error), [SECRET, KEY, GENERATED]);
  });
});
