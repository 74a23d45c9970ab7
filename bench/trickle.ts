/**
 * What waiting costs the batch function: a trickle (one event every `intervalMs`) and then a
 * burst (`burst` contact creates posted as requests of 50, 8 at once) through the local stack
 * (`startLocalStack`, as `npm start` runs it, at its shipped settings) into the Mautic simulator,
 * answering each call in `callMs` plus `perItemMs` per item. Lambda bills the batch function's
 * duration, so a function that waits for its batch to fill pays for the wait: the bench sums
 * each invocation's billed time (the local event source's report, Lambda's REPORT line as it
 * were) and prints, for the trickle, billed seconds per hour and per event, the part of them
 * spent waiting on Mautic, Mautic calls per event, and what a month of it costs at 512 MB on
 * arm64; for the burst, its Mautic calls and calls per event (ideal: one per 200).
 *
 *   npm run bench:trickle -- [minutes=2] [intervalMs=2000] [burst=2000] [callMs=0] [perItemMs=0]
 *
 * The last line is `SUMMARY {json}` for scripts.
 */
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseWebhookSecret, signWebhook } from '../functions/core/ingest/webhook-auth.ts';
import { loadLocalConfig } from '../infra/local/local-config.ts';
import { startLocalStack } from '../infra/local/local-stack.ts';
import { DEFAULT_SIMULATOR_CLIENT, startMauticSimulator } from '../mautic-simulator/server.ts';
import { loadAverage, positiveInteger, round } from './support/figures.ts';

/** Lambda arm64 list prices (docs/performance.md, cost), and the shipped memory. */
const GB_SECOND_USD = 0.0000133334;
const REQUEST_USD = 0.2 / 1_000_000;
const MEMORY_GB = 0.5;
const HOURS_PER_MONTH = 730;

const args = process.argv.slice(2);
const minutes = positiveInteger(args[0], 2, 'minutes');
const intervalMs = positiveInteger(args[1], 2_000, 'intervalMs');
const burst = positiveInteger(args[2], 2_000, 'burst');
const callMs = Number(args[3] ?? 0);
const perItemMs = Number(args[4] ?? 0);

/** What the local stack printed that the bench counts: invocations and Mautic calls. */
interface Tally {
  invocations: number;
  billedMs: number;
  mauticMs: number;
}

const tally: Tally = { invocations: 0, billedMs: 0, mauticMs: 0 };
const read = (line: string) => {
  const call = /^(delivered|refused) .*, (\d+) ms$/.exec(line);
  if (call) tally.mauticMs += Number(call[2]);
  if (!line.startsWith('Batch invocation ')) return;
  const fields = JSON.parse(line.slice(line.indexOf('{'))) as { billedMs: number };
  tally.invocations++;
  tally.billedMs += fields.billedMs;
};

const sim = await startMauticSimulator(
  callMs > 0 || perItemMs > 0
    ? { faults: { seed: 1, latencyMs: { min: callMs, max: callMs, perItem: perItemMs } } }
    : {},
);
const secret = `whsec_${randomBytes(32).toString('base64')}`;
const key = parseWebhookSecret(secret);
const stack = await startLocalStack(
  loadLocalConfig({
    PORT: '0',
    MAUTIC_BASE_URL: sim.url,
    MAUTIC_CLIENT_ID: DEFAULT_SIMULATOR_CLIENT.clientId,
    MAUTIC_CLIENT_SECRET: DEFAULT_SIMULATOR_CLIENT.clientSecret,
    WEBHOOK_SECRET: secret,
    // The invocation lines are DEBUG lines; every other setting is npm start's.
    LOG_LEVEL: 'DEBUG',
  }),
  read,
);

let posted = 0;
async function postEvents(count: number): Promise<void> {
  const body = JSON.stringify(
    Array.from({ length: count }, () => ({
      entity: 'contacts',
      action: 'create',
      data: { email: `trickle-${posted++}@example.com` },
    })),
  );
  const id = `msg_${randomBytes(8).toString('hex')}`;
  const timestamp = Math.floor(Date.now() / 1000);
  const response = await fetch(stack.ingestUrl, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'webhook-id': id,
      'webhook-timestamp': String(timestamp),
      'webhook-signature': signWebhook(key, id, timestamp, new TextEncoder().encode(body)),
    },
    body,
  });
  if (response.status !== 202) throw new Error(`POST answered ${response.status}`);
}

