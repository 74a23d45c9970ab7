import { App, Stack } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { describe, expect, it } from 'vitest';
import { environmentBytesBound } from '../../infra/aws/environment-size.ts';

/** A function whose environment names a queue, a table, a secret and another function. */
function functionWith(region?: string) {
  const stack = new Stack(new App(), 'MauticRelay-production-eu', {
    ...(region === undefined ? {} : { env: { region, account: '123456789012' } }),
  });
  const queue = new sqs.Queue(stack, 'EventsQueue', { fifo: true });
  const table = new dynamodb.Table(stack, 'DedupTable', {
    partitionKey: { name: 'id', type: dynamodb.AttributeType.STRING },
  });
  const secret = new secretsmanager.Secret(stack, 'TokenSecret', {
    secretName: 'MauticRelay/production-eu/token',
  });
  const code = lambda.Code.fromInline('exports.handler = async () => {}');
  const other = new lambda.Function(stack, 'Refresh', {
    runtime: lambda.Runtime.NODEJS_24_X,
    handler: 'index.handler',
    code,
  });
  const fn = new lambda.Function(stack, 'Batch', {
    runtime: lambda.Runtime.NODEJS_24_X,
    handler: 'index.handler',
    code,
    environment: {
      QUEUE: queue.queueUrl,
      TABLE: table.tableName,
      SECRET: secret.secretArn,
      FUNCTION: other.functionName,
      PLAIN: 'https://mautic.example.com',
      QUOTED: '{"sources":{"a\\b":1}}',
    },
  });
  return environmentBytesBound(fn.node.defaultChild as lambda.CfnFunction);
}

const bytesOf = (bound: ReturnType<typeof environmentBytesBound>, name: string) =>
  bound.variables.find((variable) => variable.name === name)?.bytes;

describe('the bound on a function’s environment once deployed', () => {
  it('counts a plain value as it is, and each deploy-time value at the longest AWS documents', () => {
    const bound = functionWith();
    // The longest of each, by the formats AWS documents.
    const longestQueueUrl = `https://sqs.us-isof-south-1.amazonaws.com.cn/123456789012/${'q'.repeat(80)}`;
    const longestSecretArn =
      'arn:aws-us-gov:secretsmanager:us-isof-south-1:123456789012:secret:MauticRelay/production-eu/token-AbCdEf';
    const generatedTableName = `MauticRelay-production-eu-DedupTable${'X'.repeat(8)}-${'R'.repeat(13)}`;

    expect(bytesOf(bound, 'PLAIN')).toBe('https://mautic.example.com'.length);
    // Lambda measures the variables as JSON: each quote and backslash takes two bytes there.
    expect(bytesOf(bound, 'QUOTED')).toBe('{\\"sources\\":{\\"a\\\\b\\":1}}'.length);
    expect(bytesOf(bound, 'QUEUE')).toBe(longestQueueUrl.length);
    expect(bytesOf(bound, 'SECRET')).toBe(longestSecretArn.length);
    expect(bytesOf(bound, 'TABLE')).toBeGreaterThanOrEqual(generatedTableName.length);
    const generatedFunctionName = `MauticRelay-production-eu-Refresh${'X'.repeat(8)}-${'R'.repeat(13)}`;
    expect(bytesOf(bound, 'FUNCTION')).toBe(generatedFunctionName.length);
    // The whole map as Lambda measures it, each deploy-time value at its longest.
    const longest: Record<string, string> = {
      QUEUE: longestQueueUrl,
      SECRET: longestSecretArn,
      TABLE: 'T'.repeat(bytesOf(bound, 'TABLE') as number),
      FUNCTION: 'F'.repeat(bytesOf(bound, 'FUNCTION') as number),
      PLAIN: 'https://mautic.example.com',
      QUOTED: '{"sources":{"a\\b":1}}',
    };
    expect(bound.total).toBe(Buffer.byteLength(JSON.stringify(longest)));
    expect(bound.variables.map((v) => v.bytes)).toEqual(
      [...bound.variables.map((v) => v.bytes)].sort((a, b) => b - a),
    );
  });

  it('uses the region’s own length when the stack is bound to one', () => {
    expect(bytesOf(functionWith('eu-west-1'), 'QUEUE')).toBe(
      `https://sqs.eu-west-1.amazonaws.com.cn/123456789012/${'q'.repeat(80)}`.length,
    );
  });
});
