/**
 * The Secrets Manager stand-in's secrets and the operations the relay calls on them
 * (secrets-manager-fake.ts serves them over HTTP): versions, their staging labels and how the
 * operations move them, as AWS does.
 */
import { randomInt, randomUUID } from 'node:crypto';
import {
  type Body,
  missing,
  requiredString,
  ServiceError,
  secretStringParam,
  stageParam,
  stagesParam,
  versionIdParam,
} from './secrets-manager-request.ts';

const REGION = 'us-east-1';
const ACCOUNT_ID = '000000000000';
const ARN_PREFIX = `arn:aws:secretsmanager:${REGION}:${ACCOUNT_ID}:secret:`;
const CURRENT = 'AWSCURRENT';
const PREVIOUS = 'AWSPREVIOUS';
const ARN_SUFFIX_CHARS = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
const NAME_PATTERN = /^[A-Za-z0-9/_+=.@-]{1,512}$/;

interface Version {
  id: string;
  secretString: string;
  stages: Set<string>;
  createdDate: number;
}

interface Secret {
  name: string;
  arn: string;
  /** In creation order (a Map keeps insertion order). */
  versions: Map<string, Version>;
}

type Reply = Record<string, unknown>;

/** The secrets, with lookups by name, full ARN or partial ARN (the ARN without its suffix). */
export class SecretStore {
  readonly byName = new Map<string, Secret>();

  find(secretId: string): Secret | undefined {
    const byName = this.byName.get(secretId);
    if (byName !== undefined) return byName;
    if (!secretId.startsWith(ARN_PREFIX)) return undefined;
    const partial = secretId.slice(ARN_PREFIX.length);
    for (const secret of this.byName.values()) {
      if (secret.arn === secretId) return secret;
    }
    return this.byName.get(partial);
  }

  /** The value AWSCURRENT labels, for assertions. */
  current(name: string): string | undefined {
    const secret = this.find(name);
    return secret === undefined ? undefined : holder(secret, CURRENT)?.secretString;
  }

  /** Every version with its stages, oldest first; [] for no secret. */
  versions(name: string): Array<{ versionId: string; stages: string[]; secretString: string }> {
    const secret = this.find(name);
    if (secret === undefined) return [];
    return [...secret.versions.values()].map((version) => ({
      versionId: version.id,
      stages: [...version.stages],
      secretString: version.secretString,
    }));
  }

  resolve(secretId: string): Secret {
    const secret = this.find(secretId);
    if (secret === undefined) {
      throw new ServiceError(
        'ResourceNotFoundException',
        "Secrets Manager can't find the specified secret.",
      );
    }
    return secret;
  }
}

