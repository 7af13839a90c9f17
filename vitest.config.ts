import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    pool: 'forks',
    // Most tests wait on I/O, timers and child processes; two files at a time keep a 2-core machine busy.
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 60_000,
    teardownTimeout: 20_000,
    reporters: ['default', './test/summary-reporter.ts'],
    projects: [
      // Pure rules, beside their code: no MongoDB, no Redis, seconds (`npm run test:unit`).
      { extends: true, test: { name: 'unit', include: ['src/**/*.test.ts'] } },
      // Everything that talks to real services (test/global-setup.ts starts them).
      {
        extends: true,
        test: { name: 'integration', include: ['test/**/*.test.ts'], globalSetup: ['test/global-setup.ts'] },
      },
    ],
  },
});
