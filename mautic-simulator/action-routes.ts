/**
 * The routes of reference §11 beside the standard ones: segment, campaign and company
 * memberships, Do Not Contact, points, and a contact's lists of memberships.
 */
import { batchAddContacts } from './company-batch-links.ts';
import { addDncAction, adjustPointsAction, removeDncAction } from './contact-actions.ts';
import {
  addContactsToSegment,
  campaignContactAction,
  companyContactAction,
  contactMembershipsAction,
  segmentContactAction,
} from './memberships.ts';
import type { EntityName, EntityState } from './store.ts';
import type { Reply, SimRequest } from './symfony.ts';

/** Symfony's path parameters are raw-url-decoded. */
function pathParam(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

type AddOrRemove = 'add' | 'remove';

interface ActionRoute {
  entity: EntityName;
  /** Matched on the path after `/api/<entity>/`; each group is a path parameter. */
  pattern: RegExp;
  /** POST only (Mautic's `'method' => 'POST'`); the reading routes take any method. */
  post: boolean;
  /** Undefined: a route this Mautic line does not have (the catch-all 404). */
  run(state: EntityState, params: string[], req: SimRequest): Reply | undefined;
}

/** The membership, DNC and points routes of reference §11, and 7.x's batch company links. */
const ACTION_ROUTES: readonly ActionRoute[] = [
  {
    entity: 'contacts',
    pattern: /^([^/]+)\/dnc\/([^/]+)\/add$/,
    post: true,
    run: (state, [id = '', channel = ''], req) => addDncAction(state, id, channel, req.body),
  },
  {
    entity: 'contacts',
    pattern: /^([^/]+)\/dnc\/([^/]+)\/remove$/,
    post: true,
    run: (state, [id = '', channel = '']) => removeDncAction(state, id, channel),
  },
  {
    entity: 'contacts',
    pattern: /^([^/]+)\/points\/([^/]+)\/([^/]+)$/,
    post: true,
    run: (state, [id = '', operator = '', delta = '']) =>
      adjustPointsAction(state, id, operator, delta),
  },
  {
    entity: 'contacts',
    pattern: /^([^/]+)\/(segments|campaigns|companies)$/,
    post: false,
    run: (state, [id = '', kind]) =>
      contactMembershipsAction(state, id, kind as 'segments' | 'campaigns' | 'companies'),
  },
  {
    entity: 'segments',
    pattern: /^([^/]+)\/contacts\/add$/,
    post: true,
    run: (state, [id = ''], req) => addContactsToSegment(state, id, req.body),
  },
  {
    entity: 'segments',
    pattern: /^([^/]+)\/contact\/([^/]+)\/(add|remove)$/,
    post: true,
    run: (state, [id = '', contact = '', action]) =>
      segmentContactAction(state, id, contact, action as AddOrRemove),
  },
  {
    entity: 'campaigns',
    pattern: /^([^/]+)\/contact\/([^/]+)\/(add|remove)$/,
    post: true,
    run: (state, [id = '', contact = '', action]) =>
      campaignContactAction(state, id, contact, action as AddOrRemove),
  },
  {
    entity: 'companies',
    pattern: /^batch\/addcontacts$/,
    post: true,
    run: (state, _params, req) => batchAddContacts(state, req.body),
  },
  {
    entity: 'companies',
    pattern: /^([^/]+)\/contact\/([^/]+)\/(add|remove)$/,
    post: true,
    run: (state, [id = '', contact = '', action]) =>
      companyContactAction(state, id, contact, action as AddOrRemove),
  },
];

/** The reply of the §11 route the path matches, or undefined when it matches none. */
export function actionRoute(state: EntityState, entity: EntityName, rest: string, req: SimRequest) {
  for (const route of ACTION_ROUTES) {
    const match = route.entity === entity ? route.pattern.exec(rest) : null;
    if (match === null || (route.post && req.method !== 'POST')) continue;
    return route.run(state, match.slice(1).map(pathParam), req);
  }
  return undefined;
}
