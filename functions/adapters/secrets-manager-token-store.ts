import { GetSecretValueCommand, type SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { TokenUnavailableError } from '../core/errors.ts';
import type { Clock, TokenReader, TokenSource } from '../core/ports.ts';
import { type TokenSecret, tokenSecretSchema } from '../core/token-secret.ts';

/**
 * Reads Mautic's access token from the token secret, cached for `cacheMs` so the secret is not
 * read on every invocation. It only reads: the refresher is the single writer.
 */
export class SecretsManagerTokenStore implements TokenSource, TokenReader {
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
    const secret = await this.read({ fresh: options?.fresh ?? false });
    if (secret === undefined) {
      throw new TokenUnavailableError(
        'The Mautic token secret is empty or not a token (has the refresher run?)',
      );
    }
    if (!this.#usable(secret, this.#clock.now()))
      throw new TokenUnavailableError('The stored Mautic access token has expired');
    return secret.accessToken;
  }

  /** The stored tokens (none yet: undefined), from the cache unless `fresh` or expired there. */
  async read(options: { fresh: boolean }): Promise<TokenSecret | undefined> {
    const now = this.#clock.now();
    const cached = this.#cached;
    if (
      !options.fresh &&
      cached &&
      now - cached.readAt < this.#cacheMs &&
      this.#usable(cached.secret, now)
    ) {
      return cached.secret;
    }
    // A cached token that expired is read again: the refresher may have written a new one.
    return this.#read(now);
  }

  #usable(secret: TokenSecret, now: number): boolean {
    return Date.parse(secret.accessTokenExpiresAt) > now;
  }

  async #read(now: number): Promise<TokenSecret | undefined> {
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
    let parsed: unknown;
    try {
      parsed = JSON.parse(text ?? '');
    } catch {
      parsed = undefined;
    }
    // Not a token (the stack's placeholder `{}`, nothing yet): no tokens. No parse error is kept,
    // as it could quote the secret's text.
    const result = tokenSecretSchema.safeParse(parsed);
    if (!result.success) return undefined;
    this.#cached = { secret: result.data, readAt: now };
    return result.data;
  }
}
