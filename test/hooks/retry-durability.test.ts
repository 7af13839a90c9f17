import { Redis } from 'ioredis';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp, type App } from '../../src/app.js';
import { createEventPublisher } from '../../src/container.js';
import { PrivateRedisServer } from '../../src/dev/redis-server.js';
import { ensureIndexes } from '../../src/repositories.js';
import { must } from '../../src/shared/must.js';
import { createQueue } from '../../src/shared/queues.js';
import { createRequestPathRedis, type RedisClient } from '../../src/shared/redis.js';
import { createTestEnv, startTestWorkers, type TestEnv } from '../helpers/app.js';
import { createTask, createTenant, ext } from '../helpers/fixtures.js';
import { sleep, waitFor } from '../helpers/wait.js';
import { Receiver } from './receiver.js';
import type { QueueEventPublisher } from '../../src/events/queue-publisher.js';

const silent = pino({ level: 'silent' });
const RETRY_AFTER_SECONDS = 3;

// A Redis of its own (persisting nothing), so FLUSHALL loses only this test's data.
let redisServer: PrivateRedisServer;
let env: TestEnv;
let redis: RedisClient;
let publisher: QueueEventPublisher;
let app: App;
let workers: { close(): Promise<void> };
beforeAll(async () => {
  redisServer = await PrivateRedisServer.start();
  env = await createTestEnv({
    REDIS_URL: redisServer.url,
    RATE_LIMIT_MAX: '100000',
    RECONCILE_INTERVAL_MS: '300',
    HOOK_BACKOFF_MS: '100',
    HOOK_MAX_ATTEMPTS: '3',
  });
  await ensureIndexes(env.db);
  redis = createRequestPathRedis(redisServer.url, { commandTimeout: 10_000 });
  redis.on('error', () => {});
  publisher = createEventPublisher(env.db, { connection: redis, prefix: env.config.QUEUE_PREFIX }, silent);
  app = await buildApp({ config: env.config, db: env.db, redis, publisher, logger: silent });
  workers = await startTestWorkers(env.config, env.db, ['relay', 'hooks']);
});
afterAll(async () => {
  await workers?.close();
  await app?.close();
  await publisher?.close();
  redis?.disconnect();
  await env?.close();
  await redisServer?.stop();
});

describe('a delivery waiting for its retry', () => {
  it('survives Redis losing its data: the retry arrives once, at its due time', async () => {
    const inbox = await Receiver.start((_, index) =>
      index === 0 ? { status: 503, headers: { 'retry-after': String(RETRY_AFTER_SECONDS) } } : 200,
    );
    const deliveries = createQueue('deliveries', { connection: redis, prefix: env.config.QUEUE_PREFIX });
    const flusher = new Redis(redisServer.url);
    try {
      const tenant = await createTenant(app);
      const hook = (
        await ext(app, tenant.key, 'POST', '/hooks', { target_url: inbox.url(), event: 'task.created' })
      ).json();
      await createTask(app, tenant);
      expect(await waitFor(() => inbox.requests.length === 1)).toBe(true);
      const first = must(inbox.requests[0], 'attempt 1');

      // The retry is a delayed job in Redis and its due time a field in MongoDB.
      const record = await waitFor(async () => {
        const doc = await env.db.collection('deliveries').findOne({ hook_id: hook.hook_id });
        return doc?.next_attempt_at ? doc : undefined;
      });
      expect(record).toBeTruthy();
      const dueAt = (record!.next_attempt_at as Date).getTime();
      expect(dueAt - first.at).toBeGreaterThanOrEqual(RETRY_AFTER_SECONDS * 1_000 - 100);
      expect(await waitFor(async () => (await deliveries.getDelayedCount()) === 1)).toBe(true);

      await flusher.flushall(); // everything Redis held is gone, the delayed retry with it
      expect(await deliveries.getDelayedCount()).toBe(0);

      expect(await waitFor(() => inbox.requests.length === 2, 15_000)).toBe(true);
      const second = must(inbox.requests[1], 'attempt 2');
      expect(second.id).toBe(first.id);
      expect(second.at).toBeGreaterThanOrEqual(dueAt - 50); // the due time was kept, not run at once

      const attempts = await waitFor(async () => {
        const listed = (await ext(app, tenant.key, 'GET', `/hooks/${hook.hook_id}/deliveries`)).json();
        return listed.length === 2 ? listed : undefined;
      });
      expect(attempts.map((a: { attempt: number; succeeded: boolean }) => [a.attempt, a.succeeded])).toEqual([
        [2, true],
        [1, false],
      ]);
      expect(attempts[0].next_attempt_at).toBeNull();
      // Reconciler passes that follow (every 300 ms) find nothing waiting: once, not again.
      await sleep(1_500);
      expect(inbox.requests).toHaveLength(2);
      expect((await env.db.collection('deliveries').findOne({ hook_id: hook.hook_id }))?.next_attempt_at).toBeNull();
    } finally {
      flusher.disconnect();
      await deliveries.close();
      await inbox.close();
    }
  });
});
