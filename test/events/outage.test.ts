import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { createEventPublisher } from '../../src/container.js';
import { PrivateRedisServer } from '../../src/dev/redis-server.js';
import { createRequestPathRedis } from '../../src/shared/redis.js';
import { buildTestApp, createTestEnv, startTestWorkers, type TestApp } from '../helpers/app.js';
import { admin, createTenant, ext, type Tenant } from '../helpers/fixtures.js';
import { killHard, spawnWorker, stopGracefully } from '../helpers/processes.js';
import { waitFor } from '../helpers/wait.js';

const due = '2030-01-01T10:00:00.000Z';

/** An automation that gives each `call` task one `email` follow-up (the follow-ups do not trigger it again). */
async function followUpRule(app: Parameters<typeof admin>[0], tenant: Tenant) {
  return (
    await admin(
      app,
      'POST',
      `/companies/${tenant.companyId}/automations`,
      {
        name: 'follow up',
        trigger: 'task.created',
        conditions: { task_type: 'call' },
        actions: [{ type: 'create_task', title: 'Follow up', due_in_minutes: 30, task_type: 'email' }],
      },
      201,
    )
  ).json();
}

describe('Redis outage while tasks are created', () => {
  it('answers 201 to all 50 and processes every task.created exactly once after Redis returns', async () => {
    const redisServer = await PrivateRedisServer.start();
    const env = await createTestEnv({ REDIS_URL: redisServer.url, RATE_LIMIT_MAX: '1000' });
    const redis = createRequestPathRedis(redisServer.url);
    redis.on('error', () => {});
    const publisher = createEventPublisher(
      env.db,
      { connection: redis, prefix: env.config.QUEUE_PREFIX },
      pino({ level: 'silent' }),
    );
    const app = await buildApp({ config: env.config, db: env.db, redis, publisher, logger: pino({ level: 'silent' }) });
    const workers = await startTestWorkers(env.config, env.db, ['relay', 'automations']);
    try {
      const tenant = await createTenant(app);
      const rule = await followUpRule(app, tenant);

      await redisServer.stop();
      const responses = await Promise.all(
        Array.from({ length: 50 }, (_, i) =>
          ext(app, tenant.key, 'POST', '/tasks', { title: `call ${i}`, due_at: due, task_type: 'call' }),
        ),
      );
      expect(responses.map((response) => response.statusCode)).toEqual(Array(50).fill(201));
      // MongoDB is the events' home: they leave the outbox for `events` while Redis is away.
      const unqueued = () => env.db.collection('events').countDocuments({ type: 'task.created', unqueued: true });
      expect(await waitFor(async () => (await unqueued()) === 50, 10_000)).toBe(true);
      expect(await env.db.collection('tasks').countDocuments({ outbox_pending: true })).toBe(0);

      await redisServer.start();
      const followUps = await waitFor(
        async () => (await env.db.collection('tasks').countDocuments({ title: 'Follow up' })) >= 50,
        30_000,
        200,
      );
      expect(followUps).toBe(true);
      await new Promise((resolve) => setTimeout(resolve, 1_000)); // room for a (wrong) duplicate
      expect(await env.db.collection('tasks').countDocuments({ title: 'Follow up' })).toBe(50);
      const runs = await env.db.collection('automation_runs').find({ automation_id: rule.automation_id }).toArray();
      expect(runs).toHaveLength(50);
      expect(runs.every((run) => run.status === 'succeeded')).toBe(true);
      expect(new Set(runs.map((run) => run.event_id)).size).toBe(50);
      expect(await env.db.collection('tasks').countDocuments({ outbox_pending: true })).toBe(0);
      expect(await unqueued()).toBe(0);
    } finally {
      await workers.close();
      await app.close();
      await publisher.close();
      redis.disconnect();
      await env.close();
      await redisServer.stop();
    }
  }, 60_000);
});

describe('a worker killed mid-processing', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp({ RATE_LIMIT_MAX: '100000' }, { publisher: true });
  });
  afterAll(async () => t?.close());

  it('has its jobs picked up again (stalled-job recovery) with every effect happening once', async () => {
    const tenant = await createTenant(t.app);
    await followUpRule(t.app, tenant);
    const total = 300;
    for (let batch = 0; batch < total / 50; batch++) {
      await Promise.all(
        Array.from({ length: 50 }, (_, i) =>
          ext(t.app, tenant.key, 'POST', '/tasks', { title: `call ${batch}-${i}`, due_at: due, task_type: 'call' }),
        ),
      );
    }
    const count = () => t.db.collection('tasks').countDocuments({ company_id: tenant.companyId, title: 'Follow up' });
    const workerEnv = { WORKERS: 'automations', JOB_LOCK_MS: '2000' };

    const first = await spawnWorker(t.config, workerEnv);
    expect(await waitFor(async () => (await count()) >= 20, 30_000, 20)).toBe(true);
    await killHard(first);
    const afterKill = await count();
    expect(afterKill).toBeLessThan(total); // it really died with work left

    const second = await spawnWorker(t.config, workerEnv);
    try {
      expect(await waitFor(async () => (await count()) >= total, 60_000, 200)).toBe(true);
      await new Promise((resolve) => setTimeout(resolve, 2_500)); // a stalled job re-run would show up now
      expect(await count()).toBe(total);
      const runs = await t.db.collection('automation_runs').find({ company_id: tenant.companyId }).toArray();
      expect(runs).toHaveLength(total);
      expect(runs.every((run) => run.status === 'succeeded')).toBe(true);
    } finally {
      expect(await stopGracefully(second)).toBe(0);
    }
  }, 120_000);
});
