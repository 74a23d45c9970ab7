/**
 * The Mautic lines the simulator can play, and what each does differently where a client can
 * tell, as Mautic's source and functional tests beyond 5.1.1 say (docs/mautic.md §8, the shared
 * reference `mautic-versions.md`). Everything not listed here answers as 5.1.1 does on every line.
 */

/** What one Mautic version does, for the behaviours that differ between 5.1 and 7. */
export interface MauticLine {
  /** The version Mautic names in its `Mautic-Version` header. */
  version: string;
  /**
   * `batch/new` upserts a company by its unique identifier (its name, as shipped): a second
   * create answers 200 with the same id, also within one call. From 5.2.1; 5.1.1 and 5.2.0 refuse
   * it per item (422 "must be unique").
   */
  companyUpsert: boolean;
  /** The API rate limiter exists (optional, off by default); 7.0 removed it (UPGRADE-7.0.md). */
  rateLimiter: boolean;
  /** A record checked out for editing (emails) refuses an API edit with 409 (7.x). */
  lockedEdits: boolean;
  /** `POST /api/companies/batch/addcontacts` exists (7.x). */
  batchCompanyLinks: boolean;
  /** A select field's value not in its list is stored as null, answered 200 (5.2 on). */
  unlistedSelectNull: boolean;
}

/** The lines `--mautic-version` names, oldest first. */
export const LINE_NAMES = ['5.1', '5.2', '6', '7'] as const;

/** Each line as the version its header then says. */
const MAUTIC_LINES: Readonly<Record<string, string>> = {
  '5.1': '5.1.1',
  '5.2': '5.2.9',
  '6': '6.0.0',
  '7': '7.0.0',
};

/** A version the simulator plays: a line of `MAUTIC_LINES`, or `<major>.<minor>.<patch>` of 5–7. */
export function mauticLine(named: string): MauticLine {
  const version = (Object.hasOwn(MAUTIC_LINES, named) ? MAUTIC_LINES[named] : undefined) ?? named;
  const parts = /^(\d+)\.(\d+)\.(\d+)$/.exec(version);
  const [major, minor, patch] = (parts?.slice(1) ?? []).map(Number);
  if (major === undefined || minor === undefined || patch === undefined || major < 5 || major > 7) {
    throw new TypeError(
      `mauticVersion must be one of ${LINE_NAMES.join(', ')} or a 5.x–7.x version like 5.2.1: ${named}`,
    );
  }
  const from = (m: number, n: number, p: number) =>
    major > m || (major === m && (minor > n || (minor === n && patch >= p)));
  return {
    version,
    companyUpsert: from(5, 2, 1),
    rateLimiter: major < 7,
    lockedEdits: major >= 7,
    batchCompanyLinks: major >= 7,
    unlistedSelectNull: from(5, 2, 0),
  };
}

/** Entities whose API refuses an edit while a user has the record checked out (7.x): emails,
 * as Mautic's own test shows; contacts are not among them. Others are not modelled. */
export const LOCKABLE: ReadonlySet<string> = new Set(['emails']);

/**
 * The 409's message. Its wording follows Mautic's "checked out" message of the web UI; the API's
 * own translation was not read, so clients should key on the 409, as the relay does.
 */
export function lockedMessage(name: unknown, lock: { user: string; at: number }): string {
  const at = new Date(lock.at);
  const date = at.toLocaleDateString('en-US', {
    month: 'long',
    day: 'numeric',
    year: 'numeric',
    timeZone: 'UTC',
  });
  const time = at
    .toLocaleTimeString('en-US', { hour: 'numeric', minute: '2-digit', timeZone: 'UTC' })
    .toLowerCase();
  return `${String(name ?? '')} is currently checked out by ${lock.user} (checked out on ${date} at ${time}).`;
}
