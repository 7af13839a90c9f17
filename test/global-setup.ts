import type { TestProject } from 'vitest/node';
import { startEmbeddedMongo } from '../src/dev/embedded-mongo.js';
import { hasRedisServerBinary, PrivateRedisServer } from '../src/dev/redis-server.js';

declare module 'vitest' {
  export interface ProvidedContext {
    mongoUrl: string;
    mongoKind: string;
    redisUrl: string;
  }
}

/** One MongoDB and one private Redis for the whole run; each test file isolates itself by database name and queue prefix. */
export default async function setup(project: TestProject) {
  const mongo = await startEmbeddedMongo({ quiet: true });
  let redis: PrivateRedisServer | undefined;
  let redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
  if (hasRedisServerBinary()) {
    redis = await PrivateRedisServer.start();
    redisUrl = redis.url;
  }
  project.provide('mongoUrl', mongo.url);
  project.provide('mongoKind', mongo.kind);
  project.provide('redisUrl', redisUrl);
  process.stdout.write(`test services: mongo=${mongo.kind} redis=${redis ? 'private redis-server' : redisUrl}\n`);

  return async () => {
    await redis?.stop();
    await mongo.stop();
  };
}