const HANDLERS: Record<string, (store: SecretStore, input: Body) => Reply> = {
  CreateSecret(store, input) {
    const name = requiredString(input, 'Name');
    if (!NAME_PATTERN.test(name)) {
      throw new ServiceError(
        'ValidationException',
        'Invalid name. Must be a valid name containing alphanumeric characters, or any of the following: -/_+=.@!',
      );
    }
    const token = versionIdParam(input, 'ClientRequestToken');
    const secretString = secretStringParam(input, false);
    if (store.byName.has(name)) {
      throw new ServiceError(
        'ResourceExistsException',
        `The operation failed because the secret ${name} already exists.`,
      );
    }
    const secret: Secret = {
      name,
      arn: `${ARN_PREFIX}${name}-${randomSuffix()}`,
      versions: new Map(),
    };
    store.byName.set(name, secret);
    // As on AWS, a secret created without a value has no version, and the token is ignored.
    if (secretString === undefined) return { ARN: secret.arn, Name: name };
    const version = addVersion(secret, token ?? randomUUID(), secretString);
    version.stages.add(CURRENT);
    return { ARN: secret.arn, Name: name, VersionId: version.id };
  },

  GetSecretValue(store, input) {
    const secretId = requiredString(input, 'SecretId');
    const versionId = versionIdParam(input, 'VersionId');
    const stage = stageParam(input, 'VersionStage');
    const secret = store.resolve(secretId);
    let version: Version | undefined;
    if (versionId !== undefined) {
      version = secret.versions.get(versionId);
      if (version === undefined || (stage !== undefined && !version.stages.has(stage))) {
        const label = stage === undefined ? '' : ` and staging label: ${stage}`;
        throw new ServiceError(
          'ResourceNotFoundException',
          `Secrets Manager can't find the specified secret value for VersionId: ${versionId}${label}`,
        );
      }
    } else {
      const label = stage ?? CURRENT;
      version = holder(secret, label);
      if (version === undefined) {
        throw new ServiceError(
          'ResourceNotFoundException',
          `Secrets Manager can't find the specified secret value for staging label: ${label}`,
        );
      }
    }
    return {
      ARN: secret.arn,
      Name: secret.name,
      VersionId: version.id,
      SecretString: version.secretString,
      VersionStages: [...version.stages],
      CreatedDate: version.createdDate,
    };
  },

  PutSecretValue(store, input) {
    const secretId = requiredString(input, 'SecretId');
    const token = versionIdParam(input, 'ClientRequestToken');
    const secretString = secretStringParam(input, true);
    const stages = stagesParam(input, 'VersionStages');
    const secret = store.resolve(secretId);
    const versionId = token ?? randomUUID();
    const existing = secret.versions.get(versionId);
    if (existing !== undefined) {
      // An idempotent retry: same token, same value, nothing changes.
      if (existing.secretString !== secretString) {
        throw new ServiceError(
          'ResourceExistsException',
          "You can't modify an existing version, you can only create a new version.",
        );
      }
      return versionReply(secret, existing);
    }
    const labels = stages ?? [CURRENT];
    // The first version of a secret always becomes AWSCURRENT.
    if (holder(secret, CURRENT) === undefined && !labels.includes(CURRENT)) labels.push(CURRENT);
    const version = addVersion(secret, versionId, secretString);
    // AWSCURRENT first, so an explicit AWSPREVIOUS in the list wins over the automatic move.
    for (const label of [...labels].sort((a, b) => Number(b === CURRENT) - Number(a === CURRENT))) {
      moveLabel(secret, label, version);
    }
    return versionReply(secret, version);
  },

  UpdateSecretVersionStage(store, input) {
    const secretId = requiredString(input, 'SecretId');
    const stage = stageParam(input, 'VersionStage');
    if (stage === undefined) throw missing('VersionStage');
    const moveTo = versionIdParam(input, 'MoveToVersionId');
    const removeFrom = versionIdParam(input, 'RemoveFromVersionId');
    const secret = store.resolve(secretId);
    for (const versionId of [moveTo, removeFrom]) {
      if (versionId !== undefined && !secret.versions.has(versionId)) {
        throw new ServiceError('InvalidParameterException', `Not a valid version: ${versionId}`);
      }
    }
    const attachedTo = holder(secret, stage);
    if (removeFrom !== undefined && attachedTo?.id !== removeFrom) {
      throw new ServiceError(
        'InvalidParameterException',
        `Version stage ${stage} not found in version ${removeFrom}`,
      );
    }
    if (
      moveTo !== undefined &&
      removeFrom === undefined &&
      attachedTo !== undefined &&
      attachedTo.id !== moveTo
    ) {
      throw new ServiceError(
        'InvalidParameterException',
        `The parameter RemoveFromVersionId can't be empty. Staging label ${stage} is currently attached to version ${attachedTo.id}, so you must explicitly reference that version in RemoveFromVersionId.`,
      );
    }
    const target = moveTo === undefined ? undefined : secret.versions.get(moveTo);
    if (target !== undefined) {
      moveLabel(secret, stage, target);
    } else if (attachedTo !== undefined && removeFrom !== undefined) {
      if (stage === CURRENT) {
        throw new ServiceError(
          'InvalidParameterException',
          `You can't remove the staging label ${CURRENT} without moving it to another version.`,
        );
      }
      attachedTo.stages.delete(stage);
    }
    return { ARN: secret.arn, Name: secret.name };
  },
};

/** Each operation by its name (`X-Amz-Target: secretsmanager.<name>`). */
export const OPERATIONS = new Map(Object.entries(HANDLERS));

function addVersion(secret: Secret, id: string, secretString: string): Version {
  const version: Version = { id, secretString, stages: new Set(), createdDate: epochSeconds() };
  secret.versions.set(id, version);
  return version;
}

/** The version that carries `label`; a label is on one version at most. */
function holder(secret: Secret, label: string): Version | undefined {
  for (const version of secret.versions.values()) {
    if (version.stages.has(label)) return version;
  }
  return undefined;
}

/**
 * Attaches `label` to `to`, taking it off the version that had it. Moving AWSCURRENT moves
 * AWSPREVIOUS to the version AWSCURRENT left, as AWS does.
 */
function moveLabel(secret: Secret, label: string, to: Version): void {
  const from = holder(secret, label);
  if (from === to) return;
  from?.stages.delete(label);
  to.stages.add(label);
  if (label === CURRENT && from !== undefined) {
    holder(secret, PREVIOUS)?.stages.delete(PREVIOUS);
    from.stages.add(PREVIOUS);
  }
}

function versionReply(secret: Secret, version: Version): Reply {
  return {
    ARN: secret.arn,
    Name: secret.name,
    VersionId: version.id,
    VersionStages: [...version.stages],
  };
}

function randomSuffix(): string {
  let suffix = '';
  for (let i = 0; i < 6; i += 1) suffix += ARN_SUFFIX_CHARS[randomInt(ARN_SUFFIX_CHARS.length)];
  return suffix;
}

/** AWS JSON 1.1 timestamps are epoch seconds, with a fraction. */
function epochSeconds(): number {
  return Date.now() / 1000;
}
