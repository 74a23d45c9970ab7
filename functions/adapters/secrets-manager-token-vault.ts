import {
  GetSecretValueCommand,
  PutSecretValueCommand,
  ResourceNotFoundException,
  type SecretsManagerClient,
} from '@aws-sdk/client-secrets-manager';
import type { TokenVault } from '../core/token-refresh.ts';
import {
  type ClientSecret,
  clientSecretSchema,
  type TokenSecret,
  tokenSecretSchema,
} from '../core/token-secret.ts';

/** The refresher's view of one environment's client secret and token secret in Secrets Manager. */
export class SecretsManagerTokenVault implements TokenVault {
  readonly #client: SecretsManagerClient;
  readonly #clientSecretId: string;
  readonly #tokenSecretId: string;

  constructor(
    client: SecretsManagerClient,
    ids: { clientSecretId: string; tokenSecretId: string },
  ) {
    this.#client = client;
    this.#clientSecretId = ids.clientSecretId;
    this.#tokenSecretId = ids.tokenSecretId;
  }

  async readClient(): Promise<{ client: ClientSecret; versionId: string }> {
    const answer = await this.#client.send(
      new GetSecretValueCommand({ SecretId: this.#clientSecretId }),
    );
    const parsed = clientSecretSchema.safeParse(parseJson(answer.SecretString));
    if (!parsed.success) {
      // Paths only: the issues must not quote the secret.
      const fields = parsed.error.issues
        .map((issue) => issue.path.join('.') || '(secret)')
        .join(', ');
      throw new Error(
        `The Mautic client secret is not valid (${fields}): run "npx mautic-relay credentials"`,
      );
    }
    return { client: parsed.data, versionId: answer.VersionId ?? '' };
  }

  async readToken(): Promise<{ token: TokenSecret | undefined; versionId: string | undefined }> {
    let answer: { SecretString?: string | undefined; VersionId?: string | undefined };
    try {
      answer = await this.#client.send(
        new GetSecretValueCommand({ SecretId: this.#tokenSecretId }),
      );
    } catch (error) {
      // A secret created without a value (as the stack does) has no tokens yet.
      if (error instanceof ResourceNotFoundException)
        return { token: undefined, versionId: undefined };
      throw error;
    }
    const parsed = tokenSecretSchema.safeParse(parseJson(answer.SecretString));
    // Anything else in the token secret (e.g. the stack's placeholder) means no tokens yet.
    return { token: parsed.success ? parsed.data : undefined, versionId: answer.VersionId };
  }

  async writeToken(token: TokenSecret, requestToken: string): Promise<void> {
    await this.#client.send(
      new PutSecretValueCommand({
        SecretId: this.#tokenSecretId,
        SecretString: JSON.stringify(token),
        ClientRequestToken: requestToken,
      }),
    );
  }
}

function parseJson(text: string | undefined): unknown {
  try {
    return JSON.parse(text ?? '');
  } catch {
    return undefined;
  }
}
