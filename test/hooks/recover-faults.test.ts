import { Redis } from 'ioredis';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp, type App } from '../../src/app.js';
import { createEventPublisher } from '../../src/container.js';
import { PrivateRedisServer } from '../../src/dev/redis-server.js';
import { RECOVERY_WINDOW_PER_IN_FLIGHT } from '../../src/hooks/recovery.js';
import { ensureIndexes } from '../../src/repositories.js';
import { createQueue } from '../../src/shared/queues.js';
import { createRequestPathRedis, type RedisClient } from '../../src/shared/redis.js';
import { createTestEnv, startTestWorkers, type TestEnv } from '../helpers/app.js';
import { createTask, createTenant, ext, type Tenant } from '../helpers/fixtures.js';
import { eventsFinished } from '../helpers/hooks.js';
import { killHard, spawnWorker, stopGracefully } from '../helpers/processes.js';
import { sleep, waitFor } from '../helpers/wait.js';
import { Receiver } from './receiver.js';
import type { QueueEventPublisher } from '../../src/events/queue-publisher.js';
import type { Config } from '../../src/shared/config.js';

/**
 * Hook recovery under faults (DECISIONS.md 13.2, issue 62): a worker SIGKILLed mid-recovery, Redis losing its
 * data mid-recovery, and a recovery towards a receiver that keeps failing next to another company's traffic.
 * The 10,000 events are scaled down here (the benchmark runs the large one: bench/scenarios/recovery.ts).
 */

const silent = pino({ level: 'silent' });
// A Redis of its own (persisting nothing), so FLUSHALL loses only this file's data.
let redisServer: PrivateRedisServer;
let env: TestEnv;
let redis: RedisClient;
let publisher: QueueEventPublisher;
let app: App;
let relay: { close(): Promise<void> };
const receivers: Receiver[] = [];
beforeAll(async () => {
  redisServer = await PrivateRedisServer.start();
  env = await createTestEnv({
    REDIS_URL: redisServer.url,
    RATE_LIMIT_MAX: '1000000',
    RECONCILE_INTERVAL_MS: '300',
    JOB_LOCK_MS: '2000',
  });
  await ensureIndexes(env.db);
  redis = createRequestPathRedis(redisServer.url, { commandTimeout: 10_000 });
  redis.on('error', () => {});
  publisher = createEventPublisher(env.db, { connection: redis, prefix: env.config.QUEUE_PREFIX }, silent);
  app = await buildApp({ config: env.config, db: env.db, redis, publisher, logger: silent });
  relay = await startTestWorkers(env.config, env.db, ['relay']);
});
afterAll(async () => {
  await relay?.close();
  await Promise.all(receivers.map((receiver) => receiver.close()));
  await app?.close();
  await publisher?.close();
  redis?.disconnect();
  await env?.close();
  await redisServer?.stop();
});

async function receiver(answer: Receiver['answer']): Promise<Receiver> {
  const started = await Receiver.start(answer);
  receivers.push(started);
  return started;
}

/**
 * `count` task.created events of a new company, fanned out while the company had no hook, then a hook on
 * `target`: none of the events was ever attempted, so a recovery since `since` sends every one.
 */
async function missedEvents(count: number, target: string): Promise<{ tenant: Tenant; hookId: string; since: string }> {
  const tenant = await createTenant(app);
  const since = new Date(Date.now() - 1_000).toISOString();
  const drain = await startTestWorkers(env.config, env.db, ['hooks']);
  try {
    const taskIds: string[] = [];
    for (let done = 0; done < count; done += 25) {
      const created = await Promise.all(
        Array.from({ length: Math.min(25, count - done) }, (_, i) =>
          createTask(app, tenant, { title: `t${done + i}` }),
        ),
      );
      taskIds.push(...created.map((task) => task.task_id));
    }
    const ids = await waitFor(async () => {
      const events = await env.db
        .collection('events')
        .find({ company_id: tenant.companyId, sequence: { $exists: true } }, { projection: { _id: 1 } })
        .toArray();
      return events.length === count ? events.map((event) => String(event._id)) : undefined;
    }, 30_000);
    await eventsFinished({ db: env.db } as never, 'hook-fanout', ids!);
  } finally {
    await drain.close();
  }
  const hook = await ext(app, tenant.key, 'POST', '/hooks', { target_url: target, events: ['task.created'] });
  expect(hook.statusCode, hook.body).toBe(201);
  return { tenant, hookId: hook.json().hook_id, since };
}

