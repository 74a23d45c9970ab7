/**
 * bench:ingest's load generator: signed requests sent over keep-alive connections with a fixed
 * number in flight, each timed on its own.
 */
import { type Agent, request } from 'node:http';
import type { SignedRequest } from './stripe-source.ts';

const REQUEST_TIMEOUT_MS = 10_000;

export interface PhaseResult {
  seconds: number;
  latenciesMs: number[];
  statuses: Map<number, number>;
  samples: Map<number, string>;
  errors: string[];
}

/** Sends every request with `concurrency` in flight at once, each timed on its own. */
export async function runPhase(
  url: string,
  agent: Agent,
  requests: ReadonlyArray<SignedRequest>,
  concurrency: number,
): Promise<PhaseResult> {
  const result: PhaseResult = {
    seconds: 0,
    latenciesMs: [],
    statuses: new Map(),
    samples: new Map(),
    errors: [],
  };
  let next = 0;
  const worker = async () => {
    while (next < requests.length) {
      const signed = requests[next++] as SignedRequest;
      const started = performance.now();
      try {
        const { status, body } = await post(url, agent, signed);
        result.latenciesMs.push(performance.now() - started);
        result.statuses.set(status, (result.statuses.get(status) ?? 0) + 1);
        if (!result.samples.has(status)) result.samples.set(status, body.slice(0, 300));
      } catch (error) {
        result.errors.push(error instanceof Error ? error.message : String(error));
      }
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: concurrency }, worker));
  result.seconds = (performance.now() - started) / 1000;
  return result;
}

function post(
  url: string,
  agent: Agent,
  signed: SignedRequest,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'POST', agent, headers: signed.headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }),
      );
      res.on('error', reject);
    });
    req.setTimeout(REQUEST_TIMEOUT_MS, () =>
      req.destroy(new Error(`no answer within ${REQUEST_TIMEOUT_MS} ms`)),
    );
    req.on('error', reject);
    req.end(signed.body);
  });
}

export function requireAll202(side: string, phaseName: string, phase: PhaseResult): void {
  const others = [...phase.statuses].filter(([status]) => status !== 202);
  if (others.length === 0 && phase.errors.length === 0) return;
  const lines = others.map(
    ([status, count]) => `  ${count} × ${status}: ${phase.samples.get(status) ?? ''}`,
  );
  if (phase.errors.length > 0) {
    lines.push(`  ${phase.errors.length} × request error, first: ${phase.errors[0]}`);
  }
  throw new Error(`${side} ${phaseName}: not every answer was 202\n${lines.join('\n')}`);
}
