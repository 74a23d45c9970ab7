import { GetSecretValueCommand, type SecretsManagerClient } from '@aws-sdk/client-secrets-manager';

/**
 * Each source's secret as stored in Secrets Manager, one secret per source named
 * `<prefix><source name>` (the stack creates them, `sources set-secret` writes them). Read one
 * call per source, all at once: the function may read exactly these secrets, and
 * BatchGetSecretValue would need a grant on every secret of the account.
 */
export class SecretsManagerSourceSecrets {
  readonly #client: SecretsManagerClient;
  readonly #prefix: string;

  constructor(client: SecretsManagerClient, prefix: string) {
    this.#client = client;
    this.#prefix = prefix;
  }

  /** The stored text of each source's secret; rejects when one cannot be read. */
  async read(names: ReadonlyArray<string>): Promise<ReadonlyMap<string, string | undefined>> {
    const values = await Promise.all(
      names.map(async (name) => {
        const answer = await this.#client.send(
          new GetSecretValueCommand({ SecretId: `${this.#prefix}${name}` }),
        );
        return [name, answer.SecretString] as const;
      }),
    );
    return new Map(values);
  }
}
