/**
 * A Mautic outage at the shipped settings, as it was measured before the circuit: `npm start`
 * with no RETRY_* or CIRCUIT_* overrides, against a Mautic simulator in this process; 100
 * contacts delivered, then 25 every 10 s for 5 minutes, while Mautic answers every call 503 for
 * 10 minutes (an outage behind a proxy); then Mautic is back. Prints the calls made to the failing Mautic per minute of
 * the outage (and its peak), how long after the recovery the last contact arrived, in how many
 * calls and how many items each, whether anything was lost, doubled or dead-lettered, and a last
 * line `SUMMARY {json}` for scripts. It takes the outage's length and a few minutes more.
 *
 *   npm run bench:outage -- [outageSeconds=600] [trafficSeconds=300] [everySeconds=10] [perStep=25]
 *
 * Goals (docs/performance.md): at most 12 calls a minute to the failing Mautic; the backlog
 * delivered within 60 s of the recovery in at most 10 calls; nothing lost, nothing doubled.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import {
  contacts,
  deadLettered,
  itemsCreated,
  post,
  startRelay,
  stopRunning,
} from '../test/support/relay-process.ts';
import { until } from '../test/support/until.ts';
import { loadAverage, positiveInteger, round } from './support/figures.ts';

const [outageSeconds, trafficSeconds, everySeconds, perStep] = [
  positiveInteger(process.argv[2], 600, 'outageSeconds'),
  positiveInteger(process.argv[3], 300, 'trafficSeconds'),
  positiveInteger(process.argv[4], 10, 'everySeconds'),
  positiveInteger(process.argv[5], 25, 'perStep'),
];
const INITIAL = 100;
/** Long enough for an old design's trickle of one-item calls to finish, and bounded. */
const DRAIN_LIMIT_MS = 30 * 60_000;

async function send(url: string, count: number, prefix: string): Promise<void> {
  const answer = await post(url, JSON.stringify(contacts(count, prefix)));
  if (answer.status !== 202) throw new Error(`the ingest answered ${answer.status}`);
}

async function main() {
  console.log(
    `outage bench: ${outageSeconds} s of 503s, ${perStep} contacts every ${everySeconds} s for ${trafficSeconds} s; load ${loadAverage()}`,
  );
  const { sim, url, output } = await startRelay({});
  await send(url, INITIAL, 'before');
  await until(() => sim.records('contacts').length === INITIAL, 60_000, 'the first contacts');

  const outageAt = Date.now();
  sim.setFaults({ seed: 33, errorRate: 1, errorStatus: 503 });
  let sent = INITIAL;
  for (let step = 0; step * everySeconds < trafficSeconds; step++) {
    await sleep(Math.max(0, outageAt + step * everySeconds * 1000 - Date.now()));
    await send(url, perStep, `during${step}-`);
    sent += perStep;
  }
  await sleep(Math.max(0, outageAt + outageSeconds * 1000 - Date.now()));
  const recoveredAt = Date.now();
  sim.setFaults(undefined);

  await until(
    () => sim.records('contacts').length === sent && sim.requests.every((r) => r.status !== 0),
    DRAIN_LIMIT_MS,
    () => `${sim.records('contacts').length} of ${sent} delivered`,
  );
  const deliveredAt = Math.max(
    ...sim.requests.filter((r) => r.path === '/api/contacts/batch/new').map((r) => r.at),
  );
  report({ sim, output, sent, outageAt, recoveredAt, deliveredAt });
  await stopRunning();
}

function report(run: {
  sim: Awaited<ReturnType<typeof startRelay>>['sim'];
  output: string[];
  sent: number;
  outageAt: number;
  recoveredAt: number;
  deliveredAt: number;
}) {
  const { sim, outageAt, recoveredAt } = run;
  const api = sim.requests.filter((r) => r.path.startsWith('/api/'));
  const during = api.filter((r) => r.at >= outageAt && r.at < recoveredAt);
  const perMinute = Array.from(
    { length: Math.ceil((recoveredAt - outageAt) / 60_000) },
    (_, m) => during.filter((r) => Math.floor((r.at - outageAt) / 60_000) === m).length,
  );
  const after = api.filter((r) => r.at >= recoveredAt && r.path === '/api/contacts/batch/new');
  const items = after.map((r) => r.items ?? 0);
  const drainSeconds = round((run.deliveredAt - recoveredAt) / 1000, 1);
  const figures = {
    outage_calls: during.length,
    outage_calls_per_minute: round(during.length / ((recoveredAt - outageAt) / 60_000), 1),
    outage_peak_calls_per_minute: Math.max(0, ...perMinute),
    drain_seconds: drainSeconds,
    drain_calls: after.length,
    drain_items_per_call: round(items.reduce((a, b) => a + b, 0) / Math.max(1, after.length), 1),
    drain_single_item_calls: items.filter((count) => count === 1).length,
    lost: run.sent - sim.records('contacts').length,
    doubled: itemsCreated(sim, 'contacts') - run.sent,
    dead_lettered: deadLettered(run.output).size,
  };
  console.log(`calls to the failing Mautic per minute: ${perMinute.join(' ')}`);
  console.log(
    `  ${figures.outage_calls} in all, ${figures.outage_calls_per_minute} a minute, ${figures.outage_peak_calls_per_minute} at the peak (goal: at most 12 a minute)`,
  );
  console.log(
    `after the recovery: the last contact ${drainSeconds} s later, in ${after.length} calls of ${items.join(', ')} items (goal: within 60 s, at most 10 calls)`,
  );
  console.log(
    `lost ${figures.lost}, doubled ${figures.doubled}, dead-lettered ${figures.dead_lettered}; load ${loadAverage()}`,
  );
  console.log(
    `SUMMARY ${JSON.stringify({ figure: 'outage_calls_per_minute', value: figures.outage_calls_per_minute, ...figures, outage_seconds: outageSeconds, events: run.sent })}`,
  );
}

main().catch(async (error: unknown) => {
  console.error(error);
  await stopRunning();
  process.exitCode = 1;
});
