import { describe, expect, it } from 'vitest';
import { formatReport, runSoak } from '../../scripts/soak/soak.js';

// Its own file, beside soak.test.ts: the two soaks are the longest tests, and as two files they run
// in parallel (vitest runs several files at a time) instead of one after the other at the end.
// `npm run soak -- --redis-volatile`, short: Redis persists nothing and loses its data twice, once
// while every worker is stopped with a backlog queued (DECISIONS.md section 12.1).
describe('load with a Redis that persists nothing', () => {
  it('loses no event when Redis loses its data, with workers running and with them stopped', async () => {
    const report = await runSoak({ durationMs: 20_000, companies: 3, concurrency: 4, redisVolatile: true });
    const summary = formatReport(report);
    expect(report.serverErrors, summary).toBe(0);
    expect(report.eventsDelivered, summary).toBe(report.eventsRecorded);
    expect(report.unfinishedAfterDrain, summary).toBe(0);
    expect(report.queueDepthAfterDrain, summary).toBe(0);
    expect(report.outboxAfterDrain, summary).toBe(0);
    expect(
      report.faults.filter((fault) => fault.includes('data lost')),
      summary,
    ).toHaveLength(2);
  }, 200_000);
});
