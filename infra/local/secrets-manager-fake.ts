/**
 * A Secrets Manager stand-in on a real HTTP server bound to 127.0.0.1, speaking the AWS JSON 1.1
 * protocol the real `@aws-sdk/client-secrets-manager` uses: `POST /` with
 * `X-Amz-Target: secretsmanager.<Operation>` and a JSON body. Point a client at it with
 * `endpoint` or `AWS_ENDPOINT_URL_SECRETS_MANAGER`. Tests and the local stack (`npm start`) use
 * it as a token store with the cloud one's semantics; there is no Secrets Manager emulator.
 *
 * Errors are answered as AWS does (HTTP 400, `x-amzn-errortype: <Code>`, body
 * `{"__type":"<Code>","message":"…"}`), so the SDK raises its own exception classes and applies
 * its own retry rules. Implemented: the operations the relay calls (CreateSecret, GetSecretValue,
 * PutSecretValue, UpdateSecretVersionStage), for SecretString only. Not implemented: SecretBinary
 * (InvalidRequestException), other operations (UnknownOperationException), and the clean-up of
 * versions without labels (they are kept). Signatures are not checked.
 *
 * Nothing is ever logged: requests carry secret values.
 */
import { randomInt, randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { listenOnLoopback } from '../../mautic-simulator/loopback.ts';
import { readBody } from '../../mautic-simulator/read-body.ts';

export interface SecretsManagerFake {
  /** `http://127.0.0.1:<port>`. */
  readonly endpoint: string;
  /** Stops the server and closes every connection, the SDK's kept-alive ones included. Idempotent. */
  close(): Promise<void>;
  /**
   * Every call received, in order, injected failures included: the operation and the SecretId
   * (for CreateSecret, the Name), never a SecretString.
   */
  readonly calls: ReadonlyArray<{ operation: string; secretId?: string }>;
  /** The current value of a secret (AWSCURRENT), for assertions. */
  current(name: string): string | undefined;
  /** Version ids with their stages, oldest first, labelless versions included; [] for no secret. */
  versions(name: string): Array<{ versionId: string; stages: string[]; secretString: string }>;
  /**
   * Makes the next `times` calls of `operation` fail with this error code and HTTP status
   * (default 500 InternalServiceError), before the operation touches any secret. Calls to
   * failNext queue up: `failNext('X'); failNext('X', 1, { code: 'Y', status: 400 })` fails the
   * next call with 500 and the one after with Y. The SDK retries 500, 502, 503 and 504 (501 is
   * not) and any throttling code, which includes Secrets Manager's LimitExceededException: that
   * one is retried with a 1 s base delay.
   */
  failNext(operation: string, times?: number, error?: { code: string; status: number }): void;
}

export interface SecretsManagerFakeOptions {
  /** Default 0 (an ephemeral port). Always bound to 127.0.0.1. */
  port?: number;
}

const REGION = 'us-east-1';
const ACCOUNT_ID = '000000000000';
const ARN_PREFIX = `arn:aws:secretsmanager:${REGION}:${ACCOUNT_ID}:secret:`;
const TARGET_PREFIX = 'secretsmanager.';
const CONTENT_TYPE = 'application/x-amz-json-1.1';
const CURRENT = 'AWSCURRENT';
const PREVIOUS = 'AWSPREVIOUS';
/** SecretString is at most 64 KiB; this leaves room for the rest of the request. */
const MAX_BODY_BYTES = 1024 * 1024;
const ARN_SUFFIX_CHARS = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
const NAME_PATTERN = /^[A-Za-z0-9/_+=.@-]{1,512}$/;
const DEFAULT_FAILURE = { code: 'InternalServiceError', status: 500 };

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

type Body = Record<string, unknown>;
type Reply = Record<string, unknown>;

/** An error AWS would answer; `code` becomes the SDK's exception name. */
class ServiceError extends Error {
  readonly code: string;
  readonly status: number;
  constructor(code: string, message: string, status = 400) {
    super(message);
    this.name = 'ServiceError';
    this.code = code;
    this.status = status;
  }
}

/**
 * Starts the fake on 127.0.0.1 with no secrets.
 *
 * @example
 * const sm = await startSecretsManagerFake();
 * const client = new SecretsManagerClient({ endpoint: sm.endpoint, region: 'us-east-1',
 *   credentials: { accessKeyId: 'test', secretAccessKey: 'test' } });
 * await client.send(new CreateSecretCommand({ Name: 'mautic/token', SecretString: '{}' }));
 * await sm.close();
 */
export async function startSecretsManagerFake(
  options: SecretsManagerFakeOptions = {},
): Promise<SecretsManagerFake> {
  const store = new SecretStore();
  const calls: Array<{ operation: string; secretId?: string }> = [];
  const failures = new Map<string, Array<{ remaining: number; code: string; status: number }>>();

  const takeFailure = (operation: string) => {
    const queue = failures.get(operation);
    const head = queue?.[0];
    if (queue === undefined || head === undefined) return undefined;
    head.remaining -= 1;
    if (head.remaining === 0) queue.shift();
    return head;
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const target = req.headers['x-amz-target'];
    const operation =
      typeof target === 'string' && target.startsWith(TARGET_PREFIX)
        ? target.slice(TARGET_PREFIX.length)
        : undefined;
    const { body, complete } = await readBody(req, MAX_BODY_BYTES);
    if (body.length > MAX_BODY_BYTES) {
      calls.push({ operation: operation ?? String(target ?? '') });
      if (!complete) res.setHeader('connection', 'close');
      return sendError(res, new ServiceError('ValidationException', 'The request is too large.'));
    }
    let input: Body | undefined;
    try {
      input = parseBody(body);
    } catch {
      // Recorded without a SecretId, since none could be read.
    }
    const secretId = pickString(input?.SecretId) ?? pickName(operation, input);
    calls.push({
      operation: operation ?? String(target ?? ''),
      ...(secretId === undefined ? {} : { secretId }),
    });

    const run = operation === undefined ? undefined : OPERATIONS.get(operation);
    if (req.method !== 'POST' || operation === undefined || run === undefined) {
      return sendError(
        res,
        new ServiceError('UnknownOperationException', 'The operation is not recognized.'),
      );
    }
    const failure = takeFailure(operation);
    if (failure !== undefined) {
      const message =
        failure.code === DEFAULT_FAILURE.code
          ? 'An error occurred on the server side.'
          : `${failure.code} injected by failNext.`;
      return sendError(res, new ServiceError(failure.code, message, failure.status));
    }
    if (input === undefined) {
      return sendError(
        res,
        new ServiceError('SerializationException', 'The request body is not a JSON object.'),
      );
    }
    sendJson(res, 200, run(store, input));
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      if (res.headersSent || res.destroyed) {
        res.destroy();
        return;
      }
      // A bug here must not echo anything from the request; the SDK sees a retryable 500.
      sendError(
        res,
        error instanceof ServiceError
          ? error
          : new ServiceError('InternalServiceError', 'An error occurred on the server side.', 500),
      );
    });
  });
  const port = await listenOnLoopback(server, options.port);

  let closed: Promise<void> | undefined;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    calls,
    close() {
      closed ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        // Every answer is written synchronously once its body is in, so nothing is cut short
        // but requests still arriving, which a closed Secrets Manager would not answer either.
        server.closeAllConnections();
      });
      return closed;
    },
    current(name) {
      const secret = store.find(name);
      return secret === undefined ? undefined : holder(secret, CURRENT)?.secretString;
    },
    versions(name) {
      const secret = store.find(name);
      if (secret === undefined) return [];
      return [...secret.versions.values()].map((version) => ({
        versionId: version.id,
        stages: [...version.stages],
        secretString: version.secretString,
      }));
    },
    failNext(operation, times = 1, error = DEFAULT_FAILURE) {
      if (!Number.isInteger(times) || times < 1) {
        throw new RangeError(`failNext: times must be a positive integer, got ${times}`);
      }
      if (!Number.isInteger(error.status) || error.status < 400 || error.status > 599) {
        throw new RangeError(`failNext: status must be 400..599, got ${error.status}`);
      }
      const queue = failures.get(operation) ?? [];
      queue.push({ remaining: times, code: error.code, status: error.status });
      failures.set(operation, queue);
    },
  };
}

