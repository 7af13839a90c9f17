import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { LocalRedisCluster } from '../../src/dev/redis-cluster.js';
import { createRequestPathRedis, type RedisClient } from '../../src/shared/redis.js';
import { buildTestApp, startTestWorkers, type TestApp } from '../helpers/app.js';
import { createTask, createTenant, ext, type Tenant } from '../helpers/fixtures.js';
import { waitFor } from '../helpers/wait.js';
import { Receiver } from '../hooks/receiver.js';

/**
 * A Redis Cluster of 3 masters with a replica each loses the master that holds the queues' slot:
 * after the replica takes over, the shared rate limit and webhook deliveries carry on.
 */
let cluster: LocalRedisCluster;
let t: TestApp;
let second: { app: Awaited<ReturnType<typeof buildApp>>; redis: RedisClient };
let workers: { close(): Promise<void> };
let inbox: Receiver;
let tenant: Tenant;

beforeAll(async () => {
  cluster = await LocalRedisCluster.start({ replicas: 1, nodeTimeoutMs: 1_000 });
  t = await buildTestApp(
    { REDIS_URL: cluster.url, RATE_LIMIT_MAX: '6', RATE_LIMIT_WINDOW_SECONDS: '60', HOOK_BACKOFF_MS: '100' },
    { publisher: true },
  );
  // A second web "process" on its own connection: the limit holds across both only through Redis.
  const redis = createRequestPathRedis(cluster.url);
  redis.on('error', () => {});
  second = { app: await buildApp({ config: t.config, db: t.db, redis }), redis };
  await second.app.ready();
  workers = await startTestWorkers(t.config, t.db, ['relay', 'hooks']);
  inbox = await Receiver.start();
  tenant = await createTenant(t.app);
}, 60_000);

afterAll(async () => {
  await inbox?.close();
  await workers?.close();
  await second?.app.close();
  second?.redis.disconnect();
  await t?.close();
  await cluster?.stop();
});

/** Calls alternate between the two web apps; returns the status codes. */
async function burst(key: string, count: number): Promise<number[]> {
  const statuses: number[] = [];
  for (let index = 0; index < count; index++) {
    const app = index % 2 === 0 ? t.app : second.app;
    statuses.push((await ext(app, key, 'GET', '/pipelines')).statusCode);
  }
  return statuses;
}

describe('Redis Cluster failover', () => {
  it('keeps the shared rate limit and delivers webhooks after the master holding the queues dies', async () => {
    expect(t.config.QUEUE_PREFIX).toMatch(/^\{.+\}$/);
    const hook = await ext(t.app, tenant.key, 'POST', '/hooks', { target_url: inbox.url(), event: 'task.created' });
    expect(hook.statusCode, hook.body).toBe(201);
    await createTask(t.app, tenant);
    expect(await waitFor(() => inbox.requests.length === 1, 20_000)).toBe(true);

    // The master serving the queues' hash slot, from the cluster's own slot map.
    const victim = await cluster.masterPortFor(t.config.QUEUE_PREFIX);
    await cluster.killNode(victim);
    await cluster.waitUntilHealthy(30_000);

    // Both web clients have found the promoted replica once a write to the queues' slot succeeds.
    for (const redis of [t.redis, second.redis]) {
      const ok = await waitFor(
        () =>
          redis.set(`${t.config.QUEUE_PREFIX}:probe`, '1').then(
            () => true,
            () => false,
          ),
        20_000,
        200,
      );
      expect(ok).toBe(true);
    }
    // A fresh key, 10 calls alternating between the two apps: exactly 6 pass only if both count in
    // Redis (each process's fallback window would admit all 10 between them).
    const fresh = await createTenant(t.app);
    const statuses = await burst(fresh.key, 10);
    expect(statuses.filter((status) => status === 200)).toHaveLength(6);
    expect(statuses.slice(6)).toEqual([429, 429, 429, 429]);

    await createTask(t.app, tenant);
    expect(await waitFor(() => inbox.requests.length === 2, 30_000)).toBe(true);
    expect(new Set(inbox.requests.map((request) => request.id)).size).toBe(2);
  }, 90_000);
});
