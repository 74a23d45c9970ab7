import { GetSecretValueCommand, type SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import type { FetchLike } from '../../functions/core/ports.ts';
import { SetupError } from './errors.ts';

/*
 * What `mautic --local` reads of the local stack's Mautic, through Mautic's own REST API (the
 * shapes of docs/mautic.md §5.4 and §7), with the access token the local refresher stored: the
 * command never asks for a token of its own, so it never refreshes one (the refresher is the
 * single writer of tokens).
 */

/** How long Mautic has to answer one call. */
const TIMEOUT_MS = 10_000;

/** A contact as the command shows it: its fields with a value, never a token. */
export interface ContactView {
  id: number;
  email: string | null;
  firstname: string | null;
  lastname: string | null;
  points: number;
  tags: string[];
  doNotContact: Array<{ channel: string; reason: string }>;
  /** Every other field with a value (custom fields such as `crm_id` among them). */
  fields: Record<string, string | number | boolean>;
}

/** A segment, campaign or company: its id and name. */
export interface NamedView {
  id: number;
  name: string;
}

/** One contact with its segments, campaigns and companies. */
export interface ContactDetail extends ContactView {
  segments: NamedView[];
  campaigns: NamedView[];
  companies: NamedView[];
}

/** Mautic's Do Not Contact reasons (DoNotContact::UNSUBSCRIBED, BOUNCED, MANUAL). */
const DNC_REASONS: Record<number, string> = { 1: 'unsubscribed', 2: 'bounced', 3: 'manual' };

/** The local stack's Mautic: where it answers and the token to call it with. */
export interface MauticReader {
  /** Mautic's JSON answer to GET `path`; undefined for a 404 (no such record). */
  get(path: string, query?: Record<string, string>): Promise<unknown>;
}

/**
 * A reader of the Mautic at `baseUrl` with the access token the local stack holds. No token yet,
 * or an expired one, is a SetupError that names the command that gets one.
 */
export async function mauticReader(
  baseUrl: string,
  token: { secrets: SecretsManagerClient; secretId: string; now: number },
  fetcher: FetchLike,
): Promise<MauticReader> {
  const accessToken = await storedAccessToken(token);
  const host = new URL(baseUrl).host;
  return {
    async get(path, query = {}) {
      const url = `${baseUrl.replace(/\/+$/, '')}${path}?${new URLSearchParams(query)}`;
      let response: Response;
      try {
        response = await fetcher(url, {
          headers: { authorization: `Bearer ${accessToken}`, accept: 'application/json' },
          signal: AbortSignal.timeout(TIMEOUT_MS),
        });
      } catch {
        throw new SetupError(
          `Mautic does not answer at ${host}: is "npm start" still running (with the MAUTIC_BASE_URL it was given)?`,
        );
      }
      const text = await response.text();
      if (response.status === 401)
        throw new SetupError(
          'Mautic refused the stored access token: get a new one with "npx mautic-relay refresh --local", then look again.',
        );
      if (response.status === 404) return undefined;
      if (!response.ok) throw new Error(`Mautic answered HTTP ${response.status} to GET ${path}`);
      try {
        return JSON.parse(text) as unknown;
      } catch {
        throw new Error(`Mautic answered GET ${path} with something that is not JSON`);
      }
    },
  };
}

async function storedAccessToken(token: {
  secrets: SecretsManagerClient;
  secretId: string;
  now: number;
}): Promise<string> {
  const { SecretString } = await token.secrets.send(
    new GetSecretValueCommand({ SecretId: token.secretId }),
  );
  let stored: { accessToken?: unknown; accessTokenExpiresAt?: unknown } = {};
  try {
    stored = JSON.parse(SecretString ?? '{}') ?? {};
  } catch {
    // An unreadable secret holds no token: said below.
  }
  const expiresAt = Date.parse(String(stored.accessTokenExpiresAt));
  if (typeof stored.accessToken !== 'string' || stored.accessToken === '')
    throw new SetupError(
      'The local stack holds no Mautic access token yet: run "npx mautic-relay refresh --local", which says what stops it.',
    );
  if (!(expiresAt > token.now))
    throw new SetupError(
      'The local stack\'s Mautic access token has expired: run "npx mautic-relay refresh --local", then look again.',
    );
  return stored.accessToken;
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** A list Mautic gives as an array or as an object keyed by id (docs/mautic.md §5.4). */
function entries(value: unknown): unknown[] {
  if (Array.isArray(value)) return value;
  return isObject(value) ? Object.values(value) : [];
}

const text = (value: unknown): string | null =>
  typeof value === 'string' && value !== '' ? value : null;

/** A contact of Mautic's API (`{id, points, fields: {all}, tags, doNotContact}`). */
function contactView(raw: unknown): ContactView | undefined {
  if (!isObject(raw)) return undefined;
  const all = isObject(raw.fields) && isObject(raw.fields.all) ? raw.fields.all : {};
  const fields: ContactView['fields'] = {};
  for (const [alias, value] of Object.entries(all)) {
    if (['id', 'email', 'firstname', 'lastname', 'points'].includes(alias)) continue;
    if (typeof value === 'string' ? value !== '' : typeof value === 'number' && value !== 0)
      fields[alias] = value as string | number;
    else if (typeof value === 'boolean') fields[alias] = value;
  }
  return {
    id: Number(raw.id),
    email: text(all.email),
    firstname: text(all.firstname),
    lastname: text(all.lastname),
    points: Number(raw.points ?? all.points ?? 0) || 0,
    tags: entries(raw.tags).flatMap((tag) =>
      isObject(tag) && typeof tag.tag === 'string' ? [tag.tag] : [],
    ),
    doNotContact: entries(raw.doNotContact).flatMap((entry) =>
      isObject(entry)
        ? [
            {
              channel: String(entry.channel),
              reason: DNC_REASONS[Number(entry.reason)] ?? String(entry.reason),
            },
          ]
        : [],
    ),
    fields,
  };
}

/** Contacts matching Mautic's search syntax (`bob`, `email:bob@example.com`), in id order. */
export async function listContacts(
  mautic: MauticReader,
  search: string,
  limit: number,
): Promise<{ total: number; contacts: ContactView[] }> {
  const answer = await mautic.get('/api/contacts', {
    search,
    limit: String(limit),
    orderBy: 'id',
    orderByDir: 'ASC',
  });
  const body = isObject(answer) ? answer : {};
  const contacts = entries(body.contacts).flatMap((raw) => contactView(raw) ?? []);
  return { total: Number(body.total ?? contacts.length) || 0, contacts };
}

/** One contact by id or by email, with its memberships; undefined when Mautic has none. */
export async function contactDetail(
  mautic: MauticReader,
  idOrEmail: string,
): Promise<ContactDetail | undefined> {
  const contact = /^\d+$/.test(idOrEmail)
    ? await contactById(mautic, idOrEmail)
    : await contactByEmail(mautic, idOrEmail);
  if (contact === undefined) return undefined;
  const path = `/api/contacts/${contact.id}`;
  const [segments, campaigns, companies] = await Promise.all([
    mautic.get(`${path}/segments`),
    mautic.get(`${path}/campaigns`),
    mautic.get(`${path}/companies`),
  ]);
  return {
    ...contact,
    segments: named(isObject(segments) ? segments.lists : undefined, 'name'),
    campaigns: named(isObject(campaigns) ? campaigns.campaigns : undefined, 'name'),
    companies: named(isObject(companies) ? companies.companies : undefined, 'companyname'),
  };
}

async function contactById(mautic: MauticReader, id: string): Promise<ContactView | undefined> {
  const answer = await mautic.get(`/api/contacts/${id}`);
  return contactView(isObject(answer) ? answer.contact : undefined);
}

async function contactByEmail(
  mautic: MauticReader,
  email: string,
): Promise<ContactView | undefined> {
  // `where … eq` compares the whole address; `search=email:` would match it as a prefix.
  const answer = await mautic.get('/api/contacts', {
    'where[0][col]': 'email',
    'where[0][expr]': 'eq',
    'where[0][val]': email,
    limit: '1',
  });
  return entries(isObject(answer) ? answer.contacts : undefined)
    .map(contactView)
    .find((contact) => contact !== undefined);
}

/** Segments, campaigns or companies, as their list route gives them. */
export async function listNamed(
  mautic: MauticReader,
  kind: 'segments' | 'campaigns' | 'companies',
  limit: number,
): Promise<NamedView[]> {
  const answer = await mautic.get(`/api/${kind}`, { limit: String(limit) });
  const body = isObject(answer) ? answer : {};
  return kind === 'segments'
    ? named(body.lists, 'name')
    : kind === 'campaigns'
      ? named(body.campaigns, 'name')
      : named(body.companies, 'companyname');
}

/** Id and name of each entry: its `key`, or a company's `fields.all.companyname`. */
function named(list: unknown, key: string): NamedView[] {
  return entries(list)
    .flatMap((raw) => {
      if (!isObject(raw)) return [];
      const all = isObject(raw.fields) && isObject(raw.fields.all) ? raw.fields.all : {};
      const name = text(raw[key]) ?? text(all[key]) ?? '';
      return [{ id: Number(raw.id ?? raw.company_id), name }];
    })
    .sort((a, b) => a.id - b.id);
}
