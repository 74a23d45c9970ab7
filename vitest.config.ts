import { defineConfig } from 'vitest/config';
import { SummaryReporter } from './test/support/summary-reporter.ts';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    reporters: ['default', new SummaryReporter()],
    testTimeout: 20_000,
    hookTimeout: 20_000,
    // Tests start real servers on 127.0.0.1 only; a test that leaks one would hang the run.
    teardownTimeout: 5_000,
    // Two files at once: most of the suite waits on sockets and child processes (npm start, the
    // queue emulator, the simulator), so on 2 cores the default of one worker left a core idle
    // and took 5 min 20 s; two take under 3.
    maxWorkers: 2,
    coverage: {
      provider: 'v8',
      // The product's functions; the local stack and the CDK app are checked by their own tests.
      include: ['functions/**/*.ts'],
      reporter: ['text-summary'],
      thresholds: { lines: 90 },
    },
  },
});
