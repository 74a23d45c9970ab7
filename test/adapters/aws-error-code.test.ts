import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { describe, expect, it } from 'vitest';
import { awsErrorCode } from '../../functions/adapters/aws-error-code.ts';

describe('awsErrorCode', () => {
  it('names the service code, the network code, or nothing, never the message', () => {
    const service = new ConditionalCheckFailedException({ message: 'secret body', $metadata: {} });
    const network = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), {
      code: 'ECONNREFUSED',
    });

    expect(awsErrorCode(service)).toBe('ConditionalCheckFailedException');
    expect(awsErrorCode({ Code: 'InternalError' })).toBe('InternalError');
    expect(awsErrorCode(network)).toBe('ECONNREFUSED');
    expect(awsErrorCode(new Error('plain'))).toBeUndefined();
    expect(awsErrorCode('text')).toBeUndefined();
  });
});
