import { describe, expect, it } from 'vitest';
import { formatReport, runSoak } from '../../scripts/soak/soak.js';

// The short version of `npm run soak`: 2 web and 2 worker processes under load while a worker is
// SIGKILLed, Redis restarts and a web process is drained and restarted.
describe('load with faults', () => {
  it('loses nothing, answers no 5xx and drains every queue', async () => {
    const report = await runSoak({ durationMs: 15_000, companies: 4, concurrency: 6 });
    const summary = formatReport(report);
    expect(report.requests, summary).toBeGreaterThan(50);
    expect(report.serverErrors, summary).toBe(0);
    expect(report.itemsPresent, summary).toBe(report.itemsCreated);
    expect(report.tasksPresent, summary).toBe(report.tasksCreated);
    expect(report.eventsDelivered, summary).toBe(report.eventsRecorded);
    expect(report.queueDepthAfterDrain, summary).toBe(0);
    expect(report.outboxAfterDrain, summary).toBe(0);
    expect(report.faults, summary).toHaveLength(5);
  }, 150_000);
});

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
