/**
 * A contact's company links (companies_leads) as Mautic 5.1.1 makes them: the company endpoints
 * (reference §11.4), a contact item's `companies` (LeadModel::modifyCompanies replaces the set)
 * and its `company` field (LeadModel::saveEntity links the company of that name, creating it when
 * none has it, and makes it primary). The primary company's name is the contact's `company`.
 */
import {
  type EntityState,
  holdersOf,
  insert,
  linksOf,
  type StoredRecord,
  setRecordFields,
  touch,
} from './store.ts';

/** The name CompanyModel writes into the contact's `company` field. */
function companyName(state: EntityState, companyId: number | undefined): string {
  const company =
    companyId === undefined ? undefined : state.stores.companies.records.get(companyId);
  const name = company?.fields.companyname;
  return typeof name === 'string' ? name : '';
}

function writeCompanyField(state: EntityState, contact: StoredRecord, name: string): void {
  if (contact.fields.company === name) return;
  touch(state, contact);
  setRecordFields(state, 'contacts', contact, { ...contact.fields, company: name });
}

/** The contact's links to companies that still exist. */
function currentLinks(state: EntityState, contact: StoredRecord) {
  const links = linksOf(state, contact.id).companies;
  for (const [id] of links) {
    if (!state.stores.companies.records.has(id)) links.delete(id);
  }
  return links;
}

/**
 * CompanyModel::addLeadToCompany: links to the companies the contact is not linked to yet
 * (unknown ids skipped); CompanyLeadRepository::saveEntities makes the first new one primary
 * and its name the contact's `company`.
 */
export function addCompanyLinks(
  state: EntityState,
  contact: StoredRecord,
  companyIds: readonly number[],
) {
  const links = currentLinks(state, contact);
  const added = companyIds.filter(
    (id, index) =>
      state.stores.companies.records.has(id) && !links.has(id) && companyIds.indexOf(id) === index,
  );
  if (added.length === 0) return;
  for (const link of links.values()) link.primary = false;
  added.forEach((id, index) => {
    links.set(id, { addedAt: state.now(), primary: index === 0 });
  });
  const name = companyName(state, added[0]);
  if (name !== '') writeCompanyField(state, contact, name);
}

/**
 * CompanyModel::removeLeadFromCompany: when the primary link goes, the remaining link with the
 * lowest company id (the order MySQL returns them in) becomes primary, or `company` empties.
 */
function removeCompany(state: EntityState, contact: StoredRecord, companyId: number) {
  const links = currentLinks(state, contact);
  const link = links.get(companyId);
  if (link === undefined) return;
  links.delete(companyId);
  if (!link.primary) return;
  const next = [...links.keys()].sort((a, b) => a - b)[0];
  const nextLink = next === undefined ? undefined : links.get(next);
  if (nextLink !== undefined) nextLink.primary = true;
  writeCompanyField(state, contact, companyName(state, next));
}

/** The company endpoints: one link added (primary) or removed. */
export function linkCompany(
  state: EntityState,
  contact: StoredRecord,
  companyId: number,
  add: boolean,
) {
  if (add) addCompanyLinks(state, contact, [companyId]);
  else removeCompany(state, contact, companyId);
}

/**
 * LeadModel::modifyCompanies, for a contact item's `companies` (ids, cast with (int)): links
 * the listed companies it lacks, then unlinks those not listed.
 */
export function replaceCompanies(state: EntityState, contact: StoredRecord, ids: unknown[]) {
  const requested = ids.map((id) => Math.trunc(Number(id)) || 0);
  addCompanyLinks(state, contact, requested);
  for (const id of [...currentLinks(state, contact).keys()]) {
    if (!requested.includes(id)) removeCompany(state, contact, id);
  }
}

/**
 * LeadModel::saveEntity when the item changed the contact's `company`: a name links the company
 * that has it (IdentifyCompanyHelper: the last match, compared as MySQL does), or a new company
 * of that name, and makes it primary (setPrimaryCompany writes its stored name); an emptied
 * `company` deletes the primary link (removeContactPrimaryCompany).
 */
export function identifyCompany(state: EntityState, contact: StoredRecord, name: string) {
  if (name === '') {
    const links = currentLinks(state, contact);
    for (const [id, link] of links) if (link.primary) links.delete(id);
    return;
  }
  const company =
    holdersOf(state, 'companies', 'companyname', name).at(-1) ??
    insert(state, 'companies', { companyname: name }, state.now(), state.apiUser);
  const links = currentLinks(state, contact);
  for (const link of links.values()) link.primary = false;
  const link = links.get(company.id);
  if (link === undefined) links.set(company.id, { addedAt: state.now(), primary: true });
  else link.primary = true;
  writeCompanyField(state, contact, companyName(state, company.id));
}
