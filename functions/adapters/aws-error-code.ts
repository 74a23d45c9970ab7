/**
 * The code of an AWS SDK failure, for a log line: the service's error code (`Code`, or the
 * name of a service exception, which is its code), else a network code (`ECONNREFUSED`), else
 * undefined. Never the message, which may quote what was sent.
 */
export function awsErrorCode(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const fields = error as { Code?: unknown; code?: unknown; $metadata?: unknown; name?: unknown };
  if (typeof fields.Code === 'string') return fields.Code;
  if (typeof fields.code === 'string') return fields.code;
  if (fields.$metadata !== undefined && typeof fields.name === 'string') return fields.name;
  return undefined;
}
