/**
 * A Secrets Manager request's parameters as AWS checks them, and the errors it answers
 * (secrets-manager-fake.ts sends them). The messages never repeat a secret value.
 */

/** A request's JSON body. */
export type Body = Record<string, unknown>;

/** An error AWS would answer; `code` becomes the SDK's exception name. */
export class ServiceError extends Error {
  readonly code: string;
  readonly status: number;
  constructor(code: string, message: string, status = 400) {
    super(message);
    this.name = 'ServiceError';
    this.code = code;
    this.status = status;
  }
}

export function requiredString(input: Body, key: string): string {
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
export function versionIdParam(input: Body, key: string): string | undefined {
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

export function stageParam(input: Body, key: string): string | undefined {
  const value = optionalString(input, key);
  if (value !== undefined && (value.length < 1 || value.length > 256)) {
    throw new ServiceError(
      'ValidationException',
      `1 validation error detected: Value at '${memberName(key)}' failed to satisfy constraint: Member must have length between 1 and 256`,
    );
  }
  return value;
}

export function stagesParam(input: Body, key: string): string[] | undefined {
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
export function secretStringParam(input: Body, required: true): string;
export function secretStringParam(input: Body, required: false): string | undefined;
export function secretStringParam(input: Body, required: boolean): string | undefined {
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

export function missing(key: string): ServiceError {
  return new ServiceError(
    'ValidationException',
    `1 validation error detected: Value at '${memberName(key)}' failed to satisfy constraint: Member must not be null`,
  );
}

/** AWS names members in camel case in validation messages. */
function memberName(key: string): string {
  return key.charAt(0).toLowerCase() + key.slice(1);
}

export function pickString(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}
