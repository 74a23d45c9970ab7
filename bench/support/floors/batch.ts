/**
 * The batch function's INIT floor (bench/cold-start.ts): a handler that does nothing, but imports
 * and constructs the AWS SDK clients functions/batch/index.ts constructs at INIT, as it does.
 */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { LambdaClient } from '@aws-sdk/client-lambda';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SQSClient } from '@aws-sdk/client-sqs';

const clients = [
  new SecretsManagerClient({}),
  new SQSClient({}),
  new DynamoDBClient({}),
  new LambdaClient({ maxAttempts: 1 }),
];

export const handler = async () => clients.length;
