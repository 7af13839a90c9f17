import { randomBytes } from 'node:crypto';
import closeWithGrace from 'close-with-grace';
import { startWorkers } from '../workers/start.js';
import { generateApiKey } from './auth/key-material.js';
import { createEventPublisher } from './container.js';
import { startEmbeddedMongo } from './dev/embedded-mongo.js';
import { hasRedisServerBinary, PrivateRedisServer } from './dev/redis-server.js';
import { seedDemo } from './dev/seed.js';
import { readDevState, writeDevState } from './dev/state.js';
import { loadConfigOrExit } from './shared/config.js';
import { createLogger } from './shared/logger.js';
import { connectMongo } from './shared/mongo.js';
import { createRequestPathRedis } from './shared/redis.js';
import { startWeb } from './web.js';

// `npm run dev`: web and workers in one process for a laptop, with embedded MongoDB and Redis when none is configured.
// It listens on 127.0.0.1 unless HOST says otherwise (it prints an admin token), and lets webhooks reach
// receivers on this machine (a first webhook goes to localhost) unless HOOK_ALLOW_PRIVATE_TARGETS=false.
const devConfig = loadConfigOrExit({
  ...process.env,
  HOST: process.env.HOST || '127.0.0.1',
  HOOK_ALLOW_PRIVATE_TARGETS: process.env.HOOK_ALLOW_PRIVATE_TARGETS || 'true',
});
// A Redis it starts itself, or the one REDIS_URL names; never silently whatever listens on 6379.
if (!process.env.REDIS_URL && !hasRedisServerBinary()) {
  process.stderr.write(
    'npm run dev: no redis-server on PATH. Install Redis (Debian/Ubuntu: apt-get install redis-server; macOS: brew install redis)\n' +
      '  so npm run dev can start a private one, or set REDIS_URL=redis://host:port to use a Redis you run.\n',
  );
  process.exit(1);
}
const mongoServer = await startEmbeddedMongo({ port: devConfig.DEV_MONGO_PORT });
process.stdout.write(`${mongoServer.description}\n`);
const redisServer = process.env.REDIS_URL
  ? undefined
  : await PrivateRedisServer.start({ port: devConfig.DEV_REDIS_PORT });

// The admin token and the demo key stay the same across restarts (kept in DEV_STATE_DIR, git-ignored).
const kept = readDevState(devConfig.DEV_STATE_DIR);
const state = {
  admin_token: process.env.ADMIN_TOKEN || kept.admin_token || `dev-${randomBytes(16).toString('hex')}`,
  demo_api_key: kept.demo_api_key || generateApiKey().value,
};
writeDevState(devConfig.DEV_STATE_DIR, state);
const config = {
  ...devConfig,
  MONGO_URL: mongoServer.url,
  REDIS_URL: redisServer?.url ?? devConfig.REDIS_URL,
  ADMIN_TOKEN: state.admin_token,
};

// Readable logs at a terminal; JSON lines when piped (to a file, jq, a log shipper).
const pretty = process.stdout.isTTY
  ? (await import('pino-pretty')).default({
      colorize: true,
      singleLine: true,
      ignore: 'pid,hostname',
      translateTime: 'HH:MM:ss.l',
      // Only `err` holds an Error; a delivery's `error` is its category (null when it succeeded), kept on its line.
      errorLikeObjectKeys: ['err'],
    })
  : undefined;
const logger = createLogger(config.LOG_LEVEL, 'dev', pretty);
const mongo = await connectMongo(mongoServer.url, config.MONGO_DB);
const redis = createRequestPathRedis(config.REDIS_URL);
redis.on('error', () => {});
// Fast path for events right after each write; the relay worker covers whatever this misses.
const publisher = createEventPublisher(mongo.db, { connection: redis, prefix: config.QUEUE_PREFIX }, logger, {
  retentionDays: config.EVENTS_RETENTION_DAYS,
  historyRetentionDays: config.HISTORY_RETENTION_DAYS,
  sequencerLeaseMs: config.SEQUENCER_LEASE_MS,
});
const app = await startWeb({ config, db: mongo.db, redis, logger, publisher });
const workers = await startWorkers({
  config,
  db: mongo.db,
  logger: createLogger(config.LOG_LEVEL, 'worker', pretty),
});
await seedDemo(app, state.admin_token, state.demo_api_key);

const base = `http://${config.HOST === '0.0.0.0' || config.HOST === '::' ? '127.0.0.1' : config.HOST}:${config.PORT}`;
process.stdout.write(
  [
    '',
    `pipeline-records dev server on ${base}, listening on ${config.HOST} (HOST=0.0.0.0 opens it to the network)`,
    `  mongo       : ${mongoServer.kind} ${mongoServer.url}`,
    `  redis       : ${redisServer ? `private redis-server ${config.REDIS_URL}` : `${config.REDIS_URL} from REDIS_URL (not started by npm run dev: its data and other users are its own)`}`,
    `  webhooks    : ${config.HOOK_ALLOW_PRIVATE_TARGETS ? 'may target this machine (HOOK_ALLOW_PRIVATE_TARGETS=false refuses, as production does)' : 'public targets only'}`,
    `  admin token : ${state.admin_token}`,
    `  demo API key: ${state.demo_api_key}`,
    `  kept in     : ${config.DEV_STATE_DIR}/state.json (the same on every start; delete it for new ones)`,
    `  try         : curl -s -H 'x-api-key: ${state.demo_api_key}' ${base}/v1/ext/pipelines`,
    '',
  ].join('\n') + '\n',
);

closeWithGrace({ delay: 10_000, logger }, async ({ signal, err }) => {
  logger.info({ signal, err }, 'dev server shutting down');
  await app.close();
  await publisher.close();
  await workers.close();
  redis.disconnect();
  await mongo.client.close();
  await redisServer?.stop();
  await mongoServer.stop();
  process.stdout.write('pipeline-records dev server stopped\n');
});
