/**
 * The relay's error classes, in one place: the Mautic client's, the token's, the queue's and the
 * configuration's. Adapters wrap foreign errors into these at their boundary, so no module needs
 * a use case only for its error class.
 *
 * Errors of the Mautic client. Each names the method, the URL path (never the query, the
 * host's credentials, a token or a secret) and the HTTP status when there was one, and keeps
 * the low-level failure in `cause`. `retryable` tells a caller whether the same call may work
 * later; the subclasses carry what a caller needs to decide how.
 */
export class MauticError extends Error {
  override name = 'MauticError';
  readonly method: string;
  readonly path: string;
  /** HTTP status of the answer, when there was one. */
  readonly status: number | undefined;
  readonly retryable: boolean;

  constructor(
    message: string,
    details: { method: string; path: string; status?: number | undefined; retryable: boolean },
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.method = details.method;
    this.path = details.path;
    this.status = details.status;
    this.retryable = details.retryable;
  }
}

/** Why the token endpoint refused a grant. */
export type TokenErrorReason =
  /** Unknown client id, wrong or missing secret. */
  | 'invalid_client'
  /** Refresh token or authorization code unknown, already used, expired or of another client. */
  | 'invalid_grant'
  /** The grant type is not allowed for this client (client_credentials on a non-admin credential). */
  | 'unauthorized_client'
  | 'other';

/** The token endpoint answered a grant with an error (Mautic answers 400 for all of them). */
export class MauticTokenError extends MauticError {
  override name = 'MauticTokenError';
  readonly reason: TokenErrorReason;
  /** Mautic's own error type, e.g. `invalid_grant`, `invalid_request`, `api_disabled`. */
  readonly mauticType: string | undefined;

  constructor(
    details: {
      method: string;
      path: string;
      status: number;
      reason: TokenErrorReason;
      mauticType: string | undefined;
      mauticMessage: string | undefined;
    },
    options?: ErrorOptions,
  ) {
    const what = [details.mauticType, details.mauticMessage].filter(Boolean).join(': ');
    super(
      `${details.method} ${details.path} failed with status ${details.status}${what ? ` (${what})` : ''}`,
      { ...details, retryable: false },
      options,
    );
    this.reason = details.reason;
    this.mauticType = details.mauticType;
  }
}

/** Why an API call was refused with 401. */
export type AuthErrorReason =
  /** The access token is unknown to Mautic (`invalid_grant`, "…is invalid."). */
  | 'token_invalid'
  /** The access token has expired (`invalid_grant`, "…has expired."). */
  | 'token_expired'
  /** No usable token reached Mautic (`access_denied`, "API authorization denied."). */
  | 'access_denied';

/** An API call answered 401. A fresh token may fix it, so it is retryable. */
export class MauticAuthError extends MauticError {
  override name = 'MauticAuthError';
  readonly reason: AuthErrorReason;

  constructor(
    details: { method: string; path: string; reason: AuthErrorReason },
    options?: ErrorOptions,
  ) {
    super(
      `${details.method} ${details.path} failed with status 401 (${details.reason})`,
      { ...details, status: 401, retryable: true },
      options,
    );
    this.reason = details.reason;
  }
}

/** Mautic's rate limiter answered 429. */
export class MauticRateLimitError extends MauticError {
  override name = 'MauticRateLimitError';
  /** When the window resets (epoch ms): `X-RateLimit-Reset` (Mautic's), or a proxy's `Retry-After`. */
  readonly resetAt: number | undefined;
  /** Calls allowed per window, from `X-RateLimit-Limit`. */
  readonly limit: number | undefined;

  constructor(
    details: {
      method: string;
      path: string;
      resetAt: number | undefined;
      limit: number | undefined;
    },
    options?: ErrorOptions,
  ) {
    const reset =
      details.resetAt === undefined ? '' : `; resets at ${new Date(details.resetAt).toISOString()}`;
    super(
      `${details.method} ${details.path} failed with status 429 (rate limited${reset})`,
      { ...details, status: 429, retryable: true },
      options,
    );
    this.resetAt = details.resetAt;
    this.limit = details.limit;
  }
}