async function startRecovery(tenant: Tenant, hookId: string, since: string, expected: number): Promise<void> {
  const answer = await ext(app, tenant.key, 'POST', `/hooks/${hookId}/recover`, { since });
  expect(answer.statusCode, answer.body).toBe(202);
  expect(answer.json().queued).toBe(expected);
}

const recoveryOf = (hookId: string) => env.db.collection('hook_recoveries').findOne({ _id: hookId as never });

/** The events whose delivery to the hook is recorded as succeeded now. */
async function succeededNow(hookId: string): Promise<Set<string>> {
  const docs = await env.db
    .collection('deliveries')
    .find({ hook_id: hookId, status: 'succeeded' }, { projection: { event_id: 1 } })
    .toArray();
  return new Set(docs.map((doc) => String(doc.event_id)));
}

/** Requests for events that had succeeded before `at` (2xx recorded), received after `at`: there must be none. */
function resentAfterSuccess(inbox: Receiver, succeeded: Set<string>, at: number): string[] {
  return inbox.requests.filter((request) => request.at > at && succeeded.has(request.id)).map((request) => request.id);
}

describe('a hook recovery under faults', () => {
  it('carries on after its worker is SIGKILLed mid-way, never sending again what succeeded', async () => {
    const EVENTS = 240;
    const inbox = await receiver(() => ({ status: 200, delayMs: 15 }));
    const { tenant, hookId, since } = await missedEvents(EVENTS, inbox.url());
    const workerEnv = { WORKERS: 'hooks', JOB_LOCK_MS: '2000', HOOK_ALLOW_PRIVATE_TARGETS: 'true' };
    const first = await spawnWorker(env.config, workerEnv);
    let second: Awaited<ReturnType<typeof spawnWorker>> | undefined;
    try {
      await startRecovery(tenant, hookId, since, EVENTS);
      await waitFor(() => inbox.requests.length >= 40, 30_000, 10);
      const holder = (await recoveryOf(hookId))?.holder;
      await killHard(first);
      const killedAt = Date.now();
      expect(inbox.counts().size).toBeLessThan(EVENTS);
      await sleep(200); // attempts answered just before the kill have no record: those may come again
      const succeeded = await succeededNow(hookId);
      expect(succeeded.size).toBeGreaterThan(0);

      second = await spawnWorker(env.config, workerEnv);
      await waitFor(async () => (await recoveryOf(hookId))?.status === 'done', 60_000, 100);
      const recovery = await recoveryOf(hookId);
      expect(recovery?.holder).not.toBe(holder); // another process carried it on
      expect(recovery?.position).toBe(recovery?.upto_sequence); // it went through the whole period
      expect(inbox.counts().size).toBe(EVENTS);
      expect(resentAfterSuccess(inbox, succeeded, killedAt)).toEqual([]);
      expect(await succeededNow(hookId)).toHaveProperty('size', EVENTS);
    } finally {
      await killHard(first);
      if (second) await stopGracefully(second);
    }
  }, 120_000);

  it('survives Redis losing its data mid-way: every event arrives, none that succeeded comes again', async () => {
    const EVENTS = 160;
    const inbox = await receiver(() => ({ status: 200, delayMs: 10 }));
    const { tenant, hookId, since } = await missedEvents(EVENTS, inbox.url());
    const workers = await startTestWorkers(env.config, env.db, ['relay', 'hooks']);
    const flusher = new Redis(redisServer.url);
    try {
      await startRecovery(tenant, hookId, since, EVENTS);
      await waitFor(() => inbox.requests.length >= 30, 30_000, 10);
      // What had succeeded when Redis lost everything must not come again. (A delivery still in flight then may:
      // its job is added again from its record, at least once.)
      const succeeded = await succeededNow(hookId);
      const flushedAt = Date.now();
      await flusher.flushall(); // the recovery's jobs are gone; its position and records are in MongoDB
      await waitFor(async () => (await recoveryOf(hookId))?.status === 'done', 60_000, 100);
      await waitFor(() => inbox.counts().size === EVENTS, 30_000);
      expect(resentAfterSuccess(inbox, succeeded, flushedAt)).toEqual([]);
      expect(await succeededNow(hookId)).toHaveProperty('size', EVENTS);
    } finally {
      flusher.disconnect();
      await workers.close();
    }
  }, 120_000);

  it("towards a receiver that keeps failing, it keeps to the hook's limits and other companies keep their latency", async () => {
    const failing = await receiver(() => ({ status: 503, delayMs: 100 }));
    const { tenant, hookId, since } = await missedEvents(200, failing.url());
    // Small lanes, one attempt per delivery (no retries pile up): what the recovery adds is all there is.
    const config: Config = {
      ...env.config,
      HOOK_CONCURRENCY: 4,
      HOOK_MAX_IN_FLIGHT_PER_HOOK: 2,
      HOOK_MAX_ATTEMPTS: 1,
      HOOK_TIMEOUT_MS: 1_000,
    };
    const workers = await startTestWorkers(config, env.db, ['hooks']);
    const deliveries = createQueue('deliveries', { connection: redis, prefix: env.config.QUEUE_PREFIX });
    try {
      const other = await createTenant(app);
      const fast = await receiver(() => 204);
      const subscribed = await ext(app, other.key, 'POST', '/hooks', { target_url: fast.url(), event: 'task.created' });
      expect(subscribed.statusCode).toBe(201);
      const latencies = async (count: number) => {
        const before = fast.requests.length;
        for (let i = 0; i < count; i++) {
          await createTask(app, other);
          await sleep(50);
        }
        await waitFor(() => fast.requests.length >= before + count, 30_000);
        return fast.requests
          .slice(before, before + count)
          .map((request) => request.at - Date.parse(JSON.parse(request.body).occurred_at));
      };
      const percentile = (values: number[], p: number) =>
        [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.ceil((p / 100) * values.length) - 1)]!;
      await latencies(3);
      const unloaded = await latencies(15);

      await startRecovery(tenant, hookId, since, 200);
      let sampling = true;
      let mostQueued = 0;
      const sampler = (async () => {
        while (sampling) {
          const counts = await deliveries.getJobCounts('waiting', 'active', 'delayed', 'prioritized');
          mostQueued = Math.max(
            mostQueued,
            Object.values(counts).reduce((sum, n) => sum + n, 0),
          );
          await sleep(20);
        }
      })();
      await waitFor(() => failing.requests.length >= 10, 30_000);
      const loaded = await latencies(20);
      sampling = false;
      await sampler;

      const figures = {
        unloaded: { p50: percentile(unloaded, 50), p99: percentile(unloaded, 99) },
        loaded: { p50: percentile(loaded, 50), p99: percentile(loaded, 99) },
        failingHits: failing.requests.length,
        mostQueued,
      };
      console.log('recovery fairness (ms):', JSON.stringify(figures));
      expect(figures.loaded.p99).toBeLessThanOrEqual(2 * Math.max(figures.unloaded.p99, 300));
      expect(figures.loaded.p50).toBeLessThanOrEqual(2 * Math.max(figures.unloaded.p50, 150));
      // The recovery never queued more than its window (a few times the hook's in-flight limit) ...
      expect(mostQueued).toBeLessThanOrEqual(RECOVERY_WINDOW_PER_IN_FLIGHT * config.HOOK_MAX_IN_FLIGHT_PER_HOOK);
      // ... and the receiver never had more of its requests open at once than the hook's limit.
      const arrivals = failing.requests.map((request) => request.at);
      const open = Math.max(...arrivals.map((at) => arrivals.filter((other) => other >= at && other < at + 90).length));
      expect(open).toBeLessThanOrEqual(config.HOOK_MAX_IN_FLIGHT_PER_HOOK);
      // The failures were recorded, one attempt each, as the retry schedule allows.
      const failed = await env.db.collection('deliveries').countDocuments({ hook_id: hookId, status: 'failed' });
      expect(failed).toBeGreaterThanOrEqual(10);
    } finally {
      // Deleting the hook stops its recovery.
      await ext(app, tenant.key, 'DELETE', `/hooks/${hookId}`);
      await deliveries.close();
      await workers.close();
    }
  }, 120_000);
});
