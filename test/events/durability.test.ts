import { Redis } from 'ioredis';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { buildApp, type App } from '../../src/app.js';
import { createEventPublisher } from '../../src/container.js';
import { buildEvent, type EventEnvelope } from '../../src/contracts/envelope.js';
import { EVENT_QUEUES } from '../../src/contracts/jobs.js';
import { PrivateRedisServer } from '../../src/dev/redis-server.js';
import { Reconciler } from '../../src/events/reconciler.js';
import { EventsRepository } from '../../src/events/repository.js';
import { ensureIndexes } from '../../src/repositories.js';
import { createQueue } from '../../src/shared/queues.js';
import { createRequestPathRedis } from '../../src/shared/redis.js';
import { createTestEnv, startTestWorkers } from '../helpers/app.js';
import { taskData } from '../helpers/events.js';
import { admin, createTenant, ext, type Tenant } from '../helpers/fixtures.js';
import { killHard, spawnWorker, stopGracefully } from '../helpers/processes.js';
import { sleep, waitFor } from '../helpers/wait.js';
import { Receiver } from '../hooks/receiver.js';
import type { Queue } from 'bullmq';
import type { Db } from 'mongodb';

const silent = pino({ level: 'silent' });

/** A Redis of its own (persisting nothing), the test database, the web app and a webhook receiver. */
async function volatileStack(overrides: Record<string, string> = {}) {
  const redisServer = await PrivateRedisServer.start();
  const env = await createTestEnv({
    REDIS_URL: redisServer.url,
    RATE_LIMIT_MAX: '100000',
    RECONCILE_INTERVAL_MS: '300',
    ...overrides,
  });
  await ensureIndexes(env.db);
  // A loaded test machine answers slower than the request path's 1 s command timeout allows.
  const redis = createRequestPathRedis(redisServer.url, { commandTimeout: 10_000 });
  redis.on('error', () => {});
  // The publisher takes events only on a ready connection (else they wait for the relay): connect first.
  await waitFor(() => redis.status === 'ready', 10_000);
  const publisher = createEventPublisher(env.db, { connection: redis, prefix: env.config.QUEUE_PREFIX }, silent);
  const app: App = await buildApp({ config: env.config, db: env.db, redis, publisher, logger: silent });
  const receiver = await Receiver.start();
  return {
    redisServer,
    env,
    redis,
    publisher,
    app,
    receiver,
    /** Everything Redis holds is gone, as after a restart without persistence. */
    async loseRedisData() {
      await redisServer.stop();
      await redisServer.start();
      expect(await waitFor(() => redis.status === 'ready', 10_000)).toBe(true);
    },
    async close() {
      await app.close();
      await publisher.close();
      redis.disconnect();
      await receiver.close();
      await env.close();
      await redisServer.stop();
    },
  };
}
type Stack = Awaited<ReturnType<typeof volatileStack>>;

let stack: Stack | undefined;
afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

/** task.created events as the API records them, `calls` of them of task_type call. */
function taskEvents(tenant: Tenant, count: number, calls = 0): EventEnvelope[] {
  return Array.from({ length: count }, (_, i) =>
    buildEvent(
      'task.created',
      tenant.companyId,
      taskData({
        task_id: `tsk_durable_${i}`,
        title: `event ${i}`,
        assigned_to: tenant.userId,
        created_by: tenant.userId,
        item_id: null,
        task_type: i < calls ? 'call' : 'to_do',
        priority: 'none',
      }),
    ),
  );
}

async function subscribeEverything(app: App, tenant: Tenant, receiver: Receiver) {
  const hook = await ext(app, tenant.key, 'POST', '/hooks', { target_url: receiver.url(), event: '*' });
  expect(hook.statusCode, hook.body).toBe(201);
  await admin(
    app,
    'POST',
    `/companies/${tenant.companyId}/automations`,
    {
      name: 'follow up calls',
      trigger: 'task.created',
      conditions: { task_type: 'call' },
      actions: [{ type: 'create_task', title: 'Follow up', due_in_minutes: 30, task_type: 'email' }],
    },
    201,
  );
}

/** Waits until the sequencer has given every recorded event its sequence and handed it to the queues. */
async function allSequencedAndQueued(env: { db: Db }, count: number): Promise<void> {
  const events = env.db.collection('events');
  await waitFor(
    async () =>
      (await events.countDocuments({ sequence: { $exists: true } })) >= count &&
      (await events.countDocuments({ unqueued: true })) === 0,
    60_000,
    100,
  );
}

const jobIds = async (queue: Queue) =>
  new Set((await queue.getJobs(['waiting', 'active', 'delayed', 'completed', 'prioritized'])).map((job) => job.id));

