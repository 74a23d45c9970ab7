/**
 * Why the relay batches: delivers the same contacts into the Mautic simulator (fixed latency per
 * call, as a real Mautic across a network has) one call per record, as the usual integrations
 * do, and through batch/new with 200 records per call, and prints both rates and their ratio.
 *
 *   npm run bench:batch -- [records=2000] [latencyMs=5]
 */
import { MauticApiClient } from '../functions/core/mautic-api.ts';
import { startMauticSimulator } from '../infra/local/mautic-simulator/server.ts';

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
