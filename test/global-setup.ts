import { startEmbeddedMongo } from '../src/dev/embedded-mongo.js';
import { LocalRedisCluster } from '../src/dev/redis-cluster.js';
import { hasRedisServerBinary, PrivateRedisServer } from '../src/dev/redis-server.js';
import type { TestProject } from 'vitest/node';

declare module 'vitest' {
  export interface ProvidedContext {
    mongoUrl: string;
    mongoKind: string;
    redisUrl: string;
  }
}

/** One MongoDB and one private Redis for the whole run; each test file isolates itself by database name and queue prefix. */
export default async function setup(project: TestProject) {
  // Unsorted reads come back in a random order, so a test or product path that depends on an order MongoDB does not
  // promise fails here rather than in production (MONGO_STANDIN_SHUFFLE=0 turns it off to tell a flake from a bug).
  const mongo = await startEmbeddedMongo({
    quiet: true,
    standin: { shuffleUnsorted: process.env.MONGO_STANDIN_SHUFFLE !== '0' },
  });
  let redis: PrivateRedisServer | LocalRedisCluster | undefined;
  let redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
  // `npm run test:cluster` sets TEST_REDIS=cluster: a local 3-master Redis Cluster instead of one node.
  if (process.env.TEST_REDIS === 'cluster') {
    redis = await LocalRedisCluster.start();
    redisUrl = redis.url;
  } else if (hasRedisServerBinary()) {
    redis = await PrivateRedisServer.start();
    redisUrl = redis.url;
  }
  project.provide('mongoUrl', mongo.url);
  project.provide('mongoKind', mongo.kind);
  project.provide('redisUrl', redisUrl);
  // The summary reporter (same process) names the backend in the closing line.
  process.env.TEST_MONGO_BACKEND = mongo.kind;
  process.stdout.write(
    `${mongo.description}\ntest services: mongo=${mongo.kind} redis=${redis instanceof LocalRedisCluster ? 'local redis cluster (3 masters)' : redis ? 'private redis-server' : redisUrl}\n`,
  );

  return async () => {
    await redis?.stop();
    await mongo.stop();
  };
}
