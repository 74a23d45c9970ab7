/**
 * Mautic's contact lookup and the integrator actions' endpoints (reference §11; docs/mautic.md):
 * what `MauticApiClient` sends for `findContacts`, `addToSegment` and `contactAction`.
 */
import { canonicalReference, csvField, lookupProblem, storedForm } from '../contact-reference.ts';
import { MauticPermanentError, MauticResponseError } from '../errors.ts';
import type { ContactAction } from '../events.ts';
import { CONTACT_FIELD_PATTERN } from '../mautic-names.ts';
import type { ActionFields, CallOptions, CompanyLink, ItemResult } from '../ports.ts';
import { isObject, type MauticAnswer } from './mautic-http.ts';

/** Sends one `/api` request through the client (token, errors, JSON) and returns the answer. */
export type ApiSend = (
  method: string,
  path: string,
  call: CallOptions,
  request: { body?: string; query?: string },
) => Promise<MauticAnswer>;

/**
 * The longest query string a lookup sends. Apache refuses a request line over 8,190 bytes with
 * 414 (reference §11.1), nginx's default buffer is 8 KiB; the rest is left for the method, a
 * base URL path of up to 550 bytes, `/api/contacts` and the protocol.
 */
const MAX_LOOKUP_QUERY_BYTES = 7_600;
/** Pages of one lookup before it gives up: values are exact, so one page almost always does. */
const MAX_LOOKUP_PAGES = 20;

/**
 * Looks contacts up by a field with `where[0][expr]=in`, which compares whole values (`search`
 * would match prefixes, with `_` and `%` as wildcards: a look-alike). Each value is looked up
 * in its canonical form (`canonicalReference`: for an email, the address Mautic stores), and
 * the answer is keyed by it; the values are packed into as few requests as the request-line
 * limit allows, and every contact an answer lists is checked again here: only a stored value of
 * that very form counts (`storedForm`), so a look-alike that SQL's collation folds into it
 * (an accent, U+212A for K) never resolves a reference. A value the lookup cannot carry
 * (`lookupProblem`: only in events queued before the ingest refused it) is not sent, and
 * matches no one.
 */
export async function findContacts(
  send: ApiSend,
  field: string,
  values: ReadonlyArray<string>,
  call: CallOptions,
): Promise<Map<string, number[]>> {
  if (!CONTACT_FIELD_PATTERN.test(field)) {
    throw new TypeError('Expected `field` to be a contact field alias.');
  }
  const found = new Map<string, number[]>();
  const wanted = [...new Set(values.map((value) => canonicalReference(field, value)))];
  for (const value of wanted) found.set(value, []);
  const sendable = wanted.filter((value) => value !== '' && lookupProblem(value) === undefined);
  for (const group of packValues(field, sendable)) {
    for (const contact of await lookup(send, field, group, call)) {
      const ids = found.get(storedForm(contact.value));
      if (ids && !ids.includes(contact.id)) ids.push(contact.id);
    }
  }
  return found;
}

/** Groups of values whose query stays under `MAX_LOOKUP_QUERY_BYTES`. */
function packValues(field: string, values: ReadonlyArray<string>): string[][] {
  const groups: string[][] = [];
  let group: string[] = [];
  for (const value of values) {
    const next = [...group, value];
    if (group.length > 0 && lookupQuery(field, next, 0, 0).length > MAX_LOOKUP_QUERY_BYTES) {
      groups.push(group);
      group = [value];
    } else {
      group = next;
    }
  }
  if (group.length > 0) groups.push(group);
  return groups;
}

function lookupQuery(field: string, values: ReadonlyArray<string>, start: number, limit: number) {
  const params = {
    'where[0][col]': field,
    'where[0][expr]': 'in',
    'where[0][val]': values.map(csvField).join(','),
    minimal: '1',
    orderBy: 'id',
    orderByDir: 'ASC',
    start: String(start),
    limit: String(limit),
  };
  return Object.entries(params)
    .map(([name, value]) => `${encodeURIComponent(name)}=${queryValue(value)}`)
    .join('&');
}

/**
 * A query value, percent-encoded but for `@` and `,`, which a query may carry as they are (RFC
 * 3986 §3.4) and PHP reads alike: 4 bytes less per email, so 200 fit in one lookup.
 */
function queryValue(value: string): string {
  return encodeURIComponent(value).replaceAll('%40', '@').replaceAll('%2C', ',');
}

