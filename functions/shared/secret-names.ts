/**
 * The Secrets Manager names of an environment's secrets, shared by the stack, the local stack
 * and the operator commands.
 */
import { ConfigError } from '../core/errors.ts';

/**
 * The Secrets Manager names of one environment's secrets, shared by the stack and the operator
 * commands: the Mautic credential, the tokens, the ingest's webhook secrets and API keys, and the
 * prefix of each source's secret (`sourceSecretName`).
 */
export function secretNames(
  environment: string,
): Record<'client' | 'token' | 'webhook' | 'sourcePrefix', string> {
  if (!/^[a-z][a-z0-9-]{0,31}$/.test(environment)) {
    throw new ConfigError(
      'The environment name must be lower-case letters, digits and dashes, starting with a letter',
    );
  }
  const prefix = `MauticRelay/${environment}`;
  return {
    client: `${prefix}/client`,
    token: `${prefix}/token`,
    webhook: `${prefix}/webhook`,
    sourcePrefix: `${prefix}/sources/`,
  };
}

/** The secret of one source (contract §6) of an environment: `MauticRelay/<env>/sources/<name>`. */
export function sourceSecretName(environment: string, source: string): string {
  return `${secretNames(environment).sourcePrefix}${source}`;
}
