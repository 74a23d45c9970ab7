/**
 * fauxqs on a worker thread of its own. In the cloud SQS is not on the functions' CPU; locally
 * the emulator, the ingest front and the batch handler would otherwise share one event loop, and
 * a drain or a burst of requests then measures the emulator's share of it (bench:drain showed
 * that loop at 100 % of a core). The SDK clients talk to it over loopback HTTP either way.
 */
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { startFauxqs } from 'fauxqs';

export interface FauxqsThread {
  port: number;
  stop(): Promise<void>;
}

const READY_TIMEOUT_MS = 20_000;
/**
 * Marks the thread started below, so another worker that imports this module (a bench's, say)
 * does not start an emulator of its own.
 */
const FAUXQS_THREAD = 'mautic-relay:fauxqs-thread';

if (!isMainThread && parentPort && workerData === FAUXQS_THREAD) {
  const port = parentPort;
  const server = await startFauxqs({ port: 0, logger: false });
  port.on('message', () => {
    void server.stop().then(() => port.postMessage({ stopped: true }));
  });
  port.postMessage({ port: server.port });
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
  return {
    port,
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
