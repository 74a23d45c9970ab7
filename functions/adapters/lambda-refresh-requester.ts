import { InvokeCommand, type LambdaClient, TooManyRequestsException } from '@aws-sdk/client-lambda';
import type { RefreshAnswer, RefreshRequester } from '../core/ports.ts';
import * as z from '../core/zod.ts';

/** The payload the refresher accepts for an on-demand run. */
interface RefreshRequest {
  force: true;
  reason: string;
  staleUpdatedAt?: string | null;
}

/** The refresher's answer (`RefreshOutcome`), as much of it as callers use; built at first use. */
const answerSchema = () =>
  z.object({
    action: z.enum(['none', 'refreshed', 'failed']),
    why: z.optional(z.string()),
    stored: z.optional(z.object({ updatedAt: z.string(), accessTokenExpiresAt: z.string() })),
  });
let answerSchemaMade: ReturnType<typeof answerSchema> | undefined;

/**
 * Runs the refresher function now with a synchronous (RequestResponse) invoke and hands back its
 * answer. With reserved concurrency 1, an invoke while another run holds the function is throttled
 * (TooManyRequestsException): that is 'busy', not an error. The client should not retry
 * throttles itself (`maxAttempts: 1`): the caller polls the token secret instead.
 */
export class LambdaRefreshRequester implements RefreshRequester {
  readonly #client: LambdaClient;
  readonly #functionName: string;

  constructor(client: LambdaClient, functionName: string) {
    this.#client = client;
    this.#functionName = functionName;
  }

  async refreshNow(
    request: { reason: string; staleUpdatedAt?: string | null },
    timeoutMs: number,
  ): Promise<RefreshAnswer> {
    const payload: RefreshRequest = { force: true, ...request };
    let answer: { FunctionError?: string | undefined; Payload?: Uint8Array | undefined };
    try {
      answer = await this.#client.send(
        new InvokeCommand({
          FunctionName: this.#functionName,
          InvocationType: 'RequestResponse',
          Payload: new TextEncoder().encode(JSON.stringify(payload)),
        }),
        { abortSignal: AbortSignal.timeout(Math.max(1, timeoutMs)) },
      );
    } catch (error) {
      if (error instanceof TooManyRequestsException) return { kind: 'busy' };
      throw error;
    }
    // The error payload is not quoted: only the refresher's log says what went wrong.
    if (answer.FunctionError)
      throw new Error(`The token refresher failed (${answer.FunctionError}): see its log`);
    let body: unknown;
    try {
      body = JSON.parse(new TextDecoder().decode(answer.Payload ?? new Uint8Array()));
    } catch {
      body = undefined;
    }
    answerSchemaMade ??= answerSchema();
    const parsed = answerSchemaMade.safeParse(body);
    if (!parsed.success) throw new Error('The token refresher answered something unexpected');
    const { action, why, stored } = parsed.data;
    return {
      kind: 'answered',
      action,
      ...(why === undefined ? {} : { why }),
      ...(stored === undefined ? {} : { stored }),
    };
  }
}
