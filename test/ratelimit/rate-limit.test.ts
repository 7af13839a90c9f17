import { randomUUID } from 'node:crypto';
import { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { PrivateRedisServer } from '../../src/dev/redis-server.js';
import { createRequestPathRedis } from '../../src/shared/redis.js';
import { SlidingWindowLimiter } from '../../src/shared/sliding-window.js';
import { buildTestApp, testConfig, type TestApp } from '../helpers/app.js';
import { createKey, createTenant, expectProblem, ext, type Tenant } from '../helpers/fixtures.js';

let t: TestApp;
let tenant: Tenant;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

beforeAll(async () => {
  t = await buildTestApp();
  tenant = await createTenant(t.app);
});
afterAll(async () => t?.close());

const freshKey = async () => (await createKey(t.app, tenant.companyId, tenant.userId)).key;
const freshKeyWithId = async () => {
  const created = await createKey(t.app, tenant.companyId, tenant.userId);
  return { key: created.key, keyId: created.key_id };
};

describe('rate limit (60 per 60 s by default)', () => {
  it('counts down in the headers and answers request 61 with 429 and Retry-After', async () => {
    const key = await freshKey();
    for (let i = 1; i <= 60; i++) {
      const response = await ext(t.app, key, 'GET', '/pipelines');
      expect(response.statusCode).toBe(200);
      expect(response.headers['ratelimit-limit']).toBe('60');
      expect(response.headers['ratelimit-remaining']).toBe(String(60 - i));
      expect(response.headers['ratelimit-policy']).toBe('60;w=60');
      expect(Number(response.headers['ratelimit-reset'])).toBeGreaterThanOrEqual(1);
      expect(Number(response.headers['ratelimit-reset'])).toBeLessThanOrEqual(60);
    }
    const limited = await ext(t.app, key, 'GET', '/pipelines');
    expectProblem(limited, 429, 'rate_limited');
    expect(Number(limited.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(limited.headers['ratelimit-remaining']).toBe('0');
  });

  it('admits exactly 60 of 100 concurrent requests on one key', async () => {
    const key = await freshKey();
    const responses = await Promise.all(Array.from({ length: 100 }, () => ext(t.app, key, 'GET', '/pipelines')));
    const statuses = responses.map((response) => response.statusCode);
    expect(statuses.filter((status) => status === 200)).toHaveLength(60);
    expect(statuses.filter((status) => status === 429)).toHaveLength(40);
  });

  it('shares one budget between two web processes on the same Redis', async () => {
    const other = await buildApp({ config: t.config, db: t.db, redis: t.redis });
    try {
      const key = await freshKey();
      for (let i = 0; i < 30; i++) expect((await ext(t.app, key, 'GET', '/pipelines')).statusCode).toBe(200);
      for (let i = 0; i < 30; i++) expect((await ext(other, key, 'GET', '/pipelines')).statusCode).toBe(200);
      expect((await ext(other, key, 'GET', '/pipelines')).statusCode).toBe(429);
      expect((await ext(t.app, key, 'GET', '/pipelines')).statusCode).toBe(429);
    } finally {
      await other.close();
    }
  });
});

describe('checks made in one event-loop turn', () => {
  it('reach Redis in one script call and are decided in the order they were made', async () => {
    const redis = t.redis.duplicate();
    const keyPrefix = `batch-${randomUUID()}:`;
    const limiter = new SlidingWindowLimiter(redis, { max: 3, windowSeconds: 60, keyPrefix });
    // Counts the script calls this client sends (the limiter defined the command on it).
    const counted = redis as unknown as { slidingWindow(...args: unknown[]): Promise<number[]> };
    const send = counted.slidingWindow.bind(redis);
    let calls = 0;
    counted.slidingWindow = (...args) => {
      calls++;
      return send(...args);
    };
    try {
      while (redis.status !== 'ready') await sleep(10);
      const sameKey = await Promise.all(Array.from({ length: 5 }, () => limiter.consume('one')));
      expect(sameKey.map((decision) => [decision.allowed, decision.remaining, decision.backend])).toEqual([
        [true, 2, 'redis'],
        [true, 1, 'redis'],
        [true, 0, 'redis'],
        [false, 0, 'redis'],
        [false, 0, 'redis'],
      ]);
      expect(calls).toBe(1);
      // Three admissions in the window; every check of the call sees the same oldest one.
      expect(await redis.zcard(`${keyPrefix}one`)).toBe(3);
      expect(new Set(sameKey.map((decision) => decision.resetSeconds))).toEqual(new Set([60]));

      const twoKeys = await Promise.all([limiter.consume('two'), limiter.consume('three'), limiter.consume('one')]);
      expect(twoKeys.map((decision) => decision.allowed)).toEqual([true, true, false]);
      // On a cluster these keys live on different shards on purpose: one call per key there.
      expect(calls).toBe(redis instanceof Cluster ? 4 : 2);
    } finally {
      redis.disconnect();
    }
  });
});

// A 4 s window leaves each step at least 600 ms of slack on a busy machine: every bound below is taken
// from when a burst was sent (admitted no earlier) or answered (admitted no later).
describe('sliding window (5 per 4 s)', () => {
  let small: TestApp;
  beforeAll(async () => {
    small = await buildTestApp({ RATE_LIMIT_MAX: '5', RATE_LIMIT_WINDOW_SECONDS: '4' });
  });
  afterAll(async () => small?.close());

  it('never lets a burst at a window boundary double the limit, and admits one per request that left', async () => {
    const own = await createTenant(small.app);
    const call = () => ext(small.app, own.key, 'GET', '/pipelines').then((response) => response.statusCode);
    const start = Date.now();
    expect(await Promise.all([call(), call(), call()])).toEqual([200, 200, 200]);
    const firstAnswered = Date.now();
    await sleep(2_400);
    expect(await Promise.all([call(), call()])).toEqual([200, 200]);
    // Any fixed 1 s or 2 s bucket would have reset by now; the sliding window (first three leave at
    // start + 4 s at the earliest) still holds all five.
    await sleep(Math.max(0, start + 3_400 - Date.now()));
    expect(await Promise.all([call(), call(), call()])).toEqual([429, 429, 429]);
    // Rejections were not counted: once the first three have left (and before the next two leave, at
    // start + 6.4 s at the earliest), exactly three more get in.
    await sleep(Math.max(0, firstAnswered + 4_200 - Date.now()));
    const after = await Promise.all([call(), call(), call(), call()]);
    expect(after.filter((status) => status === 200)).toHaveLength(3);
  });
});

describe('when Redis is unreachable', () => {
  it('keeps serving with a per-process window of the same quota, then shares Redis again', async () => {
    const redisServer = await PrivateRedisServer.start();
    const config = testConfig({ REDIS_URL: redisServer.url, RATE_LIMIT_MAX: '5' });
    const redis = createRequestPathRedis(redisServer.url);
    redis.on('error', () => {});
    const app = await buildApp({ config, db: t.db, redis });
    try {
      const { key, keyId } = await freshKeyWithId();
      // Connected first: a request made while the connection is still opening is counted in memory.
      while (redis.status !== 'ready') await sleep(10);
      expect((await ext(app, key, 'GET', '/pipelines')).statusCode).toBe(200);

      await redisServer.stop();
      await sleep(100);
      const during = [];
      for (let i = 0; i < 7; i++) during.push((await ext(app, key, 'GET', '/pipelines')).statusCode);
      expect(during).toEqual([200, 200, 200, 200, 200, 429, 429]);
      expect((await app.inject({ method: 'GET', url: '/readyz' })).json()).toEqual({ mongo: 'ok', redis: 'down' });

      await redisServer.start();
      const deadline = Date.now() + 10_000;
      while (redis.status !== 'ready' && Date.now() < deadline) await sleep(50);
      expect(redis.status).toBe('ready');
      // The fresh Redis has an empty window for this key: admitted, and now counted in Redis again.
      const back = await ext(app, key, 'GET', '/pipelines');
      expect(back.statusCode).toBe(200);
      expect(back.headers['ratelimit-remaining']).toBe('4');
      // Counted in the fresh Redis: exactly the one request made since it came back.
      expect(await redis.zcard(`${config.QUEUE_PREFIX}:rl:${keyId}`)).toBe(1);
      const keys = await redis.keys(`${config.QUEUE_PREFIX}:rl:*`);
      expect(keys).toHaveLength(1);
    } finally {
      await app.close();
      redis.disconnect();
      await redisServer.stop();
    }
  });
});
