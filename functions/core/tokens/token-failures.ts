/**
 * A failed token call in words an operator acts on: what went wrong and what to do. The
 * refresher's run decides what follows (token-refresh.ts); this says it.
 */
import { describeError, MauticTokenError, MauticTransientError } from '../errors.ts';

/** What went wrong with a token call that may work later, in words an operator acts on. */
export function transientDetail(error: unknown): string {
  if (!(error instanceof MauticTransientError)) return `failed (${describeError(error)})`;
  if (error.status !== undefined) return `answered HTTP ${error.status}`;
  const where = error.unreached ?? 'Mautic';
  if (error.kind === 'timeout') return `did not answer in time (${where})`;
  if (error.kind === 'network')
    return error.possiblyApplied
      ? `dropped the connection (${where})`
      : `could not be reached (${where})`;
  return `call was ${error.kind}`;
}

/** What to do about Mautic refusing the credential, in the words of this environment. */
export function fixFor(
  error: MauticTokenError,
  deps: { authorizeCommand?: string | undefined; credentialsFix?: string | undefined },
): string {
  const authorize = deps.authorizeCommand ?? 'npx mautic-relay authorize';
  if (error.reason === 'invalid_client') {
    return `Mautic refused the client id or secret: ${deps.credentialsFix ?? 'run "npx mautic-relay credentials" with the right ones'}`;
  }
  if (error.reason === 'unauthorized_client') {
    return `This Mautic credential may not use client_credentials (it was not created by an admin): use grantType authorization_code and run "${authorize}"`;
  }
  return 'Mautic refused the token request';
}

/** Mautic refused the refresh token: revoked, expired, or spent. */
export function isInvalidGrant(error: unknown): boolean {
  return error instanceof MauticTokenError && error.reason === 'invalid_grant';
}
