/**
 * Writing the token secret so that no rotated refresh token is lost: every token call makes
 * Mautic spend the old refresh token, so new tokens must reach the secret even when a write
 * fails or a container stops halfway. The refresher (token-refresh.ts) decides what to write.
 */
import { createHash } from 'node:crypto';
import { describeError } from '../errors.ts';
import type { Logger, TokenVault } from '../ports.ts';
import type { TokenSecret } from '../token-secret.ts';

/** A write that failed: Mautic already rotated, so these tokens must be stored before any new call. */
interface UnsavedWrite {
  token: TokenSecret;
  requestToken: string;
  basedOn: string | undefined;
  /**
   * The tokens read before the token call that gave `token`, whose refresh token it spent: a
   * racing run's drop of them (`isDropOf`) is written over, not taken for a newer write.
   */
  spent?: TokenSecret | undefined;
}

export interface TokenWriteDeps {
  vault: TokenVault;
  logger: Logger;
  /** Tokens obtained but not yet stored; kept for the life of the container. */
  unsaved: { value: UnsavedWrite | undefined };
}

/**
 * The write's idempotency token (and so the new version's id): derived from the version read and
 * the new content. Retrying the same write adds no second version; a different write on the same
 * version (after a half-finished one) cannot collide with it; and a pending version can be told
 * to have been built on the current one.
 */
export function requestTokenFor(versionRead: string | undefined, content: TokenSecret): string {
  return createHash('sha256')
    .update(`${versionRead ?? 'none'}|${JSON.stringify(content)}`)
    .digest('hex');
}

/**
 * Makes current a pending version built on the current one: tokens whose put succeeded but whose
 * stage move did not. Nothing to do for the usual pending label, which stays on the version it
 * made current, or for one built on an older version (superseded, e.g. by `authorize`).
 */
export async function healPendingWrite(
  currentVersion: string | undefined,
  deps: TokenWriteDeps,
): Promise<{ token: TokenSecret; versionId: string } | 'failed' | 'unknown' | undefined> {
  if (currentVersion === undefined) return undefined;
  let pending: { token: TokenSecret; versionId: string } | undefined;
  try {
    pending = await deps.vault.readPending();
  } catch (error) {
    deps.logger.warn('Could not read the pending token version; no token call this run', {
      error: describeError(error),
    });
    return 'unknown';
  }
  if (
    pending === undefined ||
    pending.versionId === currentVersion ||
    requestTokenFor(currentVersion, pending.token) !== pending.versionId
  ) {
    return undefined;
  }
  const unsaved = {
    token: pending.token,
    requestToken: pending.versionId,
    basedOn: currentVersion,
  };
  const result = await write(unsaved, deps);
  if (result === 'failed') return 'failed';
  if (result === 'superseded') return undefined;
  deps.logger.warn('Completed a token write that an earlier run left half-finished');
  return { token: pending.token, versionId: pending.versionId };
}

/** How long apart, and how many times, a run whose refresh token was refused reads again. */
const RACING_WRITE_POLL_MS = 500;
const RACING_WRITE_POLLS = 6;

/**
 * What a racing run stored after Mautic refused this run's refresh token (`invalid_grant`): the
 * run it raced (no reserved concurrency) may have spent that token and be storing what Mautic
 * rotated it to. Reads the secret again every 500 ms for up to 3 s (less when `mayWait` says the
 * run's time runs short): that answer and its write take well under that. Then completes a
 * pending version built on the version read (the racer's put made, its stage move not yet),
 * whose label the drop's own put would take. Nothing: no newer tokens, the refusal stands.
 */
export async function racingWrite(
  versionRead: string | undefined,
  deps: TokenWriteDeps & { sleep: (ms: number) => Promise<void> },
  mayWait: (ms: number) => boolean,
): Promise<{ token: TokenSecret | undefined } | 'write_failed' | 'pending_unreadable' | undefined> {
  for (let poll = 0; poll <= RACING_WRITE_POLLS; poll++) {
    const latest = await deps.vault.readToken();
    if (latest.versionId !== versionRead) return { token: latest.token };
    if (poll === RACING_WRITE_POLLS || !mayWait(RACING_WRITE_POLL_MS)) break;
    await deps.sleep(RACING_WRITE_POLL_MS);
  }
  const healed = await healPendingWrite(versionRead, deps);
  if (healed === 'failed') return 'write_failed';
  if (healed === 'unknown') return 'pending_unreadable';
  return healed && { token: healed.token };
}

/**
 * Stores tokens a token call gave, keeping them for the next run if the write fails. A write by
 * someone else in between (`authorize`) wins: `superseded`, with theirs; but not a racing run's
 * drop of the refresh token the call spent (`isDropOf` of `spent`): these go on top of it. The
 * same holds when this container stores its kept tokens on its next run.
 */
export async function storeGranted(
  unsaved: UnsavedWrite,
  deps: TokenWriteDeps,
): Promise<
  { result: 'written' | 'failed' } | { result: 'superseded'; theirs: TokenSecret | undefined }
> {
  const first = await writeOrKeep(unsaved, deps);
  if (first !== 'superseded') return { result: first };
  const theirs = await deps.vault.readToken();
  if (!isDropOf(theirs.token, unsaved.spent)) {
    deps.logger.warn(
      'New tokens were stored by someone else meanwhile (authorize?); keeping theirs',
    );
    return { result: 'superseded', theirs: theirs.token };
  }
  const basedOn = theirs.versionId;
  const onTop = { ...unsaved, requestToken: requestTokenFor(basedOn, unsaved.token), basedOn };
  const second = await writeOrKeep(onTop, deps);
  if (second !== 'superseded') return { result: second };
  return { result: 'superseded', theirs: (await deps.vault.readToken()).token };
}

/** Writes, keeping the tokens for the next run if the write fails. */
export async function writeOrKeep(
  unsaved: UnsavedWrite,
  deps: TokenWriteDeps,
): Promise<'written' | 'superseded' | 'failed'> {
  const result = await write(unsaved, deps);
  if (result === 'failed') deps.unsaved.value = unsaved;
  return result;
}

/** Writes, trying once more when the first attempt fails. */
async function write(
  unsaved: UnsavedWrite,
  deps: TokenWriteDeps,
): Promise<'written' | 'superseded' | 'failed'> {
  for (let attempt = 1; attempt <= 2; attempt++) {
    try {
      return await deps.vault.writeToken(unsaved.token, unsaved.requestToken, unsaved.basedOn);
    } catch (error) {
      deps.logger.error(
        'Could not store the Mautic tokens; they are kept to be stored first on the next run',
        {
          attempt,
          error: describeError(error),
        },
      );
    }
  }
  return 'failed';
}

/**
 * Whether `theirs` is only `base` without its refresh token: what a refresher writes when Mautic
 * refuses that refresh token. When two runs race on one refresh token (no reserved concurrency),
 * the one Mautic answers second is refused, because the first spent it, and may store that drop
 * before the first stores the rotated tokens; those must then go on top of it, not be lost.
 */
function isDropOf(theirs: TokenSecret | undefined, base: TokenSecret | undefined): boolean {
  return (
    theirs !== undefined &&
    base?.refreshToken !== undefined &&
    theirs.refreshToken === undefined &&
    theirs.accessToken === base.accessToken &&
    theirs.updatedAt === base.updatedAt
  );
}
