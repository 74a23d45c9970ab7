/** What `withoutSdkLogging` needs of a client: every AWS SDK v3 client has it. */
interface SdkClient {
  middlewareStack: { remove(toRemove: string): boolean };
}

/**
 * The AWS SDK's logger middleware copies each command's input and output, with sensitive members
 * masked, for the client's logger, and builds the copies before it calls the logger
 * (`logger?.info?.({ input: inputFilterSensitiveLog(args.input), … })` in @aws-sdk/core), even
 * when the logger is the SDK's default, which discards them. The relay gives its clients no
 * logger, so each copy is waste: in `npm run bench:e2e` (2026-11-28) it was about 6 % of the CPU
 * of both the ingest thread (each `SendMessageBatch`) and the batch handler's (each receive,
 * delete and DynamoDB write). The middleware is removed by its name, the SDK's own API for it;
 * the composition roots call this on the clients they are given.
 *
 * @example
 * const sqs = withoutSdkLogging(new SQSClient({}));
 */
export function withoutSdkLogging<T extends SdkClient>(client: T): T {
  client.middlewareStack.remove('loggerMiddleware');
  return client;
}