describe('Redis loses its data while events wait for workers', () => {
  it('processes all 1,000 queued events and makes every hook delivery once, with two reconcilers at once', async () => {
    stack = await volatileStack();
    const { app, env, receiver, publisher } = stack;
    const tenant = await createTenant(app);
    await subscribeEverything(app, tenant, receiver);

    // Workers stopped: 1,000 events recorded and queued (100 of them trigger the automation).
    const events = taskEvents(tenant, 1_000, 100);
    // In API-sized batches: the request-path connection gives each command 1 s, even on a busy machine.
    for (let i = 0; i < events.length; i += 50) {
      const documents = events
        .slice(i, i + 50)
        .map((event) => ({ documentId: String(event.data.task_id), events: [event] }));
      await publisher.publishAndClear('tasks', documents);
    }
    await allSequencedAndQueued(env, 1_000);
    const fanout = createQueue('hook-fanout', { connection: stack.redis, prefix: env.config.QUEUE_PREFIX });
    try {
      expect((await jobIds(fanout)).size).toBeGreaterThan(0); // the sequencer's batch jobs
      await stack.loseRedisData();
      expect((await jobIds(fanout)).size).toBe(0);
    } finally {
      await fanout.close();
    }

    // Workers back, two processes' worth of relays (two reconcilers).
    const workers = await startTestWorkers(env.config, env.db, ['relay', 'automations', 'hooks']);
    const second = await startTestWorkers(env.config, env.db, ['relay']);
    try {
      const followUps = () =>
        env.db.collection('tasks').countDocuments({ company_id: tenant.companyId, title: 'Follow up' });
      // Each event's webhook, and the follow-up tasks' own task.created.
      expect(await waitFor(() => receiver.counts().size >= 1_100, 180_000, 250)).toBe(true);
      expect(await waitFor(async () => (await followUps()) === 100, 10_000)).toBe(true);
      for (const event of events) expect(receiver.counts().get(event.event_id)).toBe(1);
      const unfinished = () =>
        env.db
          .collection('events')
          .find({ pending: { $ne: [] } })
          .toArray();
      await waitFor(async () => (await unfinished()).length === 0, 120_000, 250);
      expect((await unfinished()).map((doc) => [doc.type, doc.pending, doc.event.data.title])).toEqual([]);
      // A later marker (a webhook of an event made now) arrives; nothing arrived twice meanwhile.
      const marker = await ext(app, tenant.key, 'POST', '/tasks', { title: 'marker', due_at: '2030-01-01T00:00:00Z' });
      expect(marker.statusCode).toBe(201);
      expect(await waitFor(() => receiver.requests.some((request) => request.body.includes('"marker"')), 20_000)).toBe(
        true,
      );
      expect([...receiver.counts().values()].every((count) => count === 1)).toBe(true);
      expect(await followUps()).toBe(100);
      const runs = await env.db.collection('automation_runs').find({ company_id: tenant.companyId }).toArray();
      expect(runs).toHaveLength(100);
      expect(runs.every((run) => run.status === 'succeeded' && run.attempts === 1)).toBe(true);
    } finally {
      await second.close();
      await workers.close();
    }
  }, 400_000);
});

describe('the reconciler', () => {
  it('makes a full pass again when Redis loses its data during its own pass', async () => {
    stack = await volatileStack();
    const { env, publisher } = stack;
    const tenant = await createTenant(stack.app);
    const eventStore = new EventsRepository(env.db);
    const events = taskEvents(tenant, 1_200);
    await eventStore.record(events);
    await allSequencedAndQueued(env, 1_200);
    const flusher = new Redis(stack.redisServer.url);
    await flusher.flushall(); // queued, but Redis has none of them now
    const deliveriesQueue = createQueue('deliveries', { connection: stack.redis, prefix: env.config.QUEUE_PREFIX });
    let pages = 0;
    const reconciler = new Reconciler(
      {
        redis: stack.redis,
        prefix: env.config.QUEUE_PREFIX,
        eventStore,
        publisher: {
          // Redis loses everything right after the pass's first page was queued.
          enqueue: async (queued, options) => {
            const result = await publisher.enqueue(queued, options);
            if (++pages === 1) await flusher.flushall();
            return result;
          },
        },
        deliveriesQueue,
        dueDeliveries: async () => ({ deliveries: [] }),
        logger: silent,
      },
      60_000,
    );
    const queues = EVENT_QUEUES.map((name) =>
      createQueue(name, { connection: stack!.redis, prefix: env.config.QUEUE_PREFIX }),
    );
    try {
      expect((await reconciler.run()).reason).toBe('no_mark');
      expect((await jobIds(queues[0]!)).size).toBeLessThan(1_200); // the first page was lost
      const second = await reconciler.run();
      expect(second.reason).toBe('no_mark');
      for (const queue of queues) expect((await jobIds(queue)).size).toBe(1_200);
      expect((await reconciler.run()).reason).toBeUndefined(); // nothing lost since
    } finally {
      await Promise.all([...queues, deliveriesQueue].map((queue) => queue.close()));
      flusher.disconnect();
    }
  }, 60_000);

  it('killed mid-pass (a child process): the next one finishes, and every event is delivered once', async () => {
    stack = await volatileStack();
    const { app, env, receiver } = stack;
    const tenant = await createTenant(app);
    await subscribeEverything(app, tenant, receiver);
    const events = taskEvents(tenant, 1_500);
    await new EventsRepository(env.db).record(events);
    await allSequencedAndQueued(env, 1_500);
    await stack.loseRedisData(); // none of them in Redis
    const fanout = createQueue('hook-fanout', { connection: stack.redis, prefix: env.config.QUEUE_PREFIX });
    const workerEnv = { WORKERS: 'relay', RECONCILE_INTERVAL_MS: '200', RATE_LIMIT_MAX: '100000' };
    try {
      const first = await spawnWorker(env.config, workerEnv);
      expect(await waitFor(async () => (await fanout.count()) > 0, 60_000, 5)).toBe(true);
      await killHard(first);
      const second = await spawnWorker(env.config, workerEnv);
      try {
        expect(await waitFor(async () => (await jobIds(fanout)).size === 1_500, 60_000, 200)).toBe(true);
      } finally {
        expect(await stopGracefully(second)).toBe(0);
      }
      const workers = await startTestWorkers(env.config, env.db, ['hooks']);
      try {
        expect(await waitFor(() => receiver.counts().size >= 1_500, 90_000, 250)).toBe(true);
        await sleep(500);
        expect([...receiver.counts().values()].every((count) => count === 1)).toBe(true);
      } finally {
        await workers.close();
      }
    } finally {
      await fanout.close();
    }
  }, 240_000);
});
