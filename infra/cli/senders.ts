import { randomBytes, randomUUID } from 'node:crypto';
import {
  GetSecretValueCommand,
  InvalidParameterException,
  PutSecretValueCommand,
  UpdateSecretVersionStageCommand,
} from '@aws-sdk/client-secrets-manager';
import { CredentialError } from '../../functions/core/errors.ts';
import {
  credentialLists,
  readSenderCredentials,
  type SenderCredential,
  writeSenderCredentials,
} from '../../functions/core/ingest/sender-credentials.ts';
import { parseCredentials } from '../../functions/core/ingest/webhook-auth.ts';
import { DEFAULTS } from '../../functions/shared/config.ts';
import type { Command } from './command.ts';
import { EXIT, SetupError, UsageError } from './errors.ts';
import { TARGET_HELP, targetOptions, withTarget } from './options.ts';
import type { Target } from './target.ts';

export const sendersCommand: Command = {
  name: 'senders',
  usage: 'senders (list | add-secret | add-key | remove ID) (--env NAME | --local) [--json]',
  summary: 'list, add or remove the ingest credentials of senders',
  details: `Edits the ingest's sender credentials (the environment's webhook secret, or the local
stack's): list shows ids, kinds and creation times only; add-secret and add-key generate a new
Standard Webhooks secret or API key and print it once; remove ID stops accepting one (not the
last). Rotation: add-secret, give it to the sender, then remove the old id. Two edits at the
same moment both land: each is made on the version it read, and made again when another got in
first (exit 1 after 5 lost races, nothing changed).
${TARGET_HELP}`,
  options: targetOptions,
  positionals: 2,
  run: async (values, positionals, io) => {
    const [action, id] = positionals;
    if (action !== 'list' && action !== 'add-secret' && action !== 'add-key' && action !== 'remove')
      throw new UsageError('senders needs one of: list, add-secret, add-key, remove ID');
    if ((action === 'remove') !== (id !== undefined))
      throw new UsageError(
        action === 'remove'
          ? 'senders remove needs the ID to remove'
          : `senders ${action} takes no ID`,
      );
    return withTarget(values, io, async (target) => {
      const result = await senders(target, action, id, io.now);
      if (values.json) io.stdout(JSON.stringify(result));
      else for (const line of sendersLines(result, target)) io.stdout(line);
      return EXIT.ok;
    });
  },
};

/** What `senders` shows of a credential: never its value. */
interface SenderInfo {
  id: string;
  kind: SenderCredential['kind'];
  createdAt: string | null;
}

interface SendersResult {
  senders: SenderInfo[];
  /** Only from add-secret and add-key: the one time the new value is shown. */
  added?: SenderInfo & { secret: string };
  removed?: string;
}

/** How many times an edit is made again on what another edit wrote meanwhile. */
const EDIT_ATTEMPTS = 5;

/**
 * `senders list | add-secret | add-key | remove ID`: reads and rewrites the ingest's webhook
 * secret. Each edit is a compare-and-swap on the secret's version, as the token secret's writes
 * are: made on the version it read, and made current only if that version still is. An edit that
 * lost the race to another is made again on what the other wrote (a key being removed stays
 * removed, a key added stays added), at most EDIT_ATTEMPTS times, then reported. Every result is
 * checked as the ingest will check it before it is written, and the last credential cannot be
 * removed (the ingest would refuse every request).
 */
export async function senders(
  target: Target,
  action: 'list' | 'add-secret' | 'add-key' | 'remove',
  id: string | undefined,
  now: () => number,
): Promise<SendersResult> {
  if (action === 'list') return { senders: (await read(target)).senders.map(info) };
  if (action === 'remove') {
    const rest = await edit(target, (current, retried) => {
      // Removed meanwhile by the edit that got in first: nothing left to do.
      if (retried && !current.some((sender) => sender.id === id)) return current;
      return without(current, id ?? '');
    });
    return { senders: rest.map(info), removed: id ?? '' };
  }
  const added = newCredential(action === 'add-secret' ? 'webhook_secret' : 'api_key', now);
  const next = await edit(target, (current) => [...current, added]);
  return { senders: next.map(info), added: { ...info(added), secret: added.value } };
}

