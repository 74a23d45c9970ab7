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
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { listenOnLoopback } from '../../mautic-simulator/loopback.ts';
import { readBody } from '../../mautic-simulator/read-body.ts';
import { OPERATIONS, SecretStore } from './secrets-manager-operations.ts';
import { type Body, pickString, ServiceError } from './secrets-manager-request.ts';

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

const TARGET_PREFIX = 'secretsmanager.';
const CONTENT_TYPE = 'application/x-amz-json-1.1';
/** SecretString is at most 64 KiB; this leaves room for the rest of the request. */
const MAX_BODY_BYTES = 1024 * 1024;
const DEFAULT_FAILURE = { code: 'InternalServiceError', status: 500 };

type Call = { operation: string; secretId?: string };

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
  const calls: Call[] = [];
  const failures = new InjectedFailures();
  const server = createServer((req, res) => {
    answer(req, res, { store, calls, failures }).catch((error: unknown) => {
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
    current: (name) => store.current(name),
    versions: (name) => store.versions(name),
    failNext(operation, times = 1, error = DEFAULT_FAILURE) {
      failures.add(operation, times, error);
    },
  };
}

/** Answers one request: records the call, then an injected failure or the operation's reply. */
async function answer(
  req: IncomingMessage,
  res: ServerResponse,
  { store, calls, failures }: { store: SecretStore; calls: Call[]; failures: InjectedFailures },
): Promise<void> {
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
  const failure = failures.take(operation);
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
}

/** The failures `failNext` queued, per operation, in the order they were asked for. */
class InjectedFailures {
  readonly #queues = new Map<string, Array<{ remaining: number; code: string; status: number }>>();

  add(operation: string, times: number, error: { code: string; status: number }): void {
    if (!Number.isInteger(times) || times < 1) {
      throw new RangeError(`failNext: times must be a positive integer, got ${times}`);
    }
    if (!Number.isInteger(error.status) || error.status < 400 || error.status > 599) {
      throw new RangeError(`failNext: status must be 400..599, got ${error.status}`);
    }
    const queue = this.#queues.get(operation) ?? [];
    queue.push({ remaining: times, code: error.code, status: error.status });
    this.#queues.set(operation, queue);
  }

  take(operation: string): { code: string; status: number } | undefined {
    const queue = this.#queues.get(operation);
    const head = queue?.[0];
    if (queue === undefined || head === undefined) return undefined;
    head.remaining -= 1;
    if (head.remaining === 0) queue.shift();
    return head;
  }
}

/** CreateSecret names its secret with `Name`; calls records it as the SecretId. */
function pickName(operation: string | undefined, input: Body | undefined): string | undefined {
  return operation === 'CreateSecret' ? pickString(input?.Name) : undefined;
}

/** An empty body is `{}`, as the SDK sends for operations without input. */
function parseBody(body: Buffer): Body {
  if (body.length === 0) return {};
  const parsed: unknown = JSON.parse(body.toString('utf8'));
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new TypeError('not a JSON object');
  }
  return parsed as Body;
}

function sendJson(
  res: ServerResponse,
  status: number,
  payload: Record<string, unknown>,
  errorCode?: string,
): void {
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
