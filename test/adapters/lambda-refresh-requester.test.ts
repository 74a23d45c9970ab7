import { InvokeCommand, LambdaClient } from '@aws-sdk/client-lambda';
import { mockClient } from 'aws-sdk-client-mock';
import { afterEach, describe, expect, it } from 'vitest';
import { LambdaRefreshRequester } from '../../functions/adapters/lambda-refresh-requester.ts';

const lambda = mockClient(LambdaClient);

afterEach(() => {
  lambda.reset();
});

describe('LambdaRefreshRequester', () => {
  it('invokes the refresher asynchronously with a forced run and the reason', async () => {
    lambda.on(InvokeCommand).resolves({ StatusCode: 202 });

    await new LambdaRefreshRequester(
      new LambdaClient({ region: 'eu-west-1' }),
      'relay-dev-refresh',
    ).requestRefresh('mautic_token_expired');

    const input = lambda.commandCalls(InvokeCommand)[0]?.args[0].input;
    expect(input?.FunctionName).toBe('relay-dev-refresh');
    expect(input?.InvocationType).toBe('Event');
    expect(JSON.parse(new TextDecoder().decode(input?.Payload as Uint8Array))).toEqual({
      force: true,
      reason: 'mautic_token_expired',
    });
  });

  it('lets a failed invoke reach the caller', async () => {
    lambda.on(InvokeCommand).rejects(new Error('TooManyRequestsException'));

    await expect(
      new LambdaRefreshRequester(new LambdaClient({ region: 'eu-west-1' }), 'f').requestRefresh(
        'x',
      ),
    ).rejects.toThrow('TooManyRequestsException');
  });
});
