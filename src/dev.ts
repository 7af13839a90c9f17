import { randomBytes } from 'node:crypto';
import closeWithGrace from 'close-with-grace';
import { loadConfigOrExit } from './config.js';
import { startEmbeddedMongo } from './dev/embedded-mongo.js';
import { hasRedisServerBinary, PrivateRedisServer } from './dev/redis-server.js';
import { seedDemo } from './dev/seed.js';
import { createLogger } from './shared/logger.js';
import { connectMongo } from './shared/mongo.js';
import { createRequestPathRedis } from './shared/redis.js';
import { QueueEventPublisher } from './events/queue-publisher.js';
import { startWeb } from './web.js';
import { startWorkers } from '../workers/start.js';

// `npm run dev`: web and workers in one process for a laptop, with embedded MongoDB and Redis when none is configured.
const mongoServer = await startEmbeddedMongo();
const redisServer = !process.env.REDIS_URL && hasRedisServerBinary() ? await PrivateRedisServer.start() : undefined;
const adminToken = process.env.ADMIN_TOKEN || `dev-${randomBytes(16).toString('hex')}`;
const config = loadConfigOrExit({
  ...process.env,
  MONGO_URL: mongoServer.url,
  ...(redisServer ? { REDIS_URL: redisServer.url } : {}),
  ADMIN_TOKEN: adminToken,
});
const logger = createLogger(config.LOG_LEVEL, 'dev');
const mongo = await connectMongo(mongoServer.url, config.MONGO_DB);
const redis = createRequestPathRedis(config.REDIS_URL);
redis.on('error', () => {});
// Fast path for events right after each write; the relay worker covers whatever this misses.
const publisher = new QueueEventPublisher(mongo.db, { connection: redis, prefix: config.QUEUE_PREFIX }, logger);
const app = await startWeb({ config, db: mongo.db, redis, logger, publisher });
const workers = await startWorkers({ config, db: mongo.db, logger: logger.child({ name: 'worker' }) });
const { apiKey } = await seedDemo(app, adminToken);

const base = `http://127.0.0.1:${config.PORT}`;
process.stdout.write(
  [
    '',
    `pipeline-records dev server on ${base} (mongo: ${mongoServer.kind}, redis: ${redisServer ? 'private redis-server' : config.REDIS_URL})`,
    `  admin token : ${adminToken}`,
    `  demo API key: ${apiKey}`,
    `  try         : curl -s -H 'x-api-key: ${apiKey}' ${base}/v1/ext/pipelines`,
    '',
  ].join('\n') + '\n',
);

closeWithGrace({ delay: 10_000, logger }, async () => {
  await app.close();
  await publisher.close();
  await workers.close();
  redis.disconnect();
  await mongo.client.close();
  await redisServer?.stop();
  await mongoServer.stop();
});
