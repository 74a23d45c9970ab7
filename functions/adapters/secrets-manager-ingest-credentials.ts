import { GetSecretValueCommand, type SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { credentialLists, readSenderCredentials } from '../core/ingest/sender-credentials.ts';
import { parseCredentials } from '../core/ingest/webhook-auth.ts';
import type { Clock, IngestCredentials } from '../core/ports.ts';

/**
 * The ingest's credentials from a Secrets Manager secret in either format of
 * `readSenderCredentials` (`{"senders":[…]}` or `{"webhookSecrets":[…],"apiKeys":[…]}`, each
 * with an optional `"generatedSecret"`), cached for
 * `cacheMs` so a rotation (adding a secret, later removing the old one) takes effect without a
 * deploy. `generatedSecret` is what the stack generates at deploy time: 32 letters and digits,
 * which are the base64 of 24 bytes, so `whsec_<generatedSecret>` is a valid Standard Webhooks
 * secret (Secrets Manager cannot generate the prefix itself).
 */
export class SecretsManagerIngestCredentials {
  readonly #client: SecretsManagerClient;
  readonly #secretId: string;
  readonly #cacheMs: number;
  readonly #clock: Clock;
  readonly #onReloadError: (error: unknown) => void;
  #cached: { credentials: IngestCredentials; readAt: number } | undefined;

  constructor(
    client: SecretsManagerClient,
    secretId: string,
    options: { cacheMs: number; clock: Clock; onReloadError?: (error: unknown) => void },
  ) {
    this.#client = client;
    this.#secretId = secretId;
    this.#cacheMs = options.cacheMs;
    this.#clock = options.clock;
    this.#onReloadError = options.onReloadError ?? (() => {});
  }

  /**
   * The credentials, read again once the cache time has passed. A failed reload (Secrets Manager
   * unreachable, a badly rotated secret) keeps the last good credentials for another cache
   * period and reports the error, rather than failing every request.
   */
  async load(): Promise<IngestCredentials> {
    const now = this.#clock.now();
    const cached = this.#cached;
    if (cached && now - cached.readAt < this.#cacheMs) return cached.credentials;
    if (!cached) return this.#read(now);
    try {
      return await this.#read(now);
    } catch (error) {
      this.#onReloadError(error);
      this.#cached = { credentials: cached.credentials, readAt: now };
      return cached.credentials;
    }
  }

  async #read(now: number): Promise<IngestCredentials> {
    const answer = await this.#client.send(new GetSecretValueCommand({ SecretId: this.#secretId }));
    const credentials = parseCredentials(
      credentialLists(readSenderCredentials(answer.SecretString)),
    );
    this.#cached = { credentials, readAt: now };
    return credentials;
  }
}
