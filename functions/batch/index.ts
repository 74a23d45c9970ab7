import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { LambdaClient } from '@aws-sdk/client-lambda';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SQSClient } from '@aws-sdk/client-sqs';
import { LambdaRefreshRequester } from '../adapters/lambda-refresh-requester.ts';
import { loadBatchConfig } from '../shared/config.ts';
import { buildBatchHandler } from './compose.ts';

const config = loadBatchConfig(process.env);

export const handler = buildBatchHandler(config, {
  secrets: new SecretsManagerClient({}),
  sqs: new SQSClient({}),
  dynamodb: new DynamoDBClient({}),
  // One attempt: a throttled invoke means the refresher is busy, and the caller polls instead.
  refresher: new LambdaRefreshRequester(
    new LambdaClient({ maxAttempts: 1 }),
    config.refreshFunctionName,
  ),
  logger: new Logger(),
  metrics: new Metrics(),
});
