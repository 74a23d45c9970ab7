/**
 * The form validation of one batch item, as Mautic 5.1.1's processForm reports it: the
 * violations of the entity's required fields (entities.ts), of the EmailAddress constraint on a
 * contact's `email` and a company's `companyemail` (docs/mautic.md §5.3), and of
 * UniqueCustomField on the unique identifier field (a contact's `email`, a company's
 * `companyname`), which carries code 422 and so makes the item's status 422 instead of 400.
 */
import { ENTITIES, type EntityName } from './entities.ts';
import { isValidEmail } from './php.ts';
import { type EntityState, holdersOf, type StoredRecord } from './store.ts';

/** The error an invalid item gets: returnError's body in batch mode (§4.3). */
export interface ItemError {
  code: 400 | 422;
  message: string;
  details: Record<string, string[]>;
  type: null;
}

const EMAIL_FIELDS: Partial<Record<EntityName, string>> = {
  contacts: 'email',
  companies: 'companyemail',
};

/** Symfony's NotBlank: null, '', false and [] are blank (0 and '0' are not). */
function isBlank(value: unknown): boolean {
  return (
    value === undefined ||
    value === null ||
    value === '' ||
    value === false ||
    (Array.isArray(value) && value.length === 0)
  );
}

/** EmailAddressValidator: FILTER_VALIDATE_EMAIL, then none of `^ & * %`. */
function emailViolation(value: unknown): string | undefined {
  if (isBlank(value)) return undefined;
  const email = String(value);
  if (!isValidEmail(email)) return `${email} is invalid.`;
  if (/[\^&*%]/.test(email)) return `${email} has characters not allowed in email addresses.`;
  return undefined;
}

/**
 * UniqueCustomFieldValidator::isValid: the value is free when no record holds it, or only the
 * record being saved does; two holders make it taken even for one of them.
 */
function uniqueViolation(
  state: EntityState,
  entity: EntityName,
  record: StoredRecord | undefined,
  result: Record<string, unknown>,
): string | undefined {
  const field = ENTITIES[entity].unique;
  const value = field === undefined ? undefined : result[field];
  if (field === undefined || typeof value !== 'string' || value === '') return undefined;
  const holders = holdersOf(state, entity, field, value);
  const free = holders.length === 0 || (holders.length === 1 && holders[0] === record);
  return free ? undefined : field;
}

/**
 * The item's error, or undefined when its form is valid. `submitted` is what the item sent
 * (the format of an email is checked only when sent), `result` the fields it would leave,
 * `record` the stored record it edits (undefined for a create).
 */
export function validateItem(
  state: EntityState,
  entity: EntityName,
  record: StoredRecord | undefined,
  submitted: Record<string, unknown>,
  result: Record<string, unknown>,
): ItemError | undefined {
  // FormErrorMessagesTrait: one entry per field, a later message for a field replacing it.
  const details: Record<string, string[]> = {};
  let unique = false;
  const emailField = EMAIL_FIELDS[entity];
  const badEmail = emailField === undefined ? undefined : emailViolation(submitted[emailField]);
  if (emailField !== undefined && badEmail !== undefined) details[emailField] = [badEmail];
  for (const [field, message] of ENTITIES[entity].required) {
    if (isBlank(result[field])) details[field] = [message];
  }
  const taken = badEmail === undefined ? uniqueViolation(state, entity, record, result) : undefined;
  if (taken !== undefined && details[taken] === undefined) {
    details[taken] = ['This field must be unique.'];
    unique = true;
  }
  const fields = Object.keys(details);
  if (fields.length === 0) return undefined;
  const message = fields.map((field) => `${field}: ${details[field]?.join(', ')}`).join(', ');
  return { code: unique ? 422 : 400, message, details, type: null };
}
