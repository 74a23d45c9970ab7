/**
 * Mautic 7's `POST /api/companies/batch/addcontacts` (CompanyApiController::batchAddContactsAction
 * and BatchCompanyContactAssignmentModel::process): many contact–company links in one call,
 * answered 200 with a result per pair, in the order sent, and a summary. Earlier lines have no
 * such route (a routing 404), and there is no batch unlink.
 */
import { batchLimitError } from './batch.ts';
import { addCompanyLinks } from './company-links.ts';
import { phpIntval } from './php.ts';
import type { EntityState } from './store.ts';
import { bodyParams, type DecodedBody, type Reply, returnError, view } from './symfony.ts';

const ADDED = 'Contact added to company';
const CONTACT_NOT_FOUND = 'Contact not found';
const COMPANY_NOT_FOUND = 'Company not found';

interface PairResult {
  contactId: number;
  companyId: number;
  status: number;
  message: string;
}

/** parsePair: each id cast as PHP's (int) does; a missing one is 0. */
function parsePair(entry: Record<string, unknown>): [contactId: number, companyId: number] {
  return [phpIntval(entry.contactId ?? 0), phpIntval(entry.companyId ?? 0)];
}

const result = (contactId: number, companyId: number, status: number, message: string) => ({
  contactId,
  companyId,
  status,
  message,
});

/**
 * The outcome per distinct pair: a contact that does not exist (checked first) or a company
 * that does not, else linked, a contact's companies in one go in ascending id order (the first
 * new one becomes primary). A pair already linked is a success that changes nothing. Every
 * contact is editable here: the simulator has no users whose permissions would refuse one (403).
 */
function assign(state: EntityState, pairs: Array<[number, number]>): Map<string, PairResult> {
  const outcomes = new Map<string, PairResult>();
  const byContact = new Map<number, number[]>();
  for (const [contactId, companyId] of pairs) {
    const key = `${contactId}:${companyId}`;
    if (outcomes.has(key) || byContact.get(contactId)?.includes(companyId)) continue;
    if (contactId <= 0 || !state.stores.contacts.records.has(contactId)) {
      outcomes.set(key, result(contactId, companyId, 404, CONTACT_NOT_FOUND));
    } else if (companyId <= 0 || !state.stores.companies.records.has(companyId)) {
      outcomes.set(key, result(contactId, companyId, 404, COMPANY_NOT_FOUND));
    } else {
      byContact.set(contactId, [...(byContact.get(contactId) ?? []), companyId]);
    }
  }
  for (const [contactId, companyIds] of byContact) {
    const contact = state.stores.contacts.records.get(contactId);
    if (contact === undefined) continue;
    const sorted = [...companyIds].sort((a, b) => a - b);
    addCompanyLinks(state, contact, sorted);
    for (const companyId of sorted) {
      outcomes.set(`${contactId}:${companyId}`, result(contactId, companyId, 200, ADDED));
    }
  }
  return outcomes;
}

/** The route, on a line that has it; undefined (a routing 404) on one that does not. */
export function batchAddContacts(state: EntityState, body: DecodedBody): Reply | undefined {
  if (!state.line.batchCompanyLinks) return undefined;
  const assignments = bodyParams(body).assignments;
  if (
    assignments === null ||
    typeof assignments !== 'object' ||
    Object.keys(assignments).length === 0
  ) {
    return returnError(400, '"assignments" parameter is required and must be a non-empty array');
  }
  const entries = Object.values(assignments);
  if (entries.some((entry) => entry === null || typeof entry !== 'object')) {
    return returnError(400, 'Assignments entries must be a non-empty array');
  }
  if (entries.length > state.batchMaxLimit) return batchLimitError(state, 400);
  const pairs = entries.map((entry) => parsePair(entry as Record<string, unknown>));
  const outcomes = assign(state, pairs);
  const results = pairs.map(
    ([contactId, companyId]) =>
      outcomes.get(`${contactId}:${companyId}`) ??
      result(contactId, companyId, 404, CONTACT_NOT_FOUND),
  );
  const succeeded = results.filter((entry) => entry.status === 200).length;
  return view(200, {
    results,
    summary: { total: results.length, succeeded, failed: results.length - succeeded },
  });
}
