import { createServer, type Server } from 'node:http';
import type { Logger, RefreshReport } from '../../functions/core/ports.ts';
import { listenOnLoopback } from '../../mautic-simulator/loopback.ts';
import type { FlowCounters } from './flow-counters.ts';
import type { LocalRefresher } from './local-refresher.ts';

export interface ControlServer {
  readonly url: string;
  close(): Promise<void>;
}

/** How long `POST /refresh` waits for a run under way to finish before its own. */
const BUSY_WAIT_MS = 30_000;

/**
 * The local stack's control endpoint, on 127.0.0.1 only, for the operator commands' `--local`
 * (what the Lambda invoke and the AWS APIs are in the cloud). `POST /refresh` runs the refresher
 * now, as `refresh --env` invokes the function, and answers its outcome: never a token.
 * `GET /flow` answers the last hour's per-minute counts, which the console charts (what
 * CloudWatch holds in the cloud): numbers only.
 */
export async function startControlServer(deps: {
  refresher: LocalRefresher;
  logger: Logger;
  flow: FlowCounters;
}): Promise<ControlServer> {
  const server: Server = createServer((req, res) => {
    const answer = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    };
    if (req.method === 'GET' && req.url === '/flow') return answer(200, deps.flow.report());
    if (req.method !== 'POST' || req.url !== '/refresh') return answer(404, { error: 'not_found' });
    req.resume();
    runNow(deps.refresher).then(
      (outcome) => answer(200, outcome),
      (error: unknown) => {
        deps.logger.error('The refresher failed', { error: String(error) });
        answer(500, { error: 'refresher_failed', message: 'The refresher failed: see the log' });
      },
    );
  });
  const port = await listenOnLoopback(server);
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

async function runNow(refresher: LocalRefresher): Promise<RefreshReport> {
  const until = Date.now() + BUSY_WAIT_MS;
  for (;;) {
    const outcome = await refresher.invoke({ force: true, reason: 'operator' });
    if (outcome !== 'busy') return outcome;
    if (Date.now() > until) throw new Error('the refresher stayed busy');
    await refresher.idle();
  }
}
