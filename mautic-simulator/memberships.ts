/**
 * Segment and campaign memberships and company links (reference §11.2–§11.4, §11.7): the
 * endpoints of ListApiController, CampaignApiController and CompanyApiController, and a contact's
 * lists of them (LeadApiController). Every not-found message is the one that controller gives.
 */
import { linkCompany } from './company-links.ts';
import { isPublished, segmentAlias } from './present.ts';
import {
  type EntityState,
  getEntity,
  linksOf,
  type Membership,
  phpDate,
  type StoredRecord,
  sqlDate,
} from './store.ts';
import {
  bodyParams,
  type DecodedBody,
  PhpError,
  type Reply,
  returnError,
  view,
} from './symfony.ts';

const ITEM_NOT_FOUND = 'Item was not found.';
const CONTACT_NOT_FOUND = 'Contact not found.';
const ACCESS_DENIED = 'You do not have access to the requested area/action.';
const SUCCESS = { success: 1 };

/**
 * ListModel::addLead with manuallyAdded: a new row, or a manually removed one brought back;
 * a current member stays as it is.
 */
function addToSegment(state: EntityState, contact: StoredRecord, segmentId: number): void {
  const rows = linksOf(state, contact.id).segments;
  const row = rows.get(segmentId);
  if (row === undefined) {
    rows.set(segmentId, { addedAt: state.now(), manuallyAdded: true, manuallyRemoved: false });
  } else if (row.manuallyRemoved) {
    Object.assign(row, { manuallyAdded: true, manuallyRemoved: false });
  }
}

/**
 * ListModel::removeLead with manuallyRemoved: a row added by hand is deleted; one its filters
 * added is kept with manually_removed, so a rebuild does not add the contact back.
 */
function removeFromSegment(state: EntityState, contact: StoredRecord, segmentId: number): void {
  const rows = linksOf(state, contact.id).segments;
  const row = rows.get(segmentId);
  if (row === undefined) return;
  if (row.manuallyAdded) rows.delete(segmentId);
  else row.manuallyRemoved = true;
}

/** A contact that a segment's filters brought in (manually_added 0), as a rebuild adds it. */
export function addBySegmentFilters(state: EntityState, segmentId: number, contactId: number) {
  const contact = state.stores.contacts.records.get(contactId);
  if (contact === undefined || !state.stores.segments.records.has(segmentId)) {
    throw new TypeError(`No contact ${contactId} or segment ${segmentId}`);
  }
  const row = { addedAt: state.now(), manuallyAdded: false, manuallyRemoved: false };
  linksOf(state, contactId).segments.set(segmentId, row);
}

/** A key of `details` as PHP turns the requested id into an array key. */
function phpKey(id: unknown): string {
  if (typeof id === 'boolean') return id ? '1' : '0';
  if (id === null || id === undefined) return '';
  if (typeof id === 'number') return String(Math.trunc(id));
  if (typeof id === 'object') throw new PhpError('Illegal offset type');
  return String(id);
}

/** POST /api/segments/{id}/contacts/add with `ids` (ListApiController::addLeadsAction). */
export function addContactsToSegment(state: EntityState, id: string, body: DecodedBody): Reply {
  const ids = bodyParams(body).ids;
  if (ids === undefined || ids === null) return returnError(400, 'This is a bad request.');
  const segment = getEntity(state, 'segments', id);
  if (segment === undefined) return returnError(404, ITEM_NOT_FOUND);
  if (!isPublished(segment)) return returnError(403, ACCESS_DENIED);
  const details = new Map<string, { success: boolean }>();
  // foreach over a scalar only warns (logged in prod): nothing is added.
  const requested = typeof ids === 'object' ? Object.values(ids) : [];
  for (const contactId of requested) {
    const contact = getEntity(state, 'contacts', contactId);
    if (contact === undefined) {
      details.set(phpKey(contactId), { success: false });
      continue;
    }
    addToSegment(state, contact, segment.id);
    details.set(String(contact.id), { success: true });
  }
  return view(200, { success: 1, details });
}

/** POST /api/segments/{id}/contact/{contactId}/add|remove (ListApiController). */
export function segmentContactAction(
  state: EntityState,
  id: string,
  contactId: string,
  action: 'add' | 'remove',
): Reply {
  const segment = getEntity(state, 'segments', id);
  if (segment === undefined) return returnError(404, ITEM_NOT_FOUND);
  const contact = getEntity(state, 'contacts', contactId);
  if (contact === undefined) return returnError(404, CONTACT_NOT_FOUND);
  if (!isPublished(segment)) return returnError(403, ACCESS_DENIED);
  if (action === 'add') addToSegment(state, contact, segment.id);
  else removeFromSegment(state, contact, segment.id);
  return view(200, SUCCESS);
}

