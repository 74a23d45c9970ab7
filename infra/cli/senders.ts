import { randomBytes } from 'node:crypto';
import { GetSecretValueCommand, PutSecretValueCommand } from '@aws-sdk/client-secrets-manager';
import { CredentialError } from '../../functions/core/errors.ts';
import {
  credentialLists,
  readSenderCredentials,
  type SenderCredential,
  writeSenderCredentials,
} from '../../functions/core/sender-credentials.ts';
import { parseCredentials } from '../../functions/core/webhook-auth.ts';
import { DEFAULTS } from '../../functions/shared/config.ts';
import { SetupError } from './errors.ts';
import { UsageError } from './operator-commands.ts';
import type { Target } from './target.ts';

/** What `senders` shows of a credential: never its value. */
interface SenderInfo {
  id: string;
  kind: SenderCredential['kind'];
  createdAt: string | null;
}

export interface SendersResult {
  senders: SenderInfo[];
  /** Only from add-secret and add-key: the one time the new value is shown. */
  added?: SenderInfo & { secret: string };
  removed?: string;
}

/**
 * `senders list | add-secret | add-key | remove ID`: reads and rewrites the ingest's webhook
 * secret. A read-modify-write with no lock: two operators editing at the same second could
 * lose one edit, which `list` shows; a rotation is rare and manual, so that is accepted.
 * Every result is checked as the ingest will check it before it is written, and the last
 * credential cannot be removed (the ingest would refuse every request).
 */
export async function senders(
  target: Target,
  action: 'list' | 'add-secret' | 'add-key' | 'remove',
  id: string | undefined,
  now: () => number,
): Promise<SendersResult> {
  const current = await read(target);
  if (action === 'list') return { senders: current.map(info) };

  if (action === 'remove') {
    if (!current.some((sender) => sender.id === id)) {
      throw new UsageError(
        `No sender "${id}"; the senders are: ${current.map((s) => s.id).join(', ')}`,
      );
    }
    const rest = current.filter((sender) => sender.id !== id);
    if (rest.length === 0) {
      throw new UsageError(
        `"${id}" is the last sender credential; add another first (the ingest would refuse every request).`,
      );
    }
    await write(target, rest);
    return { senders: rest.map(info), removed: id ?? '' };
  }

  const kind = action === 'add-secret' ? 'webhook_secret' : 'api_key';
  const added: SenderCredential = {
    id: `snd_${randomBytes(5).toString('hex')}`,
    kind,
    value:
      kind === 'webhook_secret'
        ? `whsec_${randomBytes(32).toString('base64')}`
        : randomBytes(32).toString('base64url'),
    createdAt: new Date(now()).toISOString(),
  };
  const next = [...current, added];
  await write(target, next);
  return { senders: next.map(info), added: { ...info(added), secret: added.value } };
}

async function read(target: Target): Promise<SenderCredential[]> {
  const { SecretString } = await target.secrets.send(
    new GetSecretValueCommand({ SecretId: target.webhookSecretId }),
  );
  try {
    return readSenderCredentials(SecretString);
  } catch (error) {
    if (error instanceof CredentialError)
      throw new SetupError(`${target.webhookSecretId}: ${error.message}`);
    throw error;
  }
}

async function write(target: Target, next: SenderCredential[]): Promise<void> {
  // Fails here, naming the bad entry by position, rather than in the ingest.
  parseCredentials(credentialLists(next));
  await target.secrets.send(
    new PutSecretValueCommand({
      SecretId: target.webhookSecretId,
      SecretString: writeSenderCredentials(next),
    }),
  );
}

function info({ id, kind, createdAt }: SenderCredential): SenderInfo {
  return { id, kind, createdAt };
}

/** The human-readable answer; the only place a new value is printed. */
export function sendersLines(result: SendersResult, target: Target): string[] {
  const lines: string[] = [];
  const delay = target.local
    ? 'within a second'
    : `within ${DEFAULTS.credentialsCacheSeconds / 60} minutes (the ingest caches the secret)`;
  if (result.added) {
    const what = result.added.kind === 'webhook_secret' ? 'webhook secret' : 'API key';
    lines.push(
      `Added ${what} ${result.added.id}. It is shown only now; give it to the sender:`,
      `  ${result.added.secret}`,
      `The ingest accepts it ${delay}.`,
    );
  }
  if (result.removed)
    lines.push(`Removed ${result.removed}; the ingest stops accepting it ${delay}.`);
  lines.push(`Senders of ${target.local ? 'the local stack' : target.name}:`);
  for (const sender of result.senders) {
    lines.push(
      `  ${sender.id.padEnd(18)} ${sender.kind === 'webhook_secret' ? 'webhook secret' : 'API key       '}  created ${sender.createdAt ?? 'before the relay recorded it'}`,
    );
  }
  return lines;
}
