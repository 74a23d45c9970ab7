/**
 * Mautic's version for `status`, kept in the token secret. Mautic names its version only on the
 * answers of its API controllers, never on its token endpoint's (docs/mautic.md §8), so a
 * refresher run asks it with one cheap authenticated read before its token call, while the
 * stored access token still works. The answer is kept with the new tokens; when it cannot be
 * had, the version stored before is kept. It never holds up or fails a refresh.
 */
import type { TokenGranter } from '../ports.ts';
import type { ClientSecret, TokenSecret } from '../token-secret.ts';

/** The longest the read may take. */
const VERSION_READ_MS = 3_000;
/** The run's time that must be left for the read to be made: the token call comes first. */
const LEAVE_FOR_THE_TOKEN_CALL_MS = 20_000;

/** The version to store with the run's new tokens: Mautic's answer, else the one stored. */
export async function currentMauticVersion(
  token: TokenSecret | undefined,
  client: ClientSecret,
  now: number,
  deps: {
    granterFor: (client: ClientSecret, timeoutMs: number) => TokenGranter;
    remainingMs?: () => number;
  },
): Promise<string | undefined> {
  const stored = token?.mauticVersion;
  const usable =
    token !== undefined && Date.parse(token.accessTokenExpiresAt) > now + VERSION_READ_MS;
  const time = deps.remainingMs?.() ?? Number.POSITIVE_INFINITY;
  if (!usable || time < VERSION_READ_MS + LEAVE_FOR_THE_TOKEN_CALL_MS) return stored;
  const granter = deps.granterFor(client, VERSION_READ_MS);
  if (granter.mauticVersion === undefined) return stored;
  try {
    return (await granter.mauticVersion(token.accessToken)) ?? stored;
  } catch {
    return stored;
  }
}
