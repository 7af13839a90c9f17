import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * Files that take tens of seconds (soaks, processes killed and restarted), about the longest first. Without a cache of
 * earlier durations (a fresh clone, CI) vitest starts the largest files first; these are small, so they used
 * to start last and one fork ran the two soaks alone at the end (vitest 249 s on a slow machine, 228 s of
 * it the two forks' tests). Started first, the short files fill in around them.
 */
const LONG_RUNNING = [
  // The two soaks (each a stack of service processes asserting no 5xx) not side by side on two forks.
  'test/soak/redis-volatile.test.ts',
  'test/events/durability.test.ts',
  'test/soak/soak.test.ts',
  'test/ops/startup.test.ts',
  'test/events/outage.test.ts',
  'test/overdue/processes.test.ts',
  'test/foundation/dev-server.test.ts',
  'test/hooks/crash.test.ts',
  // 15 s: keep-alive traffic, then a connection left to its 10 s headers timeout.
  'test/robustness/headers-deadline.test.ts',
  'test/robustness/fuzz.test.ts',
  // A 10 s MongoDB outage among its faults.
  'test/events/change-feed.test.ts',
  'test/hooks/recover-faults.test.ts',
  // 16 s: two overdue roles scanning 1,500 due tasks tick after tick.
  'test/overdue/role.test.ts',
  'test/auth/ext-auth.test.ts',
];

function rank(file: TestSpecification): number {
  const index = LONG_RUNNING.findIndex((path) => file.moduleId.endsWith(path));
  return index === -1 ? LONG_RUNNING.length : index;
}

/** Vitest's order (projects grouped, then its cache's), with the long-running files moved to the front of their project. */
export default class LongRunningFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const projectOrder = new Map<string, number>();
    for (const file of sorted)
      if (!projectOrder.has(file.project.name)) projectOrder.set(file.project.name, projectOrder.size);
    const project = (file: TestSpecification) => projectOrder.get(file.project.name) ?? 0;
    return sorted
      .map((file, position) => ({ file, position }))
      .sort((a, b) => project(a.file) - project(b.file) || rank(a.file) - rank(b.file) || a.position - b.position)
      .map(({ file }) => file);
  }
}
