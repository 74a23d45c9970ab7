/**
 * The names of Mautic's that the relay checks, as plain patterns: the configuration reads them
 * (functions/shared/config.ts) without importing the event schemas of events.ts, which the
 * refresher would otherwise build at every cold start for nothing.
 */

/** A Mautic API path name (contract §1): `contacts`, `companies`, `segments`, … */
export const ENTITY_PATTERN = /^[a-z][a-zA-Z]{1,63}$/;
/** A contact field alias as Mautic makes them (`email`, `crm_id`): what `match` may name. */
export const CONTACT_FIELD_PATTERN = /^[a-z][a-z0-9_]{0,63}$/;