/** More items than `api_batch_max_limit`: Mautic answers HTTP 500 "A max of N entities…". */
export class MauticBatchLimitError extends MauticError {
  override name = 'MauticBatchLimitError';
  /** The largest batch this Mautic accepts. */
  readonly limit: number;

  /** `status`: 500 on the standard batch routes, 400 on Mautic 7's company links. */
  constructor(
    details: { method: string; path: string; limit: number; status?: number },
    options?: ErrorOptions,
  ) {
    const status = details.status ?? 500;
    super(
      `${details.method} ${details.path} failed with status ${status} (at most ${details.limit} items per call)`,
      { ...details, status, retryable: true },
      options,
    );
    this.limit = details.limit;
  }
}

/** What kind of transient failure happened. */
export type TransientErrorKind =
  /** Mautic or a proxy answered 5xx (or 408). */
  | 'server'
  /** The connection failed or dropped before a whole answer arrived. */
  | 'network'
  /** The call's own timeout elapsed. */
  | 'timeout'
  /** The caller's signal aborted the call (e.g. the Lambda deadline). */
  | 'aborted';

/** A failure that the same call may not meet again: retry later. */
export class MauticTransientError extends MauticError {
  override name = 'MauticTransientError';
  readonly kind: TransientErrorKind;
  /**
   * Whether Mautic may have received and applied the request: true when the request may have
   * left (a timeout, an abort or a dropped connection after sending), false when it certainly
   * did not (connection refused, name not resolved) or Mautic answered a failure status.
   */
  readonly possiblyApplied: boolean;
  /** When the server said to come back (a 503's `Retry-After`, epoch ms), if it did. */
  readonly retryAt: number | undefined;
  /** What a network failure or timeout did not reach: the host, and how (`ENOTFOUND`). */
  readonly unreached: string | undefined;

  constructor(
    details: {
      method: string;
      path: string;
      kind: TransientErrorKind;
      status?: number;
      possiblyApplied?: boolean;
      retryAt?: number;
      /** What a network failure or timeout did not reach: the host, and how (`ENOTFOUND`). */
      unreached?: string;
    },
    options?: ErrorOptions,
  ) {
    const status = details.status === undefined ? '' : ` with status ${details.status}`;
    const unreached = details.unreached === undefined ? '' : `: ${details.unreached}`;
    const applied = details.possiblyApplied ? ', possibly applied' : '';
    const back =
      details.retryAt === undefined ? '' : `; back at ${new Date(details.retryAt).toISOString()}`;
    super(
      `${details.method} ${details.path} failed${status} (${details.kind}${unreached}${applied}${back})`,
      { ...details, retryable: true },
      options,
    );
    this.kind = details.kind;
    this.possiblyApplied = details.possiblyApplied ?? false;
    this.retryAt = details.retryAt;
    this.unreached = details.unreached;
  }
}

/** The whole call was refused for good (403, 404, other 4xx, a redirect): retrying cannot help. */
export class MauticPermanentError extends MauticError {
  override name = 'MauticPermanentError';
  /** Mautic's message, when the body carried one. */
  readonly mauticMessage: string | undefined;

  constructor(
    details: { method: string; path: string; status: number; mauticMessage: string | undefined },
    options?: ErrorOptions,
  ) {
    const what = details.mauticMessage ? ` (${details.mauticMessage})` : '';
    super(
      `${details.method} ${details.path} failed with status ${details.status}${what}`,
      { ...details, retryable: false },
      options,
    );
    this.mauticMessage = details.mauticMessage;
  }
}

/** The answer was not JSON, not of the expected shape, or too large. */
export class MauticResponseError extends MauticError {
  override name = 'MauticResponseError';
  /** A 2xx whose body cannot be read: Mautic did the work, but which items it did is unknown. */
  readonly possiblyApplied: boolean;

