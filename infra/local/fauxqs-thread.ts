/**
 * fauxqs (with its FIFO fixes, fauxqs-fifo.ts) on a worker thread of its own. In the cloud SQS is not on the functions' CPU; locally
 * the emulator, the ingest front and the batch handler would otherwise share one event loop, and
 * a drain or a burst of requests then measures the emulator's share of it (bench:drain showed
 * that loop at 100 % of a core). The SDK clients talk to it over loopback HTTP either way.
 *
 * The same thread also makes the local event source's SQS calls (`mappingSqs()`): in the cloud
 * the mapping's pollers are the Lambda service's, not the function's, but locally their 20
 * receives and 20 deletes per 200-event batch, each an HTTP exchange, took as much of the batch
 * handler's event loop as the handler itself, and its calls to Mautic waited behind them. Here
 * the handler's thread only posts each call to this thread and reads back its answer.
 */
import {
  isMainThread,
  type MessagePort,
  parentPort,
  Worker,
  workerData,
} from 'node:worker_threads';
import { startFauxqsFifoFixed } from './fauxqs-fifo.ts';
import { type MappingOperation, mappingSqsCalls, mappingSqsOver } from './mapping-sqs.ts';
import type { MappingSqs } from './sqs-event-source.ts';

export interface FauxqsThread {
  port: number;
  /** The event source's client: its calls are made on the emulator's thread. */
  mappingSqs(): MappingSqs & { destroy(): void };
  stop(): Promise<void>;
}

const READY_TIMEOUT_MS = 20_000;
/**
 * Marks the thread started below, so another worker that imports this module (a bench's, say)
 * does not start an emulator of its own.
 */
const FAUXQS_THREAD = 'mautic-relay:fauxqs-thread';

/** Handler thread → emulator thread, on a mapping client's own channel. */
type CallMessage =
  | { type: 'call'; id: number; operation: MappingOperation; input: unknown }
  | { type: 'abort'; id: number };
/** Emulator thread → handler thread. */
type AnswerMessage =
  | { id: number; output: unknown }
  | { id: number; error: { name: string; message: string } };

if (!isMainThread && parentPort && workerData === FAUXQS_THREAD) {
  const port = parentPort;
  const server = await startFauxqsFifoFixed({ port: 0, logger: false });
  const endpoint = `http://127.0.0.1:${server.port}`;
  const channels = new Set<MessagePort>();
  port.on('message', (message: 'stop' | { type: 'mapping'; channel: MessagePort }) => {
    if (message === 'stop') {
      // Nothing more is answered: calls still open are rejected on the other side when this
      // thread ends, all alike.
      for (const channel of channels) channel.close();
      void server.stop().then(() => port.postMessage({ stopped: true }));
      return;
    }
    const { channel } = message;
    channels.add(channel);
    serveMapping(channel, mappingSqsCalls(endpoint), () => channels.delete(channel));
  });
  port.postMessage({ port: server.port });
}

/**
 * Makes the calls that arrive on `channel` with `client`, answering each on the channel. When
 * the channel closes (the client was destroyed, or the thread stops), the calls still open are
 * aborted and the client's sockets closed. An aborted long poll can still take a message on
 * fauxqs (it finishes the poll for a client that left, as the HTTP client alone shows), so the
 * event source stops its polls before its client is destroyed.
 */
function serveMapping(
  channel: MessagePort,
  client: ReturnType<typeof mappingSqsCalls>,
  onClose: () => void,
): void {
  const aborts = new Map<number, AbortController>();
  channel.once('close', () => {
    for (const controller of aborts.values()) controller.abort();
    aborts.clear();
    client.destroy();
    onClose();
  });
  channel.on('message', (message: CallMessage) => {
    if (message.type === 'abort') {
      aborts.get(message.id)?.abort();
      return;
    }
    const { id, operation, input } = message;
    const controller = new AbortController();
    aborts.set(id, controller);
    const call = client.call(operation, input, controller.signal);
    call.then(
      (output) => {
        aborts.delete(id);
        channel.postMessage({ id, output } satisfies AnswerMessage);
      },
      (error: unknown) => {
        aborts.delete(id);
        const { name, message: text } =
          error instanceof Error ? error : { name: 'Error', message: String(error) };
        channel.postMessage({ id, error: { name, message: text } } satisfies AnswerMessage);
      },
    );
  });
}

