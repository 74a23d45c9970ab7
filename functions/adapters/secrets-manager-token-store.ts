import { GetSecretValueCommand, type SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { TokenUnavailableError } from '../core/errors.ts';
import type { Clock, TokenSource } from '../core/ports.ts';
import { type TokenSecret, tokenSecretSchema } from '../core/token-secret.ts';

/**
 * Reads Mautic's access token from the token secret, cached for `cacheMs` so the secret is not
 * read on every invocation. It only reads: the refresher is the single writer.
 */
export class SecretsManagerTokenStore implements TokenSource {
  readonly #client: SecretsManagerClient;
  readonly #secretId: string;
  readonly #cacheMs: number;
  readonly #clock: Clock;
  #cached: { secret: TokenSecret; readAt: number } | undefined;

  constructor(
    client: SecretsManagerClient,
    secretId: string,
    options: { cacheMs: number; clock: Clock },
  ) {
    this.#client = client;
    this.#secretId = secretId;
    this.#cacheMs = options.cacheMs;
    this.#clock = options.clock;
  }

  async accessToken(options?: { fresh?: boolean }): Promise<string> {
    const now = this.#clock.now();
    const cached = this.#cached;
    const usable = (secret: TokenSecret) => Date.parse(secret.accessTokenExpiresAt) > now;
    if (!options?.fresh && cached && now - cached.readAt < this.#cacheMs && usable(cached.secret)) {
      return cached.secret.accessToken;
    }
    // A cached token that expired is read again: the refresher may have written a new one.
    const secret = await this.#read(now);
    if (!usable(secret))
      throw new TokenUnavailableError('The stored Mautic access token has expired');
    return secret.accessToken;
  }

  async #read(now: number): Promise<TokenSecret> {
    let text: string | undefined;
    try {
      const answer = await this.#client.send(
        new GetSecretValueCommand({ SecretId: this.#secretId }),
      );
      text = answer.SecretString;
    } catch (error) {
      // The SDK's error names the secret and the failure, never its value.
      throw new TokenUnavailableError('Could not read the Mautic token secret', { cause: error });
    }
    let secret: TokenSecret;
    try {
      secret = tokenSecretSchema.parse(JSON.parse(text ?? ''));
    } catch {
      // No cause: a parse error could quote the secret's text.
      throw new TokenUnavailableError(
        'The Mautic token secret is empty or not a token (has the refresher run?)',
      );
    }
    this.#cached = { secret, readAt: now };
    return secret;
  }
}
