// The web app in this process against a private Redis and MongoDB (MONGO_URL, else the stand-in in a
// child process), for the measurements of scripts/hardening/.

import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { pino } from 'pino';
import { buildApp, type App } from '../../src/app.js';
import { PrivateRedisServer } from '../../src/dev/redis-server.js';
import { ensureIndexes } from '../../src/repositories.js';
import { loadConfig } from '../../src/shared/config.js';
import { connectMongo } from '../../src/shared/mongo.js';
import { createRequestPathRedis } from '../../src/shared/redis.js';

export const ADMIN_TOKEN = 'hardening-admin-token-0123456789';

async function startStandin(): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/dev/mongo-standin/cli.ts', '--port', '0'], {
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  const lines = createInterface({ input: child.stdout });
  for await (const line of lines) if (line.startsWith('ready ')) return { url: line.slice(6), child };
  throw new Error('the MongoDB stand-in did not start');
}

export interface MeasuredApp {
  app: App;
  url: string;
  close(): Promise<void>;
}

export async function startMeasuredApp(env: Record<string, string> = {}): Promise<MeasuredApp> {
  const standin = process.env.MONGO_URL ? undefined : await startStandin();
  const redisServer = await PrivateRedisServer.start();
  const config = loadConfig({
    NODE_ENV: 'test',
    MONGO_URL: process.env.MONGO_URL ?? standin!.url,
    MONGO_DB: `hardening_${Date.now()}`,
    REDIS_URL: redisServer.url,
    ADMIN_TOKEN,
    LOG_LEVEL: 'silent',
    RATE_LIMIT_MAX: '1000000',
    ...env,
  });
  const mongo = await connectMongo(config.MONGO_URL!, config.MONGO_DB);
  const redis = createRequestPathRedis(config.REDIS_URL);
  await ensureIndexes(mongo.db);
  const app = await buildApp({ config, db: mongo.db, redis, logger: pino({ level: 'silent' }) });
  const url = await app.listen({ port: 0, host: '127.0.0.1' });
  return {
    app,
    url,
    async close() {
      await app.close();
      redis.disconnect();
      await mongo.db.dropDatabase().catch(() => {});
      await mongo.client.close();
      await redisServer.stop();
      standin?.child.kill('SIGTERM');
    },
  };
}
