import closeWithGrace from 'close-with-grace';
import { createEventPublisher } from './container.js';
import { loadConfigOrExit } from './shared/config.js';
import { createLogger } from './shared/logger.js';
import { createRequestPathRedis } from './shared/redis.js';
import { exitOnStartupFailure, listenError, reachMongo } from './shared/startup.js';
import { shutdownTracing } from './telemetry/state.js';
import { startWeb } from './web.js';

// `npm start`: the web process only. Workers run as separate processes (`npm run worker`).
const config = loadConfigOrExit();
if (!config.MONGO_URL) {
  process.stderr.write(
    'Invalid configuration: MONGO_URL: required by npm start (use npm run dev for an embedded database)\n',
  );
  process.exit(1);
}
const mongoUrl = config.MONGO_URL;
const logger = createLogger(config.LOG_LEVEL, 'web');
let stop: (() => Promise<void>) | undefined;

// Stop accepting, let in-flight requests finish, close connections; forced exit after 10 s. Installed
// first, so a SIGTERM while MongoDB is still awaited is a clean exit too.
closeWithGrace({ delay: 10_000, logger }, async ({ signal, err }) => {
  if (err) logger.error({ err }, 'shutting down after an error');
  else logger.info({ signal }, 'shutting down');
  await stop?.();
});

const deadline = Date.now() + config.STARTUP_TIMEOUT_MS;
const mongo = await reachMongo(
  { url: mongoUrl, dbName: config.MONGO_DB, countCommands: config.MONGO_COMMAND_METRICS },
  { deadline, logger },
).catch((error) => exitOnStartupFailure(logger, error));
// Redis is not waited for: the API serves through a Redis outage (DECISIONS.md section 4) and the client reconnects.
const redis = createRequestPathRedis(config.REDIS_URL);
redis.on('error', () => {}); // state is reported by /readyz and the rate limiter; avoid an unhandled 'error' event
// Fast path for events right after each write; the relay worker covers whatever this misses.
const publisher = createEventPublisher(mongo.db, { connection: redis, prefix: config.QUEUE_PREFIX }, logger, {
  retentionDays: config.EVENTS_RETENTION_DAYS,
  historyRetentionDays: config.HISTORY_RETENTION_DAYS,
  sequencerLeaseMs: config.SEQUENCER_LEASE_MS,
});
const app = await startWeb({ config, db: mongo.db, redis, logger, publisher }).catch((error) =>
  exitOnStartupFailure(logger, listenError('PORT', config.PORT, error)),
);
stop = async () => {
  await app.close();
  await publisher.close();
  redis.disconnect();
  await mongo.client.close();
  await shutdownTracing(); // exports the spans still buffered
};