/**
 * POST /api/campaigns/{id}/contact/{contactId}/add|remove (CampaignApiController,
 * MembershipManager): adding creates a manually added member or brings a removed one back;
 * removing marks the member manually removed. A campaign's restart rules are not modelled.
 */
export function campaignContactAction(
  state: EntityState,
  id: string,
  contactId: string,
  action: 'add' | 'remove',
): Reply {
  const campaign = getEntity(state, 'campaigns', id);
  if (campaign === undefined) return returnError(404, ITEM_NOT_FOUND);
  const contact = getEntity(state, 'contacts', contactId);
  if (contact === undefined) {
    return returnError(404, action === 'add' ? ITEM_NOT_FOUND : CONTACT_NOT_FOUND);
  }
  const rows = linksOf(state, contact.id).campaigns;
  const row = rows.get(campaign.id);
  if (action === 'add' && row === undefined) {
    rows.set(campaign.id, { addedAt: state.now(), manuallyAdded: true, manuallyRemoved: false });
  } else if (action === 'add' && row?.manuallyRemoved === true) {
    Object.assign(row, { manuallyAdded: true, manuallyRemoved: false });
  } else if (action === 'remove' && row !== undefined) {
    Object.assign(row, { manuallyAdded: false, manuallyRemoved: true });
  }
  return view(200, SUCCESS);
}

/** POST /api/companies/{companyId}/contact/{contactId}/add|remove (CompanyApiController). */
export function companyContactAction(
  state: EntityState,
  companyId: string,
  contactId: string,
  action: 'add' | 'remove',
): Reply {
  const company = getEntity(state, 'companies', companyId);
  if (company === undefined) return returnError(404, ITEM_NOT_FOUND);
  const contact = getEntity(state, 'contacts', contactId);
  if (contact === undefined) {
    return returnError(404, action === 'add' ? CONTACT_NOT_FOUND : ITEM_NOT_FOUND);
  }
  linkCompany(state, contact, company.id, action === 'add');
  return view(200, SUCCESS);
}

/** Rows of members that count (not manually removed) of records that still exist. */
function currentRows(
  state: EntityState,
  rows: Map<number, Membership>,
  entity: 'segments' | 'campaigns',
): Array<[StoredRecord, Membership]> {
  return [...rows.entries()]
    .filter(([, row]) => !row.manuallyRemoved)
    .sort(([a], [b]) => a - b)
    .flatMap(([id, row]) => {
      const record = state.stores[entity].records.get(id);
      return record === undefined ? [] : [[record, row] as [StoredRecord, Membership]];
    });
}

const membershipFlags = (row: Membership) => ({
  dateAdded: phpDate(row.addedAt),
  manuallyAdded: row.manuallyAdded,
  manuallyRemoved: row.manuallyRemoved,
});

/** GET /api/contacts/{id}/segments|campaigns|companies (LeadApiController). */
export function contactMembershipsAction(
  state: EntityState,
  id: string,
  kind: 'segments' | 'campaigns' | 'companies',
): Reply {
  const contact = getEntity(state, 'contacts', id);
  if (contact === undefined) return returnError(404, ITEM_NOT_FOUND);
  const links = state.links.get(contact.id);
  if (kind === 'companies') {
    const companies = [...(links?.companies ?? new Map()).entries()].flatMap(
      ([companyId, link]) => {
        const company = state.stores.companies.records.get(companyId);
        return company === undefined ? [] : [companyRow(company, link)];
      },
    );
    return view(200, { total: companies.length, companies });
  }
  const byId = new Map<string, unknown>();
  for (const [record, row] of currentRows(state, links?.[kind] ?? new Map(), kind)) {
    if (kind === 'segments') {
      const { name = null } = record.fields;
      byId.set(String(record.id), {
        id: record.id,
        alias: segmentAlias(record),
        name,
        ...membershipFlags(row),
      });
    } else if (isPublished(record)) {
      const { name = null } = record.fields;
      byId.set(String(record.id), { id: record.id, name, lists: [], ...membershipFlags(row) });
    }
  }
  return view(200, { total: byId.size, [kind === 'segments' ? 'lists' : 'campaigns']: byId });
}

/** A row of CompanyLeadRepository::getCompaniesByLeadId: raw SQL, so every value a string. */
function companyRow(company: StoredRecord, link: { addedAt: number; primary: boolean }) {
  const fields: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(company.fields)) {
    fields[key] = value === null || value === undefined ? null : String(value);
  }
  return {
    company_id: String(company.id),
    date_associated: sqlDate(link.addedAt),
    is_primary: link.primary ? '1' : '0',
    id: String(company.id),
    is_published: '1',
    date_added: sqlDate(company.addedAt),
    score: '0',
    ...fields,
  };
}
