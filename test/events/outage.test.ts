import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { createEventPublisher } from '../../src/container.js';
import { PrivateRedisServer } from '../../src/dev/redis-server.js';
import { createRequestPathRedis } from '../../src/shared/redis.js';
import { buildTestApp, createTestEnv, startTestWorkers, type TestApp } from '../helpers/app.js';
import { outboxBacklog, waitForFeed } from '../helpers/events.js';
import { admin, createTenant, ext, type Tenant } from '../helpers/fixtures.js';
import { queuesIdle } from '../helpers/hooks.js';
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
      // Readable in the feed with Redis still away, each once, and no outbox holds any of them (the gauge).
      const feed = await waitForFeed(app, tenant.key, 'type=task.created', 50);
      expect(new Set(feed.map((event) => event.data.task_id)).size).toBe(50);
      expect(feed).toHaveLength(50);
      expect(await waitFor(async () => (await outboxBacklog(app)).tasks === 0)).toBe(true);

      await redisServer.start();
      const followUps = await waitFor(
        async () => (await env.db.collection('tasks').countDocuments({ title: 'Follow up' })) >= 50,
        30_000,
        200,
      );
      expect(followUps).toBe(true);
      // Instead of a pause for a (wrong) duplicate. A wrong copy is a job: the relay queues the events as Redis
      // comes back, the reconciler then puts back what no consumer has finished. `unqueued` at 0 says the relay has
      // queued everything; a marker call task written after that gets its follow-up through the same queue, and once
      // the queue is idle every job queued before it has run: a copy that ran the rule again has left a 52nd
      // follow-up, or a second run of one event, by then.
      expect(await waitFor(async () => (await unqueued()) === 0, 10_000)).toBe(true);
      const marker = await ext(app, tenant.key, 'POST', '/tasks', { title: 'marker', due_at: due, task_type: 'call' });
      expect(marker.statusCode).toBe(201);
      const follow = () => env.db.collection('tasks').countDocuments({ title: 'Follow up' });
      expect(await waitFor(async () => (await follow()) >= 51, 10_000)).toBe(true);
      await queuesIdle(env, ['automations']);
      expect(await follow()).toBe(51);
      const runs = await env.db.collection('automation_runs').find({ automation_id: rule.automation_id }).toArray();
      expect(runs).toHaveLength(51);
      expect(runs.every((run) => run.status === 'succeeded')).toBe(true);
      expect(new Set(runs.map((run) => run.event_id)).size).toBe(51);
      // The follow-ups' own events (the marker's may still be on its way) leave the outboxes and reach the queues.
      expect(await waitFor(async () => (await outboxBacklog(app)).tasks === 0)).toBe(true);
      expect(await waitFor(async () => (await unqueued()) === 0)).toBe(true);
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
      // Instead of a pause for a stalled job's re-run: the jobs the killed worker held stay active until this
      // worker's stalled-job check (every JOB_LOCK_MS / 2) takes them back and runs them again. Once the queue is
      // idle every one of them has run again, so a re-run that repeated its effects has made its extra follow-up.
      await queuesIdle(t, ['automations']);
      expect(await count()).toBe(total);
      const runs = await t.db.collection('automation_runs').find({ company_id: tenant.companyId }).toArray();
      expect(runs).toHaveLength(total);
      expect(runs.every((run) => run.status === 'succeeded')).toBe(true);
    } finally {
      expect(await stopGracefully(second)).toBe(0);
    }
  }, 120_000);
});
