import { configDefaults, defineConfig } from 'vitest/config';
import LongRunningFirst from './test/long-running-first.js';

/** Integration files that must import the service's modules afresh (see the projects below). */
const ISOLATED = ['test/ops/tracing.test.ts', 'test/robustness/key-material.test.ts'];

export default defineConfig({
  test: {
    pool: 'forks',
    // Most tests wait on I/O, timers and child processes: with two files at a time a 2-core machine sat a third
    // idle, three keep it busy.
    maxWorkers: 3,
    testTimeout: 30_000,
    hookTimeout: 60_000,
    teardownTimeout: 20_000,
    reporters: ['default', './test/summary-reporter.ts'],
    sequence: { sequencer: LongRunningFirst },
    projects: [
      // Pure rules, beside their code: no MongoDB, no Redis, seconds (`npm run test:unit`).
      { extends: true, test: { name: 'unit', include: ['src/**/*.test.ts'] } },
      // Everything that talks to real services (test/global-setup.ts starts them). Files share each fork's
      // module cache (isolate: false): importing the app afresh for every file was 116 of the 287 s a slow
      // machine's fresh clone spent in vitest (182 s shared). Each file makes its own app, database and queue
      // prefix; process-wide registries (prom-client) only accumulate.
      {
        extends: true,
        test: {
          name: 'integration',
          include: ['test/**/*.test.ts'],
          exclude: [...configDefaults.exclude, ...ISOLATED],
          isolate: false,
          globalSetup: ['test/global-setup.ts'],
        },
      },
      // The SDK (sdk/) against the service running in the test process, on the same kind of MongoDB and Redis.
      {
        extends: true,
        test: { name: 'sdk', include: ['sdk/**/*.test.ts'], globalSetup: ['test/global-setup.ts'] },
      },
      // Files that need modules loaded fresh: tracing instruments the driver as it is imported; vi.mock.
      // Vitest runs each project's global setup: this one starts its own stand-in and redis-server (0.6 s).
      {
        extends: true,
        test: { name: 'isolated', include: ISOLATED, globalSetup: ['test/global-setup.ts'] },
      },
    ],
  },
});
