import { CredentialError } from '../errors.ts';

/** One sender credential of the ingest: a Standard Webhooks secret or an API key. */
export interface SenderCredential {
  /** Stable, never derived from the value: safe to print and to pass to `senders remove`. */
  id: string;
  kind: 'webhook_secret' | 'api_key';
  value: string;
  /** ISO 8601; null for credentials written before the relay recorded it. */
  createdAt: string | null;
}

/** The id of the secret the stack generates at deploy time (`generatedSecret`). */
const GENERATED_SENDER_ID = 'generated';

/**
 * Reads the ingest's webhook secret JSON. Two formats, both read:
 * - `{"senders":[{"id","kind","secret","createdAt"}]}`, written by `npx mautic-relay senders`;
 * - the first one, `{"webhookSecrets":[…],"apiKeys":[…]}`, whose entries get the ids
 *   `webhook-secret-N` and `api-key-N` by position (kept when `senders` rewrites the secret).
 * `generatedSecret` (what the stack generates: `whsec_` is added here) may sit beside either,
 * with the id `generated`. Messages never quote a value.
 */
export function readSenderCredentials(text: string | undefined): SenderCredential[] {
  let config: Record<string, unknown>;
  try {
    const parsed: unknown = JSON.parse(text ?? '');
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error();
    config = parsed as Record<string, unknown>;
  } catch {
    // No cause: a parse error could quote the secret.
    throw new CredentialError(
      'The webhook secret is not JSON of the form {"senders":[…]} or {"webhookSecrets":[…],"apiKeys":[…]}',
    );
  }
  const senders: SenderCredential[] = [];
  if (config.generatedSecret !== undefined) {
    if (typeof config.generatedSecret !== 'string')
      throw new CredentialError('"generatedSecret" in the webhook secret must be a string');
    senders.push({
      id: GENERATED_SENDER_ID,
      kind: 'webhook_secret',
      value: `whsec_${config.generatedSecret}`,
      createdAt: null,
    });
  }
  strings(config.webhookSecrets, 'webhookSecrets').forEach((value, i) => {
    senders.push({ id: `webhook-secret-${i + 1}`, kind: 'webhook_secret', value, createdAt: null });
  });
  strings(config.apiKeys, 'apiKeys').forEach((value, i) => {
    senders.push({ id: `api-key-${i + 1}`, kind: 'api_key', value, createdAt: null });
  });
  if (config.senders !== undefined) {
    if (!Array.isArray(config.senders))
      throw new CredentialError('"senders" in the webhook secret must be a list');
    config.senders.forEach((entry: unknown, i) => {
      senders.push(senderEntry(entry, i));
    });
  }
  const ids = new Set<string>();
  for (const sender of senders) {
    if (ids.has(sender.id))
      throw new CredentialError(`Two senders in the webhook secret have the id "${sender.id}"`);
    ids.add(sender.id);
  }
  return senders;
}

/**
 * The webhook secret JSON for these senders, in the `senders` format. The stack's generated
 * secret stays in `generatedSecret` while it is kept, so a redeploy finds the field it made.
 */
export function writeSenderCredentials(senders: ReadonlyArray<SenderCredential>): string {
  const generated = senders.find((sender) => sender.id === GENERATED_SENDER_ID);
  const rest = senders.filter((sender) => sender.id !== GENERATED_SENDER_ID);
  return JSON.stringify({
    ...(generated ? { generatedSecret: generated.value.slice('whsec_'.length) } : {}),
    senders: rest.map(({ id, kind, value, createdAt }) => ({
      id,
      kind,
      secret: value,
      createdAt,
    })),
  });
}

/** The lists the ingest compares against, each credential with its stable id. */
export function credentialLists(senders: ReadonlyArray<SenderCredential>): {
  webhookSecrets: Array<{ id: string; value: string }>;
  apiKeys: Array<{ id: string; value: string }>;
} {
  const of = (kind: SenderCredential['kind']) =>
    senders.filter((s) => s.kind === kind).map(({ id, value }) => ({ id, value }));
  return { webhookSecrets: of('webhook_secret'), apiKeys: of('api_key') };
}

function strings(value: unknown, what: string): string[] {
  if (value === undefined) return [];
  if (!Array.isArray(value) || value.some((item) => typeof item !== 'string')) {
    throw new CredentialError(`"${what}" in the webhook secret must be a list of strings`);
  }
  return value as string[];
}

function senderEntry(entry: unknown, index: number): SenderCredential {
  const where = `sender #${index + 1} in the webhook secret`;
  if (typeof entry !== 'object' || entry === null)
    throw new CredentialError(`The ${where} must be an object`);
  const { id, kind, secret, createdAt } = entry as Record<string, unknown>;
  if (typeof id !== 'string' || !/^[A-Za-z0-9_-]{1,64}$/.test(id))
    throw new CredentialError(`The ${where} needs an id of letters, digits, "-" and "_"`);
  if (kind !== 'webhook_secret' && kind !== 'api_key')
    throw new CredentialError(`The ${where} must be of kind "webhook_secret" or "api_key"`);
  if (typeof secret !== 'string') throw new CredentialError(`The ${where} needs a secret`);
  if (createdAt !== null && createdAt !== undefined && typeof createdAt !== 'string')
    throw new CredentialError(`The ${where} has a createdAt that is not a string`);
  return { id, kind, value: secret, createdAt: createdAt ?? null };
}
