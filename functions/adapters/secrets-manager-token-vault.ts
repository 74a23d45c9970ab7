import {
  GetSecretValueCommand,
  InvalidParameterException,
  PutSecretValueCommand,
  ResourceNotFoundException,
  type SecretsManagerClient,
  UpdateSecretVersionStageCommand,
} from '@aws-sdk/client-secrets-manager';
import type { TokenVault } from '../core/ports.ts';
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

  async readClient(): Promise<{ client: ClientSecret }> {
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
    return { client: parsed.data };
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

  async readPending(): Promise<{ token: TokenSecret; versionId: string } | undefined> {
    let answer: { SecretString?: string | undefined; VersionId?: string | undefined };
    try {
      answer = await this.#client.send(
        new GetSecretValueCommand({ SecretId: this.#tokenSecretId, VersionStage: 'AWSPENDING' }),
      );
    } catch (error) {
      if (error instanceof ResourceNotFoundException) return undefined;
      throw error;
    }
    const parsed = tokenSecretSchema.safeParse(parseJson(answer.SecretString));
    if (!parsed.success || answer.VersionId === undefined) return undefined;
    return { token: parsed.data, versionId: answer.VersionId };
  }

  /**
   * Puts the tokens as a new version labelled AWSPENDING, then moves AWSCURRENT to it from
   * `basedOn`: Secrets Manager moves the label only if `basedOn` still holds it, which makes the
   * write a compare-and-swap (docs/architecture.md, reliability ideas). AWSPREVIOUS follows automatically.
   */
  async writeToken(
    token: TokenSecret,
    requestToken: string,
    basedOn: string | undefined,
  ): Promise<'written' | 'superseded'> {
    const SecretId = this.#tokenSecretId;
    const SecretString = JSON.stringify(token);
    if (basedOn === undefined) {
      // No version yet (a secret created empty): the first one becomes AWSCURRENT by itself.
      await this.#client.send(
        new PutSecretValueCommand({ SecretId, SecretString, ClientRequestToken: requestToken }),
      );
      return 'written';
    }
    await this.#client.send(
      new PutSecretValueCommand({
        SecretId,
        SecretString,
        ClientRequestToken: requestToken,
        VersionStages: ['AWSPENDING'],
      }),
    );
    try {
      await this.#client.send(
        new UpdateSecretVersionStageCommand({
          SecretId,
          VersionStage: 'AWSCURRENT',
          MoveToVersionId: requestToken,
          RemoveFromVersionId: basedOn,
        }),
      );
      return 'written';
    } catch (error) {
      if (!(error instanceof InvalidParameterException)) throw error;
      // Either a retry of a move that already happened, or another writer got there first.
      const current = await this.#client.send(new GetSecretValueCommand({ SecretId }));
      return current.VersionId === requestToken ? 'written' : 'superseded';
    }
  }
}

function parseJson(text: string | undefined): unknown {
  try {
    return JSON.parse(text ?? '');
  } catch {
    return undefined;
  }
}
