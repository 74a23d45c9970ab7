/**
 * The ingest function's INIT floor (bench/cold-start.ts): a handler that does nothing, but imports
 * and constructs the AWS SDK clients functions/ingest/index.ts constructs at INIT, as it does.
 */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SQSClient } from '@aws-sdk/client-sqs';

const clients = [new SQSClient({}), new SecretsManagerClient({}), new DynamoDBClient({})];

export const handler = async () => clients.length;
