import { describeError, TokenUnavailableError } from '../errors.ts';
import type {
  Clock,
  Logger,
  RefreshAnswer,
  RefreshRequester,
  TokenReader,
  TokenSource,
} from '../ports.ts';
import { nextPollPauseMs, TOKEN_POLL } from '../retry-policy.ts';
import type { TokenSecret } from '../token-secret.ts';

export interface WaitingTokenSourceDeps {
  reader: TokenReader;
  refresher: RefreshRequester;
  clock: Clock;
  sleep: (ms: number) => Promise<void>;
  logger: Logger;
  /** How long to wait when the caller gives no `waitUntil`. */
  defaultWaitMs: number;
  /** First pause between polls of the token secret; it doubles up to `pollMaxMs`. @default `TOKEN_POLL` */
  pollStartMs?: number;
  pollMaxMs?: number;
}

/**
 * A token with less than this left (a tenth of its lifetime for short-lived ones) is as good as
 * expired: the call itself takes time.
 */
const USABLE_MARGIN_MS = 1_000;

/** Refresher failures that waiting cannot cure: they need the operator (the refresher says how). */
const NEEDS_OPERATOR = new Set([
  'needs_authorize',
  'client_secret_unreadable',
  'invalid_client',
  'unauthorized_client',
  'invalid_scope',
]);

/**
 * The batch function's token source: the stored token while it is usable, and otherwise a wait
 * for a newer one instead of giving the events back (contract §2).
 *
 * A missing, expired or refused token makes it run the refresher and wait for its answer. The
 * refresher is the single writer (with reserved concurrency 1 where the environment reserves),
 * so a caller that finds it busy (throttled) polls the token secret, with backoff, until a token
 * newer than the one it had appears, asking again between polls (the refresher skips the token call when newer tokens are
 * already stored, so many callers cost one refresh). All of it ends by `waitUntil`; only then does
 * it throw, and the caller leaves its events to the queue. Callers in one container waiting for
 * the same stale token share one wait.
 */
export class WaitingTokenSource implements TokenSource {
  readonly #deps: WaitingTokenSourceDeps;
  readonly #waits = new Map<string, Promise<string>>();

  constructor(deps: WaitingTokenSourceDeps) {
    this.#deps = deps;
  }

  async accessToken(
    options: { fresh?: boolean; refused?: string; waitUntil?: number } = {},
  ): Promise<string> {
    const { refused } = options;
    const secret = await this.#deps.reader.read({
      fresh: options.fresh === true || refused !== undefined,
    });
    if (secret && this.#usable(secret) && secret.accessToken !== refused) return secret.accessToken;

    const stale = secret?.updatedAt ?? null;
    const reason =
      secret === undefined
        ? 'token_missing'
        : secret.accessToken === refused
          ? 'token_refused'
          : 'token_expired';
    const waitUntil = options.waitUntil ?? this.#deps.clock.now() + this.#deps.defaultWaitMs;
    const key = stale ?? '';
    let wait = this.#waits.get(key);
    if (wait === undefined) {
      wait = this.#waitForNewer(stale, reason, waitUntil).finally(() => this.#waits.delete(key));
      this.#waits.set(key, wait);
    }
    return wait;
  }

  async #waitForNewer(stale: string | null, reason: string, waitUntil: number): Promise<string> {
    const { clock, logger, refresher } = this.#deps;
    const started = clock.now();
    let pause = this.#deps.pollStartMs ?? TOKEN_POLL.startMs;
    let asks = 0;
    for (let round = 0; ; round++) {
      if (round > 0) {
        const token = await this.#newer(stale);
        if (token !== undefined) return this.#got(token, reason, started, asks);
      }
      const left = waitUntil - clock.now();
      if (left <= 0) break;
      let answer: RefreshAnswer | undefined;
      try {
        answer = await refresher.refreshNow({ reason, staleUpdatedAt: stale }, left);
        asks++;
      } catch (error) {
        logger.warn('Could not run the token refresher; polling the token secret', {
          event: 'refresher_unreachable',
          error: describeError(error),
        });
      }
      const token = await this.#newer(stale);
      if (token !== undefined) return this.#got(token, reason, started, asks);
      if (answer?.kind === 'answered' && answer.action === 'failed') {
        if (NEEDS_OPERATOR.has(answer.why ?? '')) {
          throw new TokenUnavailableError(
            `The token refresher cannot get a Mautic token (${answer.why}): its log names the fix`,
          );
        }
      }
      const nap = Math.min(pause, waitUntil - clock.now());
      if (nap <= 0) break;
      await this.#deps.sleep(nap);
      pause = nextPollPauseMs(pause, this.#deps.pollMaxMs);
    }
    logger.warn('No usable Mautic access token arrived in time; the events go back to the queue', {
      event: 'no_token',
      reason,
      waitedMs: clock.now() - started,
      asks,
    });
    throw new TokenUnavailableError('No usable Mautic access token arrived in time');
  }

  /** A usable token stored after `stale`, read past any cache; undefined if none (yet). */
  async #newer(stale: string | null): Promise<string | undefined> {
    let secret: TokenSecret | undefined;
    try {
      secret = await this.#deps.reader.read({ fresh: true });
    } catch {
      // The reader's errors say the secret could not be read; the next poll tries again.
      return undefined;
    }
    return secret && secret.updatedAt !== stale && this.#usable(secret)
      ? secret.accessToken
      : undefined;
  }

  #got(token: string, reason: string, started: number, asks: number): string {
    this.#deps.logger.info('Got a new Mautic access token from the refresher', {
      event: 'token_waited',
      reason,
      waitedMs: this.#deps.clock.now() - started,
      asks,
    });
    return token;
  }

  #usable(secret: TokenSecret): boolean {
    return usableFor(secret, this.#deps.clock.now());
  }
}

/** Whether the stored access token is still worth handing to a Mautic call at `now`. */
export function usableFor(secret: TokenSecret, now: number): boolean {
  const expiresAt = Date.parse(secret.accessTokenExpiresAt);
  const lifetime = expiresAt - Date.parse(secret.updatedAt);
  return expiresAt - now > Math.min(USABLE_MARGIN_MS, lifetime / 10);
}
