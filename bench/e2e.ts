/**
 * End to end (issue 38, item 4): creates posted to the local stack (`startLocalStack`, as `npm
 * start` runs it, ingest thread, fauxqs thread, event source and batch handler) as signed
 * requests of 100, 8 in flight, while Mautic (the simulator on a worker thread,
 * bench/support/drain-simulator.ts) answers every API call in a fixed time. Timed from the first
 * 202 to the moment the simulator has answered calls carrying every event (polled every 5 ms),
 * against the ideal: `MAX_CONCURRENCY` calls in flight, 200 contacts each, one call per latency.
 * Ingest and drain run together on the same cores. De-duplication and the per-record bound are
 * off, as in bench:ingest; every other setting is the local stack's default. Off the clock, the simulator must hold every
 * contact once.
 *
 *   npm run bench:e2e -- [events=20000] [latencyMs=50]
 *
 * The last line is `SUMMARY {json}`, the ratio under `e2eFloorRatio`.
 */
import { randomBytes } from 'node:crypto';
import { availableParallelism } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseWebhookSecret, signWebhook } from '../functions/core/ingest/webhook-auth.ts';
import { loadLocalConfig } from '../infra/local/local-config.ts';
import { startLocalStack } from '../infra/local/local-stack.ts';
import { DEFAULT_SIMULATOR_CLIENT } from '../mautic-simulator/server.ts';
import { drainEmail, startSimulatorThread } from './support/drain-simulator.ts';
import { loadAverage, percentile, positiveInteger, round } from './support/figures.ts';

const EVENTS_PER_REQUEST = 100;
const IN_FLIGHT = 8;
const BATCH_SIZE = 200;
const TIMEOUT_MS = 120_000;

const events = positiveInteger(process.argv[2], 20_000, 'events');
const latencyMs = positiveInteger(process.argv[3], 50, 'latencyMs');
const sim = await startSimulatorThread(latencyMs);
const secret = `whsec_${randomBytes(32).toString('base64')}`;
const key = parseWebhookSecret(secret);
const config = loadLocalConfig({
  PORT: '0',
  MAUTIC_BASE_URL: sim.url,
  MAUTIC_CLIENT_ID: DEFAULT_SIMULATOR_CLIENT.clientId,
  MAUTIC_CLIENT_SECRET: DEFAULT_SIMULATOR_CLIENT.clientSecret,
  WEBHOOK_SECRET: secret,
  DEDUP_WINDOW_SECONDS: '0',
  // The per-record bound makes two dynalite calls per record of a request: with it on, the
  // accepting is dynalite's (run 1 of 2026-11-28: 47.6 s for 20,000, 0.05 of ideal).
  MAX_RECORD_EVENTS_PER_MINUTE: '0',
});
const stack = await startLocalStack(config, () => {});
const slots = config.MAX_CONCURRENCY;
const ideal = (slots * BATCH_SIZE * 1000) / latencyMs;

/** Requests signed up front, so the clock times the relay, not the signing. */
const bodies = Array.from({ length: Math.ceil(events / EVENTS_PER_REQUEST) }, (_, r) => {
  const count = Math.min(EVENTS_PER_REQUEST, events - r * EVENTS_PER_REQUEST);
  const body = JSON.stringify(
    Array.from({ length: count }, (_, i) => ({
      entity: 'contacts',
      action: 'create',
      data: { email: drainEmail(r * EVENTS_PER_REQUEST + i) },
    })),
  );
  const id = `msg_e2e_${r}`;
  const timestamp = Math.floor(Date.now() / 1000);
  const headers = {
    'content-type': 'application/json',
    'webhook-id': id,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': signWebhook(key, id, timestamp, new TextEncoder().encode(body)),
  };
  return { body, headers };
});

