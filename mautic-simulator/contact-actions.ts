/**
 * Do Not Contact and points (reference §11.5, §11.6): the endpoints of LeadApiController and
 * PointApiController, and the `doNotContact` key of contact items in batch new and edit.
 */
import { phpEmpty, phpIntval, sanitizeSpecialChars } from './php.ts';
import { contactPoints, present } from './present.ts';
import {
  addDncEntry,
  type EntityState,
  getEntity,
  linksOf,
  type StoredRecord,
  touch,
} from './store.ts';
import {
  bodyParams,
  type DecodedBody,
  exceptionError,
  PhpError,
  type Reply,
  returnError,
  view,
} from './symfony.ts';

const UNSUBSCRIBED = 1;
const MANUAL = 3;

/** A channel as addDncForContact takes it: a name, or a name with a channel id. */
type Channel = string | { name: string; id: number };

/**
 * DoNotContact::addDncForContact. No entry for the channel: one is added. An entry with another
 * reason: it takes the new reason and comments, unless it says the contact unsubscribed (only
 * the contact may lift that), or a channel id was given (then no entry compares equal).
 */
function addDnc(
  state: EntityState,
  contact: StoredRecord,
  channel: Channel,
  reason: number,
  comments: string,
): void {
  const name = typeof channel === 'string' ? channel : channel.name;
  const entries = linksOf(state, contact.id).doNotContact;
  const current = entries.find((entry) => entry.channel === name && entry.reason !== 0);
  if (current === undefined) {
    const channelId = typeof channel === 'string' ? null : channel.id;
    addDncEntry(state, contact, { channel: name, reason, comments, channelId });
    touch(state, contact);
  } else if (current.reason !== reason) {
    const entry = entries.find(
      (candidate) => candidate.reason !== UNSUBSCRIBED && candidate.channel === channel,
    );
    if (entry === undefined) return;
    Object.assign(entry, { reason, comments, addedAt: state.now() });
    touch(state, contact);
  }
}

/** DoNotContact::removeDncForContact: the first entry of the channel goes. */
function removeDnc(state: EntityState, contact: StoredRecord, channel: string): boolean {
  const entries = linksOf(state, contact.id).doNotContact;
  const index = entries.findIndex((entry) => entry.channel === channel);
  if (index === -1) return false;
  entries.splice(index, 1);
  touch(state, contact);
  return true;
}

/**
 * LeadApiController::preSaveEntity's "batch DNC settings", for an item whose form was valid:
 * channel `email` and reason 3 unless given; reason 0 (or what casts to 0) removes the channel's
 * entry of an existing contact; a new contact gets every entry as given. Comments are not
 * cleaned here, unlike the endpoint's. An item that is not an array stops PHP (a 500).
 */
export function applyItemDnc(
  state: EntityState,
  contact: StoredRecord,
  items: unknown,
  isNew: boolean,
): void {
  if (phpEmpty(items) || items === null || typeof items !== 'object') return;
  for (const item of Object.values(items)) {
    if (item === null || typeof item !== 'object') throw new PhpError('DNC item is not an array');
    const dnc = item as Record<string, unknown>;
    const channel = phpEmpty(dnc.channel) ? 'email' : dnc.channel;
    if (typeof channel === 'object') throw new PhpError('DNC channel is not a string');
    const name = String(channel);
    const comments = phpEmpty(dnc.comments) ? '' : String(dnc.comments);
    const reason = phpIntval('reason' in dnc ? dnc.reason : MANUAL);
    if (reason === 0) {
      if (!isNew) removeDnc(state, contact, name);
    } else if (isNew) {
      addDncEntry(state, contact, { channel: name, reason, comments });
    } else {
      addDnc(state, contact, name, reason, comments);
    }
  }
}

/** Symfony's InputBag::get: a non-scalar parameter is a bad request (a generic 400). */
function scalarParam(params: Record<string, unknown>, key: string): unknown {
  const value = params[key];
  if (value !== null && typeof value === 'object') throw new BadRequest();
  return value;
}

class BadRequest extends Error {}

/** POST /api/contacts/{id}/dnc/{channel}/add (LeadApiController::addDncAction). */
export function addDncAction(
  state: EntityState,
  id: string,
  channel: string,
  body: DecodedBody,
): Reply {
  const contact = getEntity(state, 'contacts', id);
  if (contact === undefined) return returnError(404, 'Item was not found.');
  const params = bodyParams(body);
  try {
    const channelId = phpIntval(scalarParam(params, 'channelId'));
    const reason = 'reason' in params ? phpIntval(scalarParam(params, 'reason')) : MANUAL;
    if (reason === 0) {
      return returnError(400, 'Invalid reason code given', [
        'Reason code needs to be an integer and higher than 0.',
      ]);
    }
    const comments = sanitizeSpecialChars(stringParam(scalarParam(params, 'comments')));
    addDnc(
      state,
      contact,
      channelId === 0 ? channel : { name: channel, id: channelId },
      reason,
      comments,
    );
  } catch (error) {
    if (error instanceof BadRequest) return exceptionError(400);
    throw error;
  }
  return view(200, { contact: present(state, 'contacts', contact) });
}

/** PHP's string conversion of a scalar request value (null is ''). */
function stringParam(value: unknown): string {
  if (value === undefined || value === null || value === false) return '';
  if (value === true) return '1';
  return String(value);
}

/** POST /api/contacts/{id}/dnc/{channel}/remove (LeadApiController::removeDncAction). */
export function removeDncAction(state: EntityState, id: string, channel: string): Reply {
  const contact = getEntity(state, 'contacts', id);
  if (contact === undefined) return returnError(404, 'Item was not found.');
  const recordFound = removeDnc(state, contact, channel);
  return view(200, { recordFound, contact: present(state, 'contacts', contact) });
}

/**
 * POST /api/contacts/{leadId}/points/{operator}/{delta} (PointApiController, Lead::adjustPoints):
 * a delta that casts to 0 changes nothing before the operator is looked at; MySQL rounds a
 * division into the integer column (half away from zero). Every call applies again.
 */
export function adjustPointsAction(
  state: EntityState,
  leadId: string,
  operator: string,
  delta: string,
): Reply {
  const contact = getEntity(state, 'contacts', leadId);
  if (contact === undefined) return returnError(404, 'Contact not found.');
  const change = phpIntval(delta);
  if (change !== 0) {
    const points = contactPoints(contact);
    const apply: Record<string, () => number> = {
      plus: () => points + change,
      minus: () => points - change,
      times: () => points * change,
      divide: () => Math.sign(points / change) * Math.round(Math.abs(points / change)),
    };
    const result = Object.hasOwn(apply, operator) ? apply[operator]?.() : undefined;
    if (result === undefined) return returnError(400, 'Invalid operator');
    contact.fields = { ...contact.fields, points: result };
    touch(state, contact);
  }
  return view(200, { success: 1 });
}
