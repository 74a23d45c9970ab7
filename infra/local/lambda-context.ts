/**
 * A Lambda invocation on this machine: the Context a handler gets and the timeout Lambda enforces.
 * The HTTP front, the SQS event source, the local stack and the tests all invoke handlers through
 * these, so a handler sees the same Context locally as in the cloud.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import type { Context } from 'aws-lambda';

export interface LambdaContextOptions {
  /** Default: a fresh UUID, as Lambda gives each invocation. */
  awsRequestId?: string;
  /** For the function ARN. @default 'us-east-1' */
  region?: string;
  /** For the function ARN. @default '000000000000' */
  accountId?: string;
  /** One per execution environment; see `newLogStreamName`. @default a fresh one */
  logStreamName?: string;
}

/**
 * The Context of one invocation that started now and may run `timeoutMs`:
 * getRemainingTimeInMillis() counts down to 0 from there.
 */
export function lambdaContext(
  functionName: string,
  timeoutMs: number,
  options: LambdaContextOptions = {},
): Context {
  const startedAt = Date.now();
  const region = options.region ?? 'us-east-1';
  const accountId = options.accountId ?? '000000000000';
  const unsupported = (name: string) => () => {
    throw new Error(`context.${name}() is not supported: return or throw from the handler`);
  };
  return {
    callbackWaitsForEmptyEventLoop: true,
    functionName,
    functionVersion: '$LATEST',
    invokedFunctionArn: `arn:aws:lambda:${region}:${accountId}:function:${functionName}`,
    memoryLimitInMB: '1024',
    awsRequestId: options.awsRequestId ?? randomUUID(),
    logGroupName: `/aws/lambda/${functionName}`,
    logStreamName: options.logStreamName ?? newLogStreamName(),
    getRemainingTimeInMillis: () => Math.max(0, startedAt + timeoutMs - Date.now()),
    done: unsupported('done'),
    fail: unsupported('fail'),
    succeed: unsupported('succeed'),
  };
}

/** `2024/05/01/[$LATEST]<32 hex>`, as Lambda names the log stream of an execution environment. */
export function newLogStreamName(): string {
  const day = new Date().toISOString().slice(0, 10).replaceAll('-', '/');
  return `${day}/[$LATEST]${randomBytes(16).toString('hex')}`;
}

/** The invocation ran past its timeout; Lambda would have stopped it. */
export class InvocationTimeoutError extends Error {
  override readonly name = 'InvocationTimeoutError';
  readonly timeoutMs: number;
  readonly awsRequestId: string;

  constructor(timeoutMs: number, awsRequestId: string) {
    super(`${awsRequestId} Task timed out after ${(timeoutMs / 1_000).toFixed(2)} seconds`);
    this.timeoutMs = timeoutMs;
    this.awsRequestId = awsRequestId;
  }
}

/**
 * Runs a handler as Lambda does: what it throws, or still running after `timeoutMs` (an
 * InvocationTimeoutError), is a function error; a late answer is dropped.
 */
export function invokeHandler<E, R>(
  handler: (event: E, context: Context) => R | Promise<R>,
  event: E,
  context: Context,
  timeoutMs: number,
): Promise<{ ok: true; result: R } | { ok: false; error: unknown }> {
  return new Promise((resolve) => {
    const timer = setTimeout(
      () =>
        resolve({ ok: false, error: new InvocationTimeoutError(timeoutMs, context.awsRequestId) }),
      timeoutMs,
    );
    // Promise.resolve().then also turns a synchronous throw into a rejection.
    Promise.resolve()
      .then(() => handler(event, context))
      .then(
        (result) => resolve({ ok: true, result }),
        (error: unknown) => resolve({ ok: false, error }),
      )
      .finally(() => clearTimeout(timer));
  });
}
