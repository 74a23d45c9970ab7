/**
 * The refresh function's INIT floor (bench/cold-start.ts): a handler that does nothing, but
 * imports and constructs the AWS SDK client functions/refresh/index.ts constructs at INIT, as it
 * does.
 */
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';

const client = new SecretsManagerClient({});

export const handler = async () => client.config.serviceId;