/** The secrets, with lookups by name, full ARN or partial ARN (the ARN without its suffix). */
class SecretStore {
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

const OPERATIONS = new Map(Object.entries(HANDLERS));

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

// ---- request parameters -------------------------------------------------------------------

function requiredString(input: Body, key: string): string {
  const value = optionalString(input, key);
  if (value === undefined) throw missing(key);
  return value;
}

function optionalString(input: Body, key: string): string | undefined {
  const value = input[key];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string') {
    throw new ServiceError('SerializationException', `${key} must be a string.`);
  }
  return value;
}

/** A VersionId or ClientRequestToken: 32 to 64 characters. */
function versionIdParam(input: Body, key: string): string | undefined {
  const value = optionalString(input, key);
  if (value !== undefined && (value.length < 32 || value.length > 64)) {
    const bound = value.length < 32 ? 'greater than or equal to 32' : 'less than or equal to 64';
    throw new ServiceError(
      'ValidationException',
      `1 validation error detected: Value at '${memberName(key)}' failed to satisfy constraint: Member must have length ${bound}`,
    );
  }
  return value;
}

function stageParam(input: Body, key: string): string | undefined {
  const value = optionalString(input, key);
  if (value !== undefined && (value.length < 1 || value.length > 256)) {
    throw new ServiceError(
      'ValidationException',
      `1 validation error detected: Value at '${memberName(key)}' failed to satisfy constraint: Member must have length between 1 and 256`,
    );
  }
  return value;
}

