import { InvokeCommand, type LambdaClient } from '@aws-sdk/client-lambda';
import type { RefreshRequester } from '../core/ports.ts';

/** The payload the refresher accepts for an on-demand run. */
interface RefreshRequest {
  force: true;
  reason: string;
}

/** Asks the refresher function for an immediate refresh with an asynchronous invoke. */
export class LambdaRefreshRequester implements RefreshRequester {
  readonly #client: LambdaClient;
  readonly #functionName: string;

  constructor(client: LambdaClient, functionName: string) {
    this.#client = client;
    this.#functionName = functionName;
  }

  async requestRefresh(reason: string): Promise<void> {
    const request: RefreshRequest = { force: true, reason };
    await this.#client.send(
      new InvokeCommand({
        FunctionName: this.#functionName,
        InvocationType: 'Event',
        Payload: new TextEncoder().encode(JSON.stringify(request)),
      }),
    );
  }
}
