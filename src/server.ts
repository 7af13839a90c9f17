import closeWithGrace from 'close-with-grace';
import { loadConfigOrExit } from './config.js';
import { createLogger } from './shared/logger.js';
import { connectMongo } from './shared/mongo.js';
import { createRequestPathRedis } from './shared/redis.js';
import { QueueEventPublisher } from './events/queue-publisher.js';
import { startWeb } from './web.js';

// `npm start`: the web process only. Workers run as separate processes (`npm run worker`).
const config = loadConfigOrExit();
if (!config.MONGO_URL) {
  process.stderr.write('Invalid configuration: MONGO_URL: required by npm start (use npm run dev for an embedded database)\n');
  process.exit(1);
}
const logger = createLogger(config.LOG_LEVEL, 'web');
const mongo = await connectMongo(config.MONGO_URL, config.MONGO_DB);
const redis = createRequestPathRedis(config.REDIS_URL);
redis.on('error', () => {}); // state is reported by /readyz and the rate limiter; avoid an unhandled 'error' event
// Fast path for events right after each write; the relay worker covers whatever this misses.
const publisher = new QueueEventPublisher(mongo.db, { connection: redis, prefix: config.QUEUE_PREFIX }, logger);
const app = await startWeb({ config, db: mongo.db, redis, logger, publisher });

// Stop accepting, let in-flight requests finish, close connections; forced exit after 10 s.
closeWithGrace({ delay: 10_000, logger }, async ({ signal, err }) => {
  if (err) logger.error({ err }, 'shutting down after an error');
  else logger.info({ signal }, 'shutting down');
  await app.close();
  await publisher.close();
  redis.disconnect();
  await mongo.client.close();
});
