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