await sim.mark({ method: 'POST', path: '/api/contacts/batch/new' });
const latencies: number[] = [];
let firstAccepted: number | undefined;
let lastAccepted = 0;
let next = 0;
const started = performance.now();
await Promise.all(
  Array.from({ length: IN_FLIGHT }, async () => {
    while (next < bodies.length) {
      const request = bodies[next++] as (typeof bodies)[number];
      const sent = performance.now();
      const response = await fetch(stack.ingestUrl, { method: 'POST', ...request });
      await response.arrayBuffer();
      if (response.status !== 202) throw new Error(`POST answered ${response.status}`);
      lastAccepted = performance.now();
      firstAccepted ??= lastAccepted;
      latencies.push(lastAccepted - sent);
    }
  }),
);
// Where the time goes: how much was delivered while the ingest was still accepting, and how fast
// the rest drained once it had stopped.
const carriedWhenAccepted = await sim.carried();
const deadline = performance.now() + TIMEOUT_MS;
while ((await sim.carried()) < events) {
  if (performance.now() > deadline) throw new Error(`${await sim.carried()} of ${events} carried`);
  await sleep(5);
}
const lastContact = performance.now();
const counts = await sim.counts({ field: 'email', value: '' });
await stack.stop();
await sim.close();
if (counts.contacts !== events || counts.emails !== events)
  throw new Error(`the simulator holds ${counts.contacts} contacts, ${counts.emails} emails`);

const first = firstAccepted ?? started;
const seconds = (lastContact - first) / 1000;
const rate = events / seconds;
const sorted = latencies.sort((a, b) => a - b);
console.log(
  `e2e: ${events} creates as requests of ${EVENTS_PER_REQUEST}, ${IN_FLIGHT} in flight, Mautic ` +
    `${latencyMs} ms a call, MAX_CONCURRENCY ${slots}, DEDUP_WINDOW_SECONDS=0, ` +
    `MAX_RECORD_EVENTS_PER_MINUTE=0, node ` +
    `${process.version}, ${availableParallelism()} CPUs, load ${loadAverage()}`,
);
console.log(
  `  accepting: ${((lastAccepted - first) / 1000).toFixed(2)} s after the first 202 ` +
    `(request p50 ${percentile(sorted, 0.5).toFixed(0)} ms, p99 ${percentile(sorted, 0.99).toFixed(0)} ms)`,
);
console.log(
  `  last contact: ${seconds.toFixed(2)} s after the first 202, ` +
    `${((lastContact - lastAccepted) / 1000).toFixed(2)} s after the last`,
);
const acceptingS = (lastAccepted - first) / 1000;
const drainingS = (lastContact - lastAccepted) / 1000;
const drainRate = (events - carriedWhenAccepted) / drainingS;
console.log(
  `  delivered while accepting: ${carriedWhenAccepted} events (${(carriedWhenAccepted / acceptingS).toFixed(0)}/s); ` +
    `the other ${events - carriedWhenAccepted} after the last 202 at ${drainRate.toFixed(0)}/s ` +
    `(${(drainRate / ideal).toFixed(2)} of ideal)`,
);
console.log(
  `  events/s: ${rate.toFixed(0)}; ideal ${ideal.toFixed(0)} (${slots} × ${BATCH_SIZE} ÷ ${latencyMs} ms)`,
);
const rssMiB = process.resourceUsage().maxRSS / 1024;
console.log(`  peak RSS of the whole stack (one process, its threads): ${rssMiB.toFixed(0)} MiB`);
console.log(`  measured / ideal: ${(rate / ideal).toFixed(2)} (goal >= 0.8)`);
console.log(
  `SUMMARY ${JSON.stringify({
    figure: 'e2e_floor_ratio',
    e2eFloorRatio: round(rate / ideal, 3),
    events_per_s: round(rate, 0),
    ideal_events_per_s: round(ideal, 0),
    accepting_s: round((lastAccepted - first) / 1000, 2),
    total_s: round(seconds, 2),
    delivered_while_accepting: carriedWhenAccepted,
    drain_after_accepting_events_per_s: round(drainRate, 0),
    request_p99_ms: round(percentile(sorted, 0.99), 0),
    rss_mib: round(rssMiB, 0),
    events,
    latency_ms: latencyMs,
    load_average: loadAverage().split(' ').map(Number),
  })}`,
);