/** The credentials without `id`; a usage error when there is none, or it is the last. */
function without(current: SenderCredential[], id: string): SenderCredential[] {
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
  return rest;
}

function newCredential(kind: SenderCredential['kind'], now: () => number): SenderCredential {
  return {
    id: `snd_${randomBytes(5).toString('hex')}`,
    kind,
    value:
      kind === 'webhook_secret'
        ? `whsec_${randomBytes(32).toString('base64')}`
        : randomBytes(32).toString('base64url'),
    createdAt: new Date(now()).toISOString(),
  };
}

/**
 * Reads the credentials, `change`s them and writes the result on the version read; when another
 * edit got in first, does it all again on what that one wrote. Resolves what was written.
 */
async function edit(
  target: Target,
  change: (current: SenderCredential[], retried: boolean) => SenderCredential[],
): Promise<SenderCredential[]> {
  for (let attempt = 1; ; attempt++) {
    const { senders, versionId } = await read(target);
    const next = change(senders, attempt > 1);
    if (next === senders || (await write(target, next, versionId)) === 'written') return next;
    if (attempt === EDIT_ATTEMPTS)
      throw new Error(
        `Other edits of ${target.webhookSecretId} got in first ${EDIT_ATTEMPTS} times; this one changed nothing: run it again (senders list shows the credentials now).`,
      );
  }
}

async function read(
  target: Target,
): Promise<{ senders: SenderCredential[]; versionId: string | undefined }> {
  const { SecretString, VersionId } = await target.secrets.send(
    new GetSecretValueCommand({ SecretId: target.webhookSecretId }),
  );
  try {
    return { senders: readSenderCredentials(SecretString), versionId: VersionId };
  } catch (error) {
    if (error instanceof CredentialError)
      throw new SetupError(`${target.webhookSecretId}: ${error.message}`);
    throw error;
  }
}

/**
 * Writes `next` as a new version labelled AWSPENDING, then moves AWSCURRENT to it from `basedOn`
 * (the version it was made from): Secrets Manager moves the label only if `basedOn` still holds
 * it, so an edit made on what another edit replaced is never current ('superseded'). The same as
 * the token secret's writes (functions/adapters/secrets-manager-token-vault.ts).
 */
async function write(
  target: Target,
  next: SenderCredential[],
  basedOn: string | undefined,
): Promise<'written' | 'superseded'> {
  // Fails here, naming the bad entry by position, rather than in the ingest.
  parseCredentials(credentialLists(next));
  const SecretId = target.webhookSecretId;
  const SecretString = writeSenderCredentials(next);
  if (basedOn === undefined) {
    // A secret without a version yet: the first one becomes current by itself.
    await target.secrets.send(new PutSecretValueCommand({ SecretId, SecretString }));
    return 'written';
  }
  const versionId = randomUUID();
  await target.secrets.send(
    new PutSecretValueCommand({
      SecretId,
      SecretString,
      ClientRequestToken: versionId,
      VersionStages: ['AWSPENDING'],
    }),
  );
  try {
    await target.secrets.send(
      new UpdateSecretVersionStageCommand({
        SecretId,
        VersionStage: 'AWSCURRENT',
        MoveToVersionId: versionId,
        RemoveFromVersionId: basedOn,
      }),
    );
    return 'written';
  } catch (error) {
    if (!(error instanceof InvalidParameterException)) throw error;
    // The move may have happened before its answer was lost (the SDK then tried it again).
    const current = await target.secrets.send(new GetSecretValueCommand({ SecretId }));
    return current.VersionId === versionId ? 'written' : 'superseded';
  }
}

function info({ id, kind, createdAt }: SenderCredential): SenderInfo {
  return { id, kind, createdAt };
}

/** The human-readable answer; the only place a new value is printed. */
function sendersLines(result: SendersResult, target: Target): string[] {
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
