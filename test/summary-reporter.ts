import type { Reporter, TestModule } from 'vitest/node';

/**
 * Ends the run with the plain `N passed, N failed` line that CI reads, led by one word naming the MongoDB the tests ran
 * against (`standin:`, `memory-server:` or `external:`, set by test/global-setup.ts).
 */
export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    let passed = 0;
    let failed = 0;
    let skipped = 0;
    for (const module of testModules) {
      for (const test of module.children.allTests()) {
        const state = test.result().state;
        if (state === 'passed') passed++;
        else if (state === 'failed') failed++;
        else skipped++;
      }
    }
    const backend = process.env.TEST_MONGO_BACKEND;
    process.stdout.write(
      `\n${backend ? `${backend}: ` : ''}${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}\n`,
    );
  }
}
