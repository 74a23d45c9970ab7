import { GetSecretValueCommand, type SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import type { StoredSourceSecret } from '../core/ports.ts';

/** How long one read of a source's secret may take; one that takes longer counts as unread. */
const READ_TIMEOUT_MS = 3_000;

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

  /** Each source's stored text, or why it could not be read: one failing leaves the others. */
  async read(names: ReadonlyArray<string>): Promise<ReadonlyMap<string, StoredSourceSecret>> {
    const answers = await Promise.allSettled(
      names.map((name) =>
        this.#client.send(new GetSecretValueCommand({ SecretId: `${this.#prefix}${name}` }), {
          // Bounded: the read runs before a request, which must not wait on a slow store.
          abortSignal: AbortSignal.timeout(READ_TIMEOUT_MS),
        }),
      ),
    );
    return new Map(
      answers.map((answer, index) => [
        names[index] as string,
        answer.status === 'fulfilled'
          ? { text: answer.value.SecretString }
          : { unreadable: answer.reason },
      ]),
    );
  }
}