/** Starts fauxqs on an ephemeral loopback port in a worker thread. */
export async function startFauxqsThread(): Promise<FauxqsThread> {
  const worker = new Worker(new URL(import.meta.url), { workerData: FAUXQS_THREAD });
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => {
      void worker.terminate();
      reject(new Error(`fauxqs did not start within ${READY_TIMEOUT_MS} ms`));
    }, READY_TIMEOUT_MS);
    worker.once('message', (message: { port: number }) => {
      clearTimeout(timer);
      resolve(message.port);
    });
    worker.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
  });
  let stopping: Promise<void> | undefined;
  let exited = false;
  worker.once('exit', () => {
    exited = true;
  });
  return {
    port,
    mappingSqs: () => {
      if (exited || stopping) throw new Error('the fauxqs thread has stopped');
      return threadMappingSqs(worker);
    },
    stop() {
      stopping ??= (async () => {
        const stopped = new Promise<void>((resolve) => {
          worker.once('message', () => resolve());
          worker.once('exit', () => resolve());
        });
        worker.postMessage('stop');
        await Promise.race([stopped, new Promise((resolve) => setTimeout(resolve, 5_000))]);
        await worker.terminate();
      })();
      return stopping;
    },
  };
}

/**
 * A mapping client whose calls the emulator's thread makes (with `mappingSqsCalls`), over a
 * channel of its own. Errors come back with their name and message; an abort signal aborts the
 * call there. Calls still open when it is destroyed, or when the thread ends, are rejected.
 */
function threadMappingSqs(worker: Worker): MappingSqs & { destroy(): void } {
  const { port1: here, port2: there } = new MessageChannel();
  worker.postMessage({ type: 'mapping', channel: there }, [there]);
  const pending = new Map<number, { resolve(output: unknown): void; reject(error: Error): void }>();
  let nextId = 0;
  let closed: Error | undefined;
  const closeAll = (error: Error) => {
    closed ??= error;
    for (const call of pending.values()) call.reject(error);
    pending.clear();
    here.close();
  };
  const onExit = () => closeAll(new Error('the fauxqs thread has stopped'));
  worker.once('exit', onExit);
  // The thread closes every channel when it stops (and this side when destroyed: a no-op then).
  here.once('close', onExit);
  here.on('message', (answer: AnswerMessage) => {
    const call = pending.get(answer.id);
    if (call === undefined) return;
    pending.delete(answer.id);
    if ('error' in answer) {
      call.reject(Object.assign(new Error(answer.error.message), { name: answer.error.name }));
    } else call.resolve(answer.output);
  });

  const call = (
    operation: MappingOperation,
    input: unknown,
    signal?: AbortSignal,
  ): Promise<unknown> => {
    if (closed) return Promise.reject(closed);
    // As an aborted call of the HTTP client fails: an AbortError, whatever the signal's reason.
    if (signal?.aborted) return Promise.reject(abortError());
    const id = nextId++;
    return new Promise<unknown>((resolve, reject) => {
      const onAbort = () => here.postMessage({ type: 'abort', id } satisfies CallMessage);
      try {
        here.postMessage({ type: 'call', id, operation, input } satisfies CallMessage);
      } catch (error) {
        // An input that cannot be cloned: nothing was sent.
        reject(error);
        return;
      }
      signal?.addEventListener('abort', onAbort, { once: true });
      const settle = () => signal?.removeEventListener('abort', onAbort);
      pending.set(id, {
        resolve: (output) => {
          settle();
          resolve(output);
        },
        reject: (error) => {
          settle();
          reject(error);
        },
      });
    });
  };
  const client = {
    ...mappingSqsOver(call),
    destroy() {
      worker.off('exit', onExit);
      here.off('close', onExit);
      if (!closed) closeAll(new Error('the mapping client was destroyed'));
    },
  };
  return client;
}

function abortError(): Error {
  return Object.assign(new Error('This operation was aborted'), { name: 'AbortError' });
}
