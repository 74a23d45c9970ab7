import type { Command, Values } from './command.ts';
import { awsCall, EXIT, SetupError, UsageError } from './errors.ts';
import {
  type ContactDetail,
  type ContactView,
  contactDetail,
  listContacts,
  listNamed,
  mauticReader,
  type NamedView,
} from './mautic-records.ts';
import { wholeNumber } from './options.ts';
import { closeTarget, localTarget } from './target.ts';

const KINDS = ['contacts', 'contact', 'segments', 'campaigns', 'companies'] as const;
type Kind = (typeof KINDS)[number];

export const mauticCommand: Command = {
  name: 'mautic',
  usage:
    'mautic --local (contacts [--search TEXT] | contact EMAIL|ID | segments | campaigns | companies) [--limit N] [--json]',
  summary: "what the local stack's Mautic holds: contacts, segments, campaigns, companies",
  details: `Reads the Mautic the running "npm start" delivers to (its embedded simulator, or the
MAUTIC_BASE_URL it was given) through Mautic's API, with the access token the local stack holds
(never printed): contacts (id, email, name, points, tags, Do Not Contact; --search takes Mautic's
search syntax, e.g. "bob" or "email:bob@example.com"), one contact with its other fields and its
segments, campaigns and companies, or the segments, campaigns and companies with their ids. It
prints what the contacts hold, as the command is for looking at them. A deployed environment's
Mautic is not read: look there with Mautic itself.
  --local      the running "npm start"
  --search S   contacts matching Mautic's search S
  --limit N    at most N records (default 100)
  --json       print one JSON document on stdout`,
  options: {
    env: { type: 'string' },
    local: { type: 'boolean', default: false },
    search: { type: 'string' },
    limit: { type: 'string', default: '100' },
    json: { type: 'boolean', default: false },
  },
  positionals: 2,
  run: async (values, positionals, io) => {
    const [kind, which] = checkArguments(values, positionals);
    const limit = wholeNumber(values.limit, '--limit', 1, 10_000);
    return awsCall('local', io, async () => {
      const target = localTarget(io.env);
      try {
        if (target.mauticUrl === undefined)
          throw new SetupError(
            'The running "npm start" is of an earlier version, which does not say where its Mautic is: stop it and start it again.',
          );
        const mautic = await mauticReader(
          target.mauticUrl,
          { secrets: target.secrets, secretId: target.tokenSecretId, now: io.now() },
          fetch,
        );
        const found = await look(mautic, kind, which, { search: values.search, limit });
        if (values.json) io.stdout(JSON.stringify(found.json));
        else for (const line of found.lines) io.stdout(line);
        return found.ok ? EXIT.ok : EXIT.failed;
      } finally {
        closeTarget(target);
      }
    });
  },
};

/** The kind to show and, for `contact`, which one; everything checked before any call. */
function checkArguments(values: Values, positionals: string[]): [Kind, string | undefined] {
  if (values.env !== undefined)
    throw new UsageError(
      "mautic reads only the local stack's Mautic (--local): a deployed environment's Mautic is read with Mautic itself (its contacts, segments and campaigns pages, or its API).",
    );
  if (!values.local) throw new UsageError('mautic needs --local (the running "npm start")');
  const [kind, which] = positionals;
  if (!KINDS.includes(kind as Kind))
    throw new UsageError(`mautic needs one of: ${KINDS.join(', ')} (contact takes an EMAIL or ID)`);
  if ((kind === 'contact') !== (which !== undefined))
    throw new UsageError(
      kind === 'contact'
        ? 'mautic contact needs the EMAIL or ID of a contact'
        : `mautic ${kind} takes no argument`,
    );
  if (values.search !== undefined && kind !== 'contacts')
    throw new UsageError('--search goes with mautic contacts');
  return [kind as Kind, which];
}

interface Found {
  ok: boolean;
  json: unknown;
  lines: string[];
}

async function look(
  mautic: Awaited<ReturnType<typeof mauticReader>>,
  kind: Kind,
  which: string | undefined,
  options: { search: Values[string]; limit: number },
): Promise<Found> {
  if (kind === 'contacts') {
    const search = typeof options.search === 'string' ? options.search : '';
    const { total, contacts } = await listContacts(mautic, search, options.limit);
    return {
      ok: true,
      json: { total, contacts },
      lines: [count(total, 'contact', contacts.length), ...contacts.map(contactLine)],
    };
  }
  if (kind === 'contact') {
    const contact = await contactDetail(mautic, which ?? '');
    if (contact === undefined)
      return {
        ok: false,
        json: { contact: null },
        lines: [`Mautic has no contact ${which}.`],
      };
    return { ok: true, json: { contact }, lines: detailLines(contact) };
  }
  const records = await listNamed(mautic, kind, options.limit);
  return {
    ok: true,
    json: { [kind]: records },
    lines: [
      count(records.length, SINGULAR[kind]),
      ...records.map(({ id, name }) => `  ${String(id).padStart(4)}  ${name}`),
    ],
  };
}

const SINGULAR = { segments: 'segment', campaigns: 'campaign', companies: 'company' } as const;

/** "3 contacts", "1 segment", "2 contacts (100 shown)". */
function count(total: number, noun: string, shown = total): string {
  const plural = noun.endsWith('y') ? `${noun.slice(0, -1)}ies` : `${noun}s`;
  return `${total} ${total === 1 ? noun : plural}${shown < total ? ` (${shown} shown)` : ''}`;
}

const nameOf = (contact: ContactView) =>
  [contact.firstname, contact.lastname].filter((part) => part !== null).join(' ');

const dnc = (contact: ContactView) =>
  contact.doNotContact.map(({ channel, reason }) => `${channel} (${reason})`).join(', ');

function contactLine(contact: ContactView): string {
  const parts = [
    `  ${String(contact.id).padStart(4)}  ${contact.email ?? '(no email)'}`,
    nameOf(contact),
    `points ${contact.points}`,
    contact.tags.length > 0 ? `tags ${contact.tags.join(', ')}` : '',
    contact.doNotContact.length > 0 ? `do not contact: ${dnc(contact)}` : '',
  ];
  return parts.filter((part) => part !== '').join('  ');
}

function detailLines(contact: ContactDetail): string[] {
  const list = (items: NamedView[]) =>
    items.length === 0 ? 'none' : items.map(({ id, name }) => `${id} ${name}`).join(', ');
  const fields = Object.entries(contact.fields).map(([alias, value]) => `${alias} ${value}`);
  return [
    `contact ${contact.id}: ${contact.email ?? '(no email)'}${nameOf(contact) ? `, ${nameOf(contact)}` : ''}`,
    `  points          ${contact.points}`,
    `  tags            ${contact.tags.join(', ') || 'none'}`,
    `  do not contact  ${dnc(contact) || 'none'}`,
    `  segments        ${list(contact.segments)}`,
    `  campaigns       ${list(contact.campaigns)}`,
    `  companies       ${list(contact.companies)}`,
    `  other fields    ${fields.join(', ') || 'none'}`,
  ];
}