/** Every contact of one `in` lookup, page by page: its id and its field value as stored. */
async function lookup(
  send: ApiSend,
  field: string,
  values: ReadonlyArray<string>,
  call: CallOptions,
): Promise<Array<{ id: number; value: string }>> {
  const path = '/api/contacts';
  // Room for a few duplicates per value; a full page means there may be more.
  const limit = values.length * 2 + 10;
  const contacts: Array<{ id: number; value: string }> = [];
  for (let page = 0; page < MAX_LOOKUP_PAGES; page++) {
    const query = lookupQuery(field, values, page * limit, limit);
    const answer = await send('GET', path, call, { query });
    const records = contactList(answer, path);
    for (const record of records) {
      const value = fieldValue(record, field);
      const id = toId(record.id);
      // Mautic lists a number field as a number (reference §5.4): compared as its text.
      const text = typeof value === 'number' && Number.isFinite(value) ? String(value) : value;
      if (id !== undefined && typeof text === 'string') contacts.push({ id, value: text });
    }
    if (records.length < limit) return contacts;
  }
  throw new MauticResponseError(`more than ${MAX_LOOKUP_PAGES} pages of contacts`, {
    method: 'GET',
    path,
    status: 200,
    retryable: true,
  });
}

function contactList(answer: MauticAnswer, path: string): Array<Record<string, unknown>> {
  const json = answer.json;
  const list = isObject(json) ? json.contacts : undefined;
  if (!isObject(list) && !Array.isArray(list)) {
    throw new MauticResponseError('no contact list', {
      method: 'GET',
      path,
      status: answer.status,
      retryable: true,
    });
  }
  return Object.values(list).filter(isObject);
}

/** A field's value in a contact as Mautic lists it: `fields.all`, else the field groups. */
function fieldValue(record: Record<string, unknown>, field: string): unknown {
  const fields = isObject(record.fields) ? record.fields : {};
  if (isObject(fields.all) && field in fields.all) return fields.all[field];
  for (const group of Object.values(fields)) {
    const entry = isObject(group) ? group[field] : undefined;
    if (isObject(entry) && 'value' in entry) return entry.value;
  }
  return record[field];
}

/**
 * `POST /api/segments/{id}/contacts/add`: one call for many contacts. Mautic answers each
 * contact `success` true or false (no such contact, or not editable); an unknown segment is a
 * 404 for all of them.
 */
export async function addToSegment(
  send: ApiSend,
  segmentId: number,
  contactIds: ReadonlyArray<number>,
  call: CallOptions,
): Promise<ItemResult[]> {
  const path = `/api/segments/${positive(segmentId)}/contacts/add`;
  if (contactIds.length === 0) return [];
  let answer: MauticAnswer;
  try {
    answer = await send('POST', path, call, { body: JSON.stringify({ ids: contactIds }) });
  } catch (error) {
    const refused = refusal(error, () => `segment ${segmentId}`);
    if (refused) return contactIds.map(() => refused);
    throw error;
  }
  const details = isObject(answer.json) ? answer.json.details : undefined;
  return contactIds.map((id): ItemResult => {
    const entry = isObject(details) ? details[String(id)] : undefined;
    if (!isObject(entry) || typeof entry.success !== 'boolean') {
      throw new MauticResponseError(`no result for contact ${id}`, {
        method: 'POST',
        path,
        status: answer.status,
        retryable: true,
      });
    }
    return entry.success
      ? { kind: 'delivered', status: 200, id }
      : {
          kind: 'rejected',
          status: 404,
          message: `Mautic found no contact ${id} to add to segment ${segmentId} (or may not edit it)`,
        };
  });
}

const BULK_LINKS_PATH = '/api/companies/batch/addcontacts';

/**
 * `POST /api/companies/batch/addcontacts` (Mautic 7): many contact–company links in one call.
 * Mautic answers 200 with a result per pair, in the order sent: 200 linked (or already linked),
 * 404 "Contact not found" or "Company not found", 403 "Access denied" (a contact the API user
 * may not edit), 500 for a contact whose linking failed. A refusal names the pair it is about.
 */
export async function linkCompanies(
  send: ApiSend,
  links: ReadonlyArray<CompanyLink>,
  call: CallOptions,
): Promise<ItemResult[]> {
  if (links.length === 0) return [];
  const assignments = links.map(({ contactId, companyId }) => ({
    contactId: positive(contactId),
    companyId: positive(companyId),
  }));
  const answer = await send('POST', BULK_LINKS_PATH, call, {
    body: JSON.stringify({ assignments }),
  });
  const results = isObject(answer.json) ? answer.json.results : undefined;
  return assignments.map(({ contactId, companyId }, index): ItemResult => {
    const entry = Array.isArray(results) ? results[index] : undefined;
    const status = isObject(entry) ? entry.status : undefined;
    const same = isObject(entry) && entry.contactId === contactId && entry.companyId === companyId;
    if (!same || typeof status !== 'number' || !Number.isInteger(status)) {
      throw new MauticResponseError(`no result for the link of contact ${contactId}`, {
        method: 'POST',
        path: BULK_LINKS_PATH,
        status: answer.status,
        retryable: true,
      });
    }
    if (status === 200) return { kind: 'delivered', status, id: contactId };
    const said =
      typeof entry.message === 'string' && entry.message !== '' ? entry.message : 'Refused';
    const message = `${said} (contact ${contactId}, company ${companyId})`;
    return { kind: 'rejected', status, message };
  });
}

