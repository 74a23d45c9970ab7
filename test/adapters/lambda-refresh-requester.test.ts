import { InvokeCommand, LambdaClient, TooManyRequestsException } from '@aws-sdk/client-lambda';
import { mockClient } from 'aws-sdk-client-mock';
import { afterEach, describe, expect, it } from 'vitest';
import { LambdaRefreshRequester } from '../../functions/adapters/lambda-refresh-requester.ts';

const lambda = mockClient(LambdaClient);
const requester = () =>
  new LambdaRefreshRequester(
    new LambdaClient({ region: 'eu-west-1', maxAttempts: 1 }),
    'relay-dev-refresh',
  );
// What the SDK hands back: the bytes, with its string helper.
const encode = (value: unknown) =>
  Object.assign(new TextEncoder().encode(JSON.stringify(value)), {
    transformToString: () => JSON.stringify(value),
  });
const stored = {
  updatedAt: '2026-11-21T00:00:00.000Z',
  accessTokenExpiresAt: '2026-11-21T01:00:00.000Z',
};

afterEach(() => {
  lambda.reset();
});

describe('LambdaRefreshRequester', () => {
  it('runs the refresher synchronously with a forced run, the reason and the stale tokens, and reports its answer', async () => {
    lambda.on(InvokeCommand).resolves({
      StatusCode: 200,
      Payload: encode({ action: 'refreshed', grant: 'refresh_token', stored }),
    });

    const answer = await requester().refreshNow(
      { reason: 'token_expired', staleUpdatedAt: '2026-11-20T23:00:00.000Z' },
      5_000,
    );

    const input = lambda.commandCalls(InvokeCommand)[0]?.args[0].input;
    expect(input?.FunctionName).toBe('relay-dev-refresh');
    expect(input?.InvocationType).toBe('RequestResponse');
    expect(JSON.parse(new TextDecoder().decode(input?.Payload as Uint8Array))).toEqual({
      force: true,
      reason: 'token_expired',
      staleUpdatedAt: '2026-11-20T23:00:00.000Z',
    });
    expect(answer).toEqual({ kind: 'answered', action: 'refreshed', stored });
  });

  it('reports a throttled invoke (another run holds the refresher) as busy', async () => {
    lambda
      .on(InvokeCommand)
      .rejects(new TooManyRequestsException({ message: 'Rate Exceeded.', $metadata: {} }));

    await expect(
      requester().refreshNow({ reason: 'token_missing', staleUpdatedAt: null }, 5_000),
    ).resolves.toEqual({ kind: 'busy' });
  });

  it('passes on a failed answer with its reason', async () => {
    lambda
      .on(InvokeCommand)
      .resolves({ StatusCode: 200, Payload: encode({ action: 'failed', why: 'needs_authorize' }) });

    await expect(
      requester().refreshNow({ reason: 'token_refused', staleUpdatedAt: null }, 5_000),
    ).resolves.toEqual({ kind: 'answered', action: 'failed', why: 'needs_authorize' });
  });

  it('fails on a function error or an answer it cannot read, without quoting the payload', async () => {
    lambda
      .on(InvokeCommand)
      .resolvesOnce({
        StatusCode: 200,
        FunctionError: 'Unhandled',
        Payload: encode({ errorMessage: 'secret-looking-text' }),
      })
      .resolves({ StatusCode: 200, Payload: encode({ something: 'else' }) });

    const first = requester().refreshNow({ reason: 'x', staleUpdatedAt: null }, 5_000);
    await expect(first).rejects.toThrow('The token refresher failed (Unhandled): see its log');
    await expect(first).rejects.not.toThrow(/secret-looking-text/);
    await expect(
      requester().refreshNow({ reason: 'x', staleUpdatedAt: null }, 5_000),
    ).rejects.toThrow('The token refresher answered something unexpected');
  });

  it('lets other invoke failures reach the caller', async () => {
    lambda.on(InvokeCommand).rejects(new Error('connect ECONNREFUSED'));

    await expect(
      requester().refreshNow({ reason: 'x', staleUpdatedAt: null }, 5_000),
    ).rejects.toThrow('ECONNREFUSED');
  });
});