function stagesParam(input: Body, key: string): string[] | undefined {
  const value = input[key];
  if (value === undefined || value === null) return undefined;
  if (!Array.isArray(value) || !value.every((item) => typeof item === 'string')) {
    throw new ServiceError('SerializationException', `${key} must be a list of strings.`);
  }
  if (value.length < 1 || value.length > 20 || value.some((s) => s.length < 1 || s.length > 256)) {
    throw new ServiceError(
      'ValidationException',
      `1 validation error detected: Value at '${memberName(key)}' failed to satisfy constraint: Member must have between 1 and 20 labels of 1 to 256 characters`,
    );
  }
  return [...new Set(value)];
}

/** The SecretString; the message never repeats the value. */
function secretStringParam(input: Body, required: true): string;
function secretStringParam(input: Body, required: false): string | undefined;
function secretStringParam(input: Body, required: boolean): string | undefined {
  if (input.SecretBinary !== undefined && input.SecretBinary !== null) {
    throw new ServiceError(
      'InvalidRequestException',
      'SecretBinary is not supported by this Secrets Manager fake; use SecretString.',
    );
  }
  const value = input.SecretString;
  if (value === undefined || value === null) {
    if (!required) return undefined;
    throw new ServiceError(
      'InvalidRequestException',
      'You must provide either SecretString or SecretBinary.',
    );
  }
  if (typeof value !== 'string') {
    throw new ServiceError('SerializationException', 'SecretString must be a string.');
  }
  if (value.length > 65_536) {
    throw new ServiceError(
      'ValidationException',
      "1 validation error detected: Value at 'secretString' failed to satisfy constraint: Member must have length less than or equal to 65536",
    );
  }
  return value;
}

function missing(key: string): ServiceError {
  return new ServiceError(
    'ValidationException',
    `1 validation error detected: Value at '${memberName(key)}' failed to satisfy constraint: Member must not be null`,
  );
}

/** AWS names members in camel case in validation messages. */
function memberName(key: string): string {
  return key.charAt(0).toLowerCase() + key.slice(1);
}

function pickString(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

/** CreateSecret names its secret with `Name`; calls records it as the SecretId. */
function pickName(operation: string | undefined, input: Body | undefined): string | undefined {
  return operation === 'CreateSecret' ? pickString(input?.Name) : undefined;
}

// ---- HTTP ---------------------------------------------------------------------------------

/** An empty body is `{}`, as the SDK sends for operations without input. */
function parseBody(body: Buffer): Body {
  if (body.length === 0) return {};
  const parsed: unknown = JSON.parse(body.toString('utf8'));
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new TypeError('not a JSON object');
  }
  return parsed as Body;
}

function sendJson(res: ServerResponse, status: number, payload: Reply, errorCode?: string): void {
  const body = JSON.stringify(payload);
  res.writeHead(status, {
    'content-type': CONTENT_TYPE,
    'content-length': Buffer.byteLength(body),
    'x-amzn-requestid': randomUUID(),
    ...(errorCode === undefined ? {} : { 'x-amzn-errortype': errorCode }),
  });
  res.end(body);
}

/**
 * For AWS JSON 1.1 the SDK takes the code from `__type` first, then a `code` member, then the
 * header (REST JSON reads the header first), so they must agree. The body must be JSON even for
 * errors: anything else surfaces as a SyntaxError, not as the service exception.
 */
function sendError(res: ServerResponse, error: ServiceError): void {
  sendJson(res, error.status, { __type: error.code, message: error.message }, error.code);
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
