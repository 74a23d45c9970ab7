/**
 * Mautic's version for `status`, kept in the token secret. Mautic names its version only on the
 * answers of its API controllers, never on its token endpoint's (docs/mautic.md §8), so a
 * refresher run asks it with one cheap authenticated read: before its token call, while the
 * stored access token still works; or, after a `client_credentials` grant (which spends no
 * refresh token, so a moment before storing costs nothing), with the new one. When it cannot be
 * had, the version stored before is kept. It never holds up or fails a refresh.
 */
import type { TokenGranter } from '../ports.ts';
import type { ClientSecret, TokenSecret } from '../token-secret.ts';

/** The longest the read may take. */
const VERSION_READ_MS = 3_000;
/** The run's time that must be left for the read to be made: the token call comes first. */
const LEAVE_FOR_THE_TOKEN_CALL_MS = 20_000;

interface VersionDeps {
  granterFor: (client: ClientSecret, timeoutMs: number) => TokenGranter;
  remainingMs?: () => number;
}

/** The version an API answer to `accessToken` names, when there is time to ask; else undefined. */
async function readVersion(
  accessToken: string,
  client: ClientSecret,
  deps: VersionDeps,
): Promise<string | undefined> {
  const time = deps.remainingMs?.() ?? Number.POSITIVE_INFINITY;
  if (time < VERSION_READ_MS + LEAVE_FOR_THE_TOKEN_CALL_MS) return undefined;
  const granter = deps.granterFor(client, VERSION_READ_MS);
  try {
    return await granter.mauticVersion?.(accessToken);
  } catch {
    return undefined;
  }
}

/** Before the token call: what the stored, still working, token's API answer names, else the stored version. */
export async function currentMauticVersion(
  token: TokenSecret | undefined,
  client: ClientSecret,
  now: number,
  deps: VersionDeps,
): Promise<string | undefined> {
  const stored = token?.mauticVersion;
  const usable =
    token !== undefined && Date.parse(token.accessTokenExpiresAt) > now + VERSION_READ_MS;
  if (!usable) return stored;
  return (await readVersion(token.accessToken, client, deps)) ?? stored;
}

/**
 * After the token call: the grant with the version to store. Unknown still after a
 * `client_credentials` grant, it is asked under the new token (nothing spent waits on it).
 */
export async function withMauticVersion<
  G extends { grant: string; tokens: { accessToken: string } },
>(
  granted: G,
  known: string | undefined,
  client: ClientSecret,
  deps: VersionDeps,
): Promise<G & { mauticVersion: string | undefined }> {
  const asked =
    known === undefined && granted.grant === 'client_credentials'
      ? await readVersion(granted.tokens.accessToken, client, deps)
      : undefined;
  return { ...granted, mauticVersion: known ?? asked };
}
