import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, startTestWorkers, type TestApp } from '../helpers/app.js';
import { createTenant, ext } from '../helpers/fixtures.js';
import { queuesIdle } from '../helpers/hooks.js';
import { killHard, spawnWorker, stopGracefully } from '../helpers/processes.js';
import { waitFor } from '../helpers/wait.js';
import { Receiver } from './receiver.js';

const EVENTS = 200;

let t: TestApp;
let relay: { close(): Promise<void> };
let inbox: Receiver;
beforeAll(async () => {
  t = await buildTestApp({ RATE_LIMIT_MAX: '100000' }, { publisher: true });
  relay = await startTestWorkers(t.config, t.db, ['relay']);
  // Slow enough that the first worker is killed with deliveries pending and in flight.
  inbox = await Receiver.start(() => ({ status: 200, delayMs: 50 }));
});
afterAll(async () => {
  await relay?.close();
  await inbox?.close();
  await t?.close();
});

describe('a hooks worker killed mid-way', () => {
  it('after SIGKILL and a restart, every event reaches the receiver at least once and at most twice', async () => {
    const tenant = await createTenant(t.app);
    const hook = await ext(t.app, tenant.key, 'POST', '/hooks', { target_url: inbox.url(), event: 'task.created' });
    expect(hook.statusCode).toBe(201);
    const taskIds = new Set<string>();
    for (let batch = 0; batch < EVENTS; batch += 20) {
      const created = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          ext(t.app, tenant.key, 'POST', '/tasks', { title: `task ${batch + i}`, due_at: '2030-01-01T10:00:00Z' }),
        ),
      );
      for (const response of created) taskIds.add(response.json().task_id);
    }
    expect(taskIds.size).toBe(EVENTS);

    const env = { WORKERS: 'hooks', JOB_LOCK_MS: '2000', HOOK_ALLOW_PRIVATE_TARGETS: 'true', HOOK_BACKOFF_MS: '100' };
    const first = await spawnWorker(t.config, env);
    try {
      expect(await waitFor(() => inbox.counts().size >= 20, 20_000, 10)).toBe(true);
      await killHard(first);
    } finally {
      await killHard(first);
    }
    const deliveredBeforeKill = inbox.counts().size;
    expect(deliveredBeforeKill).toBeLessThan(EVENTS);

    const second = await spawnWorker(t.config, env);
    try {
      expect(await waitFor(() => inbox.counts().size === EVENTS, 30_000, 100)).toBe(true);
      // Instead of a pause for a (wrong) third copy: every copy is sent by a fan-out or delivery job, and the jobs
      // the killed worker held stay active until this worker's stalled-job check takes them back and runs them
      // again. Once both queues are idle every such re-run and retry has finished, and a job finishes an event only
      // after its webhook was answered, so a third copy has reached the receiver by then.
      await queuesIdle(t, ['hook-fanout', 'deliveries']);
    } finally {
      await stopGracefully(second);
    }
    const counts = inbox.counts();
    expect(counts.size).toBe(EVENTS);
    expect(Math.max(...counts.values())).toBeLessThanOrEqual(2);
    const delivered = new Set(inbox.requests.map((request) => JSON.parse(request.body).data.task_id));
    expect(delivered).toEqual(taskIds);
  }, 90_000);
});
