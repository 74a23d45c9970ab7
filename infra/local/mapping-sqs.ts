/**
 * The local event source's two SQS calls (ReceiveMessage, DeleteMessageBatch) as plain AWS JSON
 * 1.0 requests to the emulator. Written here rather than taken from the AWS SDK on purpose: in
 * the cloud the mapping's pollers are the Lambda service's, not the function's CPU; locally they
 * run on the emulator's thread (fauxqs-thread.ts), and through the SDK (signing, serialising,
 * its middleware) each call cost about 0.4 ms of CPU: a 200-event batch takes 20 receives and 20
 * deletes (bench:drain: 0.56–0.69 of ideal through the SDK on the handler's loop, 0.84–0.86 with
 * these there, 0.88–0.91 with these on the emulator's thread). The emulator does not check
 * signatures, so none is made; this is never pointed at AWS.
 *
 * Outputs have the SDK's shapes (binary attribute values as bytes); an error answer becomes an
 * Error named after the emulator's `__type`, with its message.
 */
import { Agent, type IncomingMessage, request } from 'node:http';
import {
  DeleteMessageBatchCommand,
  type DeleteMessageBatchCommandOutput,
  ReceiveMessageCommand,
  type ReceiveMessageCommandOutput,
} from '@aws-sdk/client-sqs';
import { readBody } from '../../mautic-simulator/read-body.ts';
import type { MappingSqs } from './sqs-event-source.ts';

/** An answer larger than this is refused (20 receives of 10 messages of 256 KiB fit many times). */
const MAX_ANSWER_BYTES = 16 * 1024 * 1024;

/** The mapping's client for an emulator at `endpoint` (http://127.0.0.1:port). */
export function mappingSqsClient(endpoint: string): MappingSqs & { destroy(): void } {
  const { call, destroy } = mappingSqsCalls(endpoint);
  return Object.assign(mappingSqsOver(call), { destroy });
}

/** A function that makes the mapping's calls by name, as JSON 1.0 requests to the emulator. */
type MappingCall = (
  operation: MappingOperation,
  input: unknown,
  signal?: AbortSignal,
) => Promise<unknown>;

/**
 * The calls behind `mappingSqsClient`, by name: what the emulator's thread makes for the
 * handler's (fauxqs-thread.ts), without a command object around each.
 */
export function mappingSqsCalls(endpoint: string): { call: MappingCall; destroy(): void } {
  const url = new URL(endpoint);
  if (url.protocol !== 'http:')
    throw new TypeError(`mappingSqsClient wants an http:// emulator endpoint, not ${url.protocol}`);
  const agent = new Agent({ keepAlive: true });
  const call = async (operation: MappingOperation, input: unknown, signal?: AbortSignal) => {
    const body = JSON.stringify(input);
    const response = await new Promise<IncomingMessage>((resolve, reject) => {
      const outgoing = request(
        {
          host: url.hostname,
          port: url.port,
          path: url.pathname,
          method: 'POST',
          agent,
          signal,
          headers: {
            'content-type': 'application/x-amz-json-1.0',
            'x-amz-target': `AmazonSQS.${operation}`,
            'content-length': Buffer.byteLength(body),
          },
        },
        resolve,
      );
      outgoing.once('error', reject);
      outgoing.end(body);
    });
    const { body: raw } = await readBody(response, MAX_ANSWER_BYTES);
    if (raw.length > MAX_ANSWER_BYTES) {
      response.destroy();
      throw new Error(`${operation}: the emulator's answer is over ${MAX_ANSWER_BYTES} bytes`);
    }
    const text = raw.toString('utf8');
    const status = response.statusCode ?? 0;
    let answer: Record<string, unknown>;
    try {
      answer = text === '' ? {} : (JSON.parse(text) as Record<string, unknown>);
    } catch {
      throw new Error(`${operation}: the emulator answered ${status} with a body that is not JSON`);
    }
    if (status < 200 || status > 299) {
      const type = typeof answer.__type === 'string' ? answer.__type : `HTTP ${status}`;
      const message = answer.message ?? answer.Message ?? `${operation} failed with ${status}`;
      throw Object.assign(new Error(String(message)), { name: type.split('#').pop() ?? type });
    }
    const output: unknown = { ...answer, $metadata: { httpStatusCode: status } };
    return output;
  };
  const receiving: MappingCall = async (operation, input, signal) => {
    const output = await call(operation, input, signal);
    if (operation === 'ReceiveMessage') {
      for (const message of (output as ReceiveMessageCommandOutput).Messages ?? []) {
        for (const value of Object.values(message.MessageAttributes ?? {})) {
          const binary = value.BinaryValue as unknown;
          if (typeof binary === 'string') value.BinaryValue = base64Bytes(binary);
        }
      }
    }
    return output;
  };
  return { call: receiving, destroy: () => agent.destroy() };
}

/**
 * Bytes of their own (Buffer.from would give a view on a shared pool for small values, and a
 * view posted to another thread clones its whole backing buffer).
 */
function base64Bytes(text: string): Buffer {
  const bytes = Buffer.alloc(Buffer.byteLength(text, 'base64'));
  bytes.write(text, 'base64');
  return bytes;
}

/** The two calls the mapping makes, by name. */
export type MappingOperation = 'ReceiveMessage' | 'DeleteMessageBatch';

/**
 * A MappingSqs whose calls `call` makes, given the operation's name and the command's input:
 * over HTTP (above), or on the emulator's thread (fauxqs-thread.ts). Any other command is a
 * TypeError.
 */
export function mappingSqsOver(call: MappingCall): MappingSqs {
  const client = {
    async send(
      command: ReceiveMessageCommand | DeleteMessageBatchCommand,
      options?: { abortSignal?: AbortSignal },
    ) {
      if (command instanceof ReceiveMessageCommand) {
        return (await call(
          'ReceiveMessage',
          command.input,
          options?.abortSignal,
        )) as ReceiveMessageCommandOutput;
      }
      if (command instanceof DeleteMessageBatchCommand) {
        return (await call(
          'DeleteMessageBatch',
          command.input,
          options?.abortSignal,
        )) as DeleteMessageBatchCommandOutput;
      }
      throw new TypeError(
        'the mapping client makes ReceiveMessage and DeleteMessageBatch calls only',
      );
    },
  };
  return client as MappingSqs;
}