/** The path of each action that has an endpoint per contact (reference §11.2–11.6). */
function actionPath(action: ContactAction, contactId: number, fields: ActionFields): string {
  const contact = positive(contactId);
  switch (action) {
    case 'addToSegment':
      return `/api/segments/${positive(fields.segmentId)}/contact/${contact}/add`;
    case 'removeFromSegment':
      return `/api/segments/${positive(fields.segmentId)}/contact/${contact}/remove`;
    case 'addToCampaign':
      return `/api/campaigns/${positive(fields.campaignId)}/contact/${contact}/add`;
    case 'removeFromCampaign':
      return `/api/campaigns/${positive(fields.campaignId)}/contact/${contact}/remove`;
    case 'linkCompany':
      return `/api/companies/${positive(fields.companyId)}/contact/${contact}/add`;
    case 'unlinkCompany':
      return `/api/companies/${positive(fields.companyId)}/contact/${contact}/remove`;
    case 'addPoints': {
      const points = fields.points ?? 0;
      if (!Number.isSafeInteger(points) || points === 0) {
        throw new TypeError('Expected `points` to be a non-zero integer.');
      }
      return `/api/contacts/${contact}/points/${points > 0 ? 'plus' : 'minus'}/${Math.abs(points)}`;
    }
    default:
      throw new TypeError(`${action} has no endpoint per contact; it goes through batch edit.`);
  }
}

/** One action on one contact: 200 is done; a 400 or 404 about the contact or target is refused. */
export async function contactAction(
  send: ApiSend,
  action: ContactAction,
  contactId: number,
  fields: ActionFields,
  call: CallOptions,
): Promise<ItemResult> {
  const path = actionPath(action, contactId, fields);
  try {
    await send('POST', path, call, {});
  } catch (error) {
    const refused = refusal(error, (said) => notFound(action, contactId, fields, said));
    if (refused) return refused;
    throw error;
  }
  return { kind: 'delivered', status: 200, id: contactId };
}

/**
 * A whole-call 400 or 404 of these endpoints is about the item: an unknown segment, campaign,
 * company or contact, a points operator Mautic does not know. Mautic's status and message go to
 * the dead letter; a 404's detail first says which record Mautic did not find (`whatWasNotFound`),
 * by id.
 */
function refusal(
  error: unknown,
  whatWasNotFound: (mauticMessage: string | undefined) => string,
): ItemResult | undefined {
  if (!(error instanceof MauticPermanentError)) return undefined;
  if (error.status !== 400 && error.status !== 404) return undefined;
  const said = error.mauticMessage ?? `Mautic answered ${error.status}`;
  return {
    kind: 'rejected',
    status: error.status,
    message:
      error.status === 404
        ? `Mautic found no ${whatWasNotFound(error.mauticMessage)} (${said})`
        : said,
  };
}

/** What each action's target is, by the id field that names it. */
const TARGETS: Partial<Record<ContactAction, [string, keyof ActionFields]>> = {
  addToSegment: ['segment', 'segmentId'],
  removeFromSegment: ['segment', 'segmentId'],
  addToCampaign: ['campaign', 'campaignId'],
  removeFromCampaign: ['campaign', 'campaignId'],
  linkCompany: ['company', 'companyId'],
  unlinkCompany: ['company', 'companyId'],
};

/**
 * The actions whose controller answers the same "Item was not found." for an unknown contact as
 * for an unknown target (CampaignApiController's add, CompanyApiController's remove, reference
 * §11): their 404 cannot tell the two apart.
 */
const SAME_ANSWER_FOR_BOTH = new Set<ContactAction>(['addToCampaign', 'unlinkCompany']);

/**
 * Which record a 404 of an action's endpoint is about, by id: Mautic's controllers answer
 * "Contact not found." for the contact and "Item was not found." for the target (the segment,
 * campaign or company), but for the two actions that answer the latter for both.
 */
function notFound(
  action: ContactAction,
  contactId: number,
  fields: ActionFields,
  mauticMessage: string | undefined,
): string {
  const contact = `contact ${contactId}`;
  const target = TARGETS[action];
  if (target === undefined || mauticMessage === 'Contact not found.') return contact;
  const named = `${target[0]} ${fields[target[1]] as number}`;
  if (SAME_ANSWER_FOR_BOTH.has(action))
    return `${named} or no ${contact} (its answer does not say which)`;
  return named;
}

function positive(id: number | undefined): number {
  if (typeof id !== 'number' || !Number.isSafeInteger(id) || id <= 0) {
    throw new TypeError('Expected an id to be a positive integer.');
  }
  return id;
}

function toId(value: unknown): number | undefined {
  const id = typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : value;
  return typeof id === 'number' && Number.isSafeInteger(id) && id > 0 ? id : undefined;
}
