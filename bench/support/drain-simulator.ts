/**
 * bench:drain's Mautic: the simulator on a worker thread of the bench's process, answering every
 * API call after a fixed latency. Mautic is another host in production, so its parsing and
 * writing of 200 items a call must not take the handler's event loop (on the same loop it did,
 * and the calls took longer than the latency). The bench asks it questions by message, one at a
 * time: how many items the run's answered calls carried (cheap, asked every few milliseconds
 * while the queue drains), and, off the clock, what it holds and which calls it had.
 */
import type { EventLoopUtilization } from 'node:perf_hooks';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { type MauticSimulator, startMauticSimulator } from '../../mautic-simulator/server.ts';

/** Marks the thread started below, so that another worker importing this module serves nothing. */
const DRAIN_SIMULATOR_THREAD = 'bench:drain simulator';

/** The contacts a drain creates and edits: `drain-<n>@example.com`. */
export function drainEmail(index: number): string {
  return `drain-${index}@example.com`;
}

/** The call whose answered items count a run's events as delivered, e.g. `POST /api/contacts/batch/new`. */
export interface DeliveringCall {
  method: string;
  path: string;
}

/** Since the mark: what the simulator holds of the drain's contacts, and the API calls. */
interface SimulatorCounts {
  /** Contacts with a drain email. */
  contacts: number;
  /** Distinct emails among them. */
  emails: number;
  /** Those of them whose `field` holds `value` (the edit run's check). */
  holding: number;
  apiCalls: number;
  /** `GET /api/contacts`: the lookups of contacts named by `match`. */
  lookups: number;
}

export interface SimulatorThread {
  url: string;
  accessToken: string;
  /** From now on, counts() and carried() leave out what came before; carried() counts `by`. */
  mark(by: DeliveringCall): Promise<unknown>;
  /** Since the mark: the items the answered (2xx) delivering calls carried. */
  carried(): Promise<number>;
  /** Lists the contacts, at a cost in proportion to their number: only off the clock. */
  counts(holding: { field: string; value: string }): Promise<SimulatorCounts>;
  /**
   * The simulator thread's event loop utilisation, since `before` when given: near 1, its one
   * loop (parsing, applying and presenting 200 contacts a call) is what the calls wait on.
   */
  eventLoop(before?: EventLoopUtilization): EventLoopUtilization;
  /** Stores `count` drain contacts directly, as if created before (no API call). */
  seed(count: number): Promise<unknown>;
  close(): Promise<void>;
}

type Question =
  | { ask: 'mark'; by: DeliveringCall }
  | { ask: 'carried' }
  | { ask: 'counts'; field: string; value: string }
  | { ask: 'seed'; count: number }
  | { ask: 'close' };

if (!isMainThread && workerData?.thread === DRAIN_SIMULATOR_THREAD) {
  await serveSimulator(workerData.latencyMs);
}

/** The Mautic simulator on a worker thread, answering every API call after `latencyMs`. */
export async function startSimulatorThread(latencyMs: number): Promise<SimulatorThread> {
  const worker = new Worker(new URL(import.meta.url), {
    workerData: { thread: DRAIN_SIMULATOR_THREAD, latencyMs },
  });
  const next = <T>() =>
    new Promise<T>((resolve, reject) => {
      const onError = (error: Error) => reject(error);
      worker.once('error', onError);
      worker.once('message', (message: T) => {
        worker.off('error', onError);
        resolve(message);
      });
    });
  const started = await next<{ url: string; accessToken: string }>();
  // One question at a time: each answer is the next message.
  let queue: Promise<unknown> = Promise.resolve();
  const ask = <T>(question: Question) => {
    const answer = queue.then(() => {
      const reply = next<T>();
      worker.postMessage(question);
      return reply;
    });
    queue = answer.catch(() => undefined);
    return answer;
  };
  return {
    ...started,
    mark: (by) => ask<null>({ ask: 'mark', by }),
    carried: () => ask<number>({ ask: 'carried' }),
    counts: ({ field, value }) => ask<SimulatorCounts>({ ask: 'counts', field, value }),
    seed: (count) => ask<null>({ ask: 'seed', count }),
    eventLoop: (before) => worker.performance.eventLoopUtilization(before),
    async close() {
      await ask<null>({ ask: 'close' });
      await worker.terminate();
    },
  };
}

async function serveSimulator(latencyMs: number): Promise<void> {
  const sim = await startMauticSimulator({
    faults: { seed: 1, latencyMs: { min: latencyMs, max: latencyMs }, scope: 'api' },
  });
  // Requests before this index were an earlier run's, or the warm-up's.
  let mark = 0;
  let delivering: DeliveringCall = { method: 'POST', path: '/api/contacts/batch/new' };
  const answer = (question: Question): unknown => {
    switch (question.ask) {
      case 'mark':
        mark = sim.requests.length;
        delivering = question.by;
        return null;
      case 'carried':
        return sim.requests
          .slice(mark)
          .filter(
            (entry) =>
              entry.method === delivering.method &&
              entry.path === delivering.path &&
              entry.status >= 200 &&
              entry.status < 300,
          )
          .reduce((sum, entry) => sum + (entry.items ?? 0), 0);
      case 'counts':
        return counts(sim, mark, question);
      case 'seed':
        for (let index = 0; index < question.count; index++) {
          sim.seed('contacts', { email: drainEmail(index), firstname: 'Drain', lastname: 'Seed' });
        }
        return null;
      case 'close':
        return sim.close().then(() => null);
    }
  };
  parentPort?.on('message', (question: Question) => {
    void Promise.resolve(answer(question)).then((reply) => parentPort?.postMessage(reply));
  });
  parentPort?.postMessage({ url: sim.url, accessToken: sim.issueToken().accessToken });
}

function counts(
  sim: MauticSimulator,
  mark: number,
  { field, value }: { field: string; value: string },
): SimulatorCounts {
  const contacts = sim
    .records('contacts')
    .filter((contact) => String(contact.email).startsWith('drain-'));
  const since = sim.requests.slice(mark);
  return {
    contacts: contacts.length,
    emails: new Set(contacts.map((contact) => contact.email)).size,
    holding: contacts.filter((contact) => contact[field] === value).length,
    apiCalls: since.filter((entry) => entry.path.startsWith('/api/')).length,
    lookups: since.filter((entry) => entry.method === 'GET' && entry.path === '/api/contacts')
      .length,
  };
}
