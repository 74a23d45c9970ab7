/**
 * Why the relay batches: delivers the same contacts into the Mautic simulator (fixed latency per
 * call, as a real Mautic across a network has) one call per record, as the usual integrations
 * do, and through batch/new with 200 records per call, and prints both rates and their ratio.
 *
 * It also prints how many calls the planner makes for 200 contact events when some are edits
 * of other contacts: a contact create may be any contact (upsert by email), so the relay never
 * reorders it with an edit or delete, and each switch between them costs a call.
 *
 *   npm run bench:batch -- [records=2000] [latencyMs=5]
 */
import { type IncomingEvent, planBatches } from '../functions/core/delivery/batch-plan.ts';
import { MauticApiClient } from '../functions/core/mautic/mautic-api.ts';
import { startMauticSimulator } from '../mautic-simulator/server.ts';

const records = Number(process.argv[2] ?? 2000);
const latencyMs = Number(process.argv[3] ?? 5);

async function deliver(batchSize: number): Promise<{ seconds: number; calls: number }> {
  const sim = await startMauticSimulator({
    faults: { seed: 1, latencyMs: { min: latencyMs, max: latencyMs } },
  });
  try {
    const api = new MauticApiClient({ baseUrl: sim.url, fetch });
    const call = { accessToken: sim.issueToken().accessToken };
    const contacts = Array.from({ length: records }, (_, i) => ({
      email: `bench${i}@example.com`,
      firstname: `B${i}`,
    }));
    const started = performance.now();
    for (let start = 0; start < contacts.length; start += batchSize) {
      const results = await api.create('contacts', contacts.slice(start, start + batchSize), call);
      if (results.some((result) => result.kind !== 'delivered'))
        throw new Error('a record was not delivered');
    }
    const seconds = (performance.now() - started) / 1000;
    if (sim.records('contacts').length !== records)
      throw new Error('the simulator does not hold every record');
    return { seconds, calls: sim.requests.length };
  } finally {
    await sim.close();
  }
}

const single = await deliver(1);
const batched = await deliver(200);
const rate = (run: { seconds: number }) => records / run.seconds;
console.log(`records: ${records}, Mautic latency per call: ${latencyMs} ms`);
console.log(`one call per record: ${single.calls} calls, ${rate(single).toFixed(0)} records/s`);
console.log(`batch of 200:        ${batched.calls} calls, ${rate(batched).toFixed(0)} records/s`);
console.log(`ratio (batch / one per record): ${(rate(batched) / rate(single)).toFixed(1)}x`);

// Deterministic, so that runs compare.
let seed = 1;
const random = () => {
  seed = (seed * 16_807) % 2_147_483_647;
  return seed / 2_147_483_647;
};
for (const editShare of [0, 0.01, 0.05, 0.25]) {
  const events: IncomingEvent[] = Array.from({ length: 200 }, (_, i) => ({
    messageId: `m${i}`,
    event: {
      v: 1,
      eventId: `e${i}`,
      receivedAt: new Date(0).toISOString(),
      sender: 'bench',
      ...(random() < editShare
        ? { entity: 'contacts', action: 'edit', id: 1 + i, data: { city: 'Oslo' } }
        : { entity: 'contacts', action: 'create', data: { email: `mix${i}@example.com` } }),
    },
  }));
  const calls = planBatches(events, 200).length;
  console.log(`200 contact events, ${editShare * 100}% edits interleaved: ${calls} calls`);
}
