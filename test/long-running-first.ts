import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * Files that take tens of seconds (soaks, processes killed and restarted), longest first. Without a cache of
 * earlier durations (a fresh clone, CI) vitest starts the largest files first; these are small, so they used
 * to start last and one fork ran the two soaks alone at the end (vitest 249 s on a slow machine, 228 s of
 * it the two forks' tests). Started first, the short files fill in around them.
 */
const LONG_RUNNING = [
  'test/soak/redis-volatile.test.ts',
  'test/soak/soak.test.ts',
  'test/events/durability.test.ts',
  'test/ops/startup.test.ts',
  'test/events/outage.test.ts',
  'test/overdue/processes.test.ts',
  'test/foundation/dev-server.test.ts',
  'test/hooks/crash.test.ts',
];

function rank(file: TestSpecification): number {
  const index = LONG_RUNNING.findIndex((path) => file.moduleId.endsWith(path));
  return index === -1 ? LONG_RUNNING.length : index;
}

/** Vitest's order (projects, then what its cache knows), with the long-running files moved to the front. */
export default class LongRunningFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    return sorted
      .map((file, position) => ({ file, position }))
      .sort((a, b) => rank(a.file) - rank(b.file) || a.position - b.position)
      .map(({ file }) => file);
  }
}
