import { randomUUID } from 'node:crypto';
import { pino } from 'pino';
import { inject } from 'vitest';
import { buildApp } from '../../src/app.js';
import { createEventPublisher } from '../../src/container.js';
import { ensureIndexes } from '../../src/repositories.js';
import { loadConfig, type Config, type WorkerRole } from '../../src/shared/config.js';
import { connectMongo } from '../../src/shared/mongo.js';
import { createRequestPathRedis } from '../../src/shared/redis.js';
import { startWorkers } from '../../workers/start.js';
import type { RedisClient } from '../../src/shared/redis.js';
import type { FastifyInstance } from 'fastify';
import type { Db, MongoClient } from 'mongodb';

export const TEST_ADMIN_TOKEN = 'test-admin-token-0123456789abcdefghij';

export interface TestEnv {
  config: Config;
  db: Db;
  mongoClient: MongoClient;
  redis: RedisClient;
  close(): Promise<void>;
}

/** A database name and queue prefix of its own, so test files never see each other's data. */
export function uniqueName(prefix: string): string {
  return `${prefix}_${randomUUID().replaceAll('-', '').slice(0, 12)}`;
}

export function testConfig(overrides: Record<string, string> = {}): Config {
  return loadConfig({
    NODE_ENV: 'test',
    MONGO_URL: inject('mongoUrl'),
    MONGO_DB: uniqueName('t'),
    REDIS_URL: inject('redisUrl'),
    QUEUE_PREFIX: uniqueName('q'),
    ADMIN_TOKEN: TEST_ADMIN_TOKEN,
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    HOOK_ALLOW_PRIVATE_TARGETS: 'true',
    ...overrides,
  });
}

/** Real MongoDB (or the stand-in) and real Redis connections for one test file. */
export async function createTestEnv(overrides: Record<string, string> = {}): Promise<TestEnv> {
  const config = testConfig(overrides);
  const mongo = await connectMongo(config.MONGO_URL!, config.MONGO_DB);
  const redis = createRequestPathRedis(config.REDIS_URL);
  redis.on('error', () => {});
  return {
    config,
    db: mongo.db,
    mongoClient: mongo.client,
    redis,
    async close() {
      await mongo.db.dropDatabase().catch(() => {});
      await mongo.client.close();
      redis.disconnect();
    },
  };
}

export interface TestApp extends TestEnv {
  app: FastifyInstance;
}

/**
 * The web app on the test database. With `publisher: true` it publishes events to the queues right
 * after each write, as production does; without, events wait in the outbox (for the relay or a test).
 */
export async function buildTestApp(
  overrides: Record<string, string> = {},
  options: { publisher?: boolean } = {},
): Promise<TestApp> {
  const env = await createTestEnv(overrides);
  await ensureIndexes(env.db);
  const publisher = options.publisher
    ? createEventPublisher(
        env.db,
        { connection: env.redis, prefix: env.config.QUEUE_PREFIX },
        pino({ level: 'silent' }),
        {
          sequencerLeaseMs: env.config.SEQUENCER_LEASE_MS,
          historyRetentionDays: env.config.HISTORY_RETENTION_DAYS,
        },
      )
    : undefined;
  const app = await buildApp({ config: env.config, db: env.db, redis: env.redis, publisher });
  await app.ready();
  return {
    ...env,
    app,
    async close() {
      await app.close();
      await publisher?.close();
      await env.close();
    },
  };
}

/** Worker roles in this process, on the test database and queue prefix. */
export async function startTestWorkers(config: Config, db: Db, roles: WorkerRole[]) {
  return startWorkers({
    config: { ...config, WORKERS: roles },
    db,
    logger: pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' }),
  });
}