  constructor(
    problem: string,
    details: { method: string; path: string; status: number; retryable: boolean },
    options?: ErrorOptions,
  ) {
    super(
      `${details.method} ${details.path} answered ${details.status} with ${problem}`,
      details,
      options,
    );
    this.possiblyApplied = details.status >= 200 && details.status < 300;
  }
}

/** An error's name and message only, for logs and dead letters: our errors never hold secrets, and no stack is logged. */
export function describeError(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}

/** The access token could not be had: the secret is missing, unreadable, malformed or expired. */
export class TokenUnavailableError extends Error {
  override name = 'TokenUnavailableError';
}

/** The queue did not accept every message: the request may be retried whole. */
export class QueueUnavailableError extends Error {
  override name = 'QueueUnavailableError';
  /** What SQS last said, for the log: the error's name and its code (never a message body). */
  readonly reason: { error: string | undefined; code: string | undefined };

  constructor(
    message: string,
    reason: { error?: string | undefined; code?: string | undefined } = {},
  ) {
    super(message);
    this.reason = { error: reason.error, code: reason.code };
  }
}

/** A configuration that cannot work; the message names every bad variable. */
export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** What is wrong with one variable's value, without its name or the value (setting-rules.ts). */
export class SettingProblem extends Error {
  override name = 'SettingProblem';
}

/** Where an event of a refused request is wrong: its index, a JSON pointer into it, and why. */
export interface RefusalDetail {
  index?: number;
  path: string;
  message: string;
}

/**
 * The ingest refuses a request (contract §1): the answer's status, error code, message and the
 * details per event. Thrown by an ingest step, answered by the pipeline; never a 5xx for input.
 */
export class IngestRefusal extends Error {
  override name = 'IngestRefusal';
  readonly status: 400 | 401 | 404 | 409 | 413 | 415 | 422 | 429 | 503;
  readonly code: string;
  readonly details: RefusalDetail[] | undefined;
  /** When to send the request again (a 429's `Retry-After`), in whole seconds. */
  readonly retryAfterSeconds: number | undefined;

  constructor(
    status: IngestRefusal['status'],
    code: string,
    message: string,
    details?: RefusalDetail[],
    options: { retryAfterSeconds?: number } = {},
  ) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details;
    this.retryAfterSeconds = options.retryAfterSeconds;
  }
}

/**
 * A table the ingest needs could not be used (the record counters', contract §2): nothing was
 * decided, and the request may be sent again whole.
 */
export class StoreUnavailableError extends Error {
  override name = 'StoreUnavailableError';
}

/** A webhook secret or API key that cannot work; the message never quotes it. */
export class CredentialError extends Error {
  override name = 'CredentialError';
}

/** An answer larger than the client reads: it is cancelled, not buffered. */
export class BodyTooLargeError extends Error {
  override name = 'BodyTooLargeError';
}

/**
 * A sources document (contract §6) that cannot work: the message names the source at fault (or
 * the document, when it is the whole) and the problem, never a secret. `npm start` and `cdk
 * synth` refuse to start on it; the local stack's hot reload keeps the previous version.
 */
export class SourceConfigError extends Error {
  override name = 'SourceConfigError';
  /** The source at fault; undefined when the document as a whole is. */
  readonly source: string | undefined;

  constructor(source: string | undefined, problem: string, options?: ErrorOptions) {
    super(
      source === undefined ? `Sources document: ${problem}` : `Source "${source}": ${problem}`,
      options,
    );
    this.source = source;
  }
}

/**
 * A source's filter or idempotency key failed on a request (threw, timed out, yielded what it
 * may not): the verified payload is dead-lettered as `mapping_failed`, never bounced (§6).
 */
export class SourceEvaluationError extends Error {
  override name = 'SourceEvaluationError';
  readonly source: string;
  /** Which of the source's expressions failed. */
  readonly role: 'filter' | 'idempotencyKey';

  constructor(source: string, role: SourceEvaluationError['role'], problem: string) {
    super(`Source "${source}": ${problem}`);
    this.source = source;
    this.role = role;
  }
}
