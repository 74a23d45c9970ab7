/**
 * What the relay relies on that differs between Mautic's lines (docs/mautic.md §8), decided from
 * the version Mautic names in its `Mautic-Version` header. A version the relay does not know (not
 * said yet, or outside 5.x–7.x) is never guessed at: each rule then takes the course that is safe
 * on every line.
 */

/** `<major>.<minor>.<patch>` at the start of a version, as numbers; undefined when it is none. */
function parsed(version: string | undefined): [number, number, number] | undefined {
  const match = /^(\d+)\.(\d+)\.(\d+)/.exec(version?.trim() ?? '');
  return match ? [Number(match[1]), Number(match[2]), Number(match[3])] : undefined;
}

/**
 * What a second create of a company's name gives on this version: `refused` from 5.0 to 5.2.0
 * (a per-item 422 "companyname: This field must be unique."), `upserted` from 5.2.1 to 7.x (200
 * with the first one's id), either way never a second company, so a create whose answer was lost
 * can be sent again. Undefined for an unknown version: the create is not sent again.
 */
export function companyRepeat(version: string | undefined): 'refused' | 'upserted' | undefined {
  const [major, minor, patch] = parsed(version) ?? [];
  if (major === undefined || minor === undefined || patch === undefined) return undefined;
  if (major < 5 || major > 7) return undefined;
  if (major === 5 && (minor < 2 || (minor === 2 && patch === 0))) return 'refused';
  return 'upserted';
}

/**
 * Whether this version links contacts to companies in bulk (`POST
 * /api/companies/batch/addcontacts`, Mautic 7.x); any other, or an unknown one, takes one call
 * per pair.
 */
export function linksCompaniesInBulk(version: string | undefined): boolean {
  return parsed(version)?.[0] === 7;
}
