import { Logger } from '@aws-lambda-powertools/logger';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SQSClient } from '@aws-sdk/client-sqs';
import { loadIngestConfig } from '../shared/config.ts';
import { buildIngestHandler } from './compose.ts';

export const handler = await buildIngestHandler(loadIngestConfig(process.env), {
  sqs: new SQSClient({}),
  secrets: new SecretsManagerClient({}),
  dynamodb: new DynamoDBClient({}),
  logger: new Logger(),
});