/** Waits until the simulator holds every posted contact (bounded). */
async function delivered(timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (sim.records('contacts').length < posted) {
    if (Date.now() > deadline) throw new Error(`${sim.records('contacts').length} of ${posted}`);
    await sleep(50);
  }
  // The invocation that delivered the last ones reports once it has answered.
  await sleep(1_500);
}

const creates = () => sim.requests.filter((r) => r.path === '/api/contacts/batch/new').length;

console.log(`load average ${loadAverage()}`);
console.log(
  `trickle: 1 event every ${intervalMs} ms for ${minutes} min; Mautic ${callMs} ms a call + ${perItemMs} ms an item`,
);
const trickleStart = Date.now();
const trickleEnd = trickleStart + minutes * 60_000;
for (let next = trickleStart; next < trickleEnd; next += intervalMs) {
  await sleep(Math.max(0, next - Date.now()));
  await postEvents(1);
}
await delivered(60_000);
const trickleSeconds = (Date.now() - trickleStart) / 1000;
const trickle = { ...tally, events: posted, calls: creates() };

const perHour = (value: number) => (value / trickleSeconds) * 3600;
const billedPerHour = perHour(trickle.billedMs / 1000);
const monthlyUsd =
  billedPerHour * HOURS_PER_MONTH * MEMORY_GB * GB_SECOND_USD +
  perHour(trickle.invocations) * HOURS_PER_MONTH * REQUEST_USD;
console.log(
  `  ${trickle.events} events, ${trickle.invocations} invocations, ${trickle.calls} Mautic calls (${round(trickle.calls / trickle.events, 3)} per event)`,
);
console.log(
  `  billed ${round(billedPerHour, 1)} s/hour, ${round(trickle.billedMs / trickle.events, 1)} ms/event, of which waiting on Mautic ${round(trickle.mauticMs / trickle.events, 1)} ms/event`,
);
console.log(`  a month of it at 512 MB: $${round(monthlyUsd, 2)}`);

// The burst: 40 requests of 50 for 2,000, 8 in flight.
Object.assign(tally, { invocations: 0, billedMs: 0, mauticMs: 0 });
const callsBefore = creates();
const requests = Math.ceil(burst / 50);
let sent = 0;
const burstStart = Date.now();
await Promise.all(
  Array.from({ length: 8 }, async () => {
    while (sent < requests) {
      sent++;
      await postEvents(50);
    }
  }),
);
await delivered(120_000);
const burstCalls = creates() - callsBefore;
const burstSizes = sim.requests
  .filter((r) => r.path === '/api/contacts/batch/new')
  .slice(callsBefore)
  .map((r) => r.items);
const burstEvents = requests * 50;
console.log(
  `burst: ${burstEvents} creates as ${requests} requests of 50, 8 at once: ${burstCalls} Mautic calls (${round(burstCalls / burstEvents, 4)} per event; ideal ${Math.ceil(burstEvents / 200)}), billed ${round(tally.billedMs / 1000, 1)} s, ${round((Date.now() - burstStart) / 1000, 1)} s to deliver`,
);
console.log(`  items per call: ${burstSizes.join(' ')}`);

await stack.stop();
await sim.close();
console.log(
  `SUMMARY ${JSON.stringify({
    figure: 'trickle_billed_seconds_per_hour',
    value: round(billedPerHour, 1),
    trickle_events: trickle.events,
    trickle_billed_ms_per_event: round(trickle.billedMs / trickle.events, 1),
    trickle_mautic_ms_per_event: round(trickle.mauticMs / trickle.events, 1),
    trickle_calls_per_event: round(trickle.calls / trickle.events, 3),
    trickle_monthly_usd: round(monthlyUsd, 2),
    burst_events: burstEvents,
    burst_calls: burstCalls,
    burst_calls_per_event: round(burstCalls / burstEvents, 4),
    interval_ms: intervalMs,
    call_ms: callMs,
    per_item_ms: perItemMs,
  })}`,
);
