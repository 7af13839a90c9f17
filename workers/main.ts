import closeWithGrace from 'close-with-grace';
import { loadConfigOrExit } from '../src/shared/config.js';
import { createLogger } from '../src/shared/logger.js';
import { pingMongo } from '../src/shared/mongo.js';
import { createRequestPathRedis, isRedisReady, pingRedisOnce } from '../src/shared/redis.js';
import { exitOnStartupFailure, listenError, reachMongo, untilReachable } from '../src/shared/startup.js';
import { shutdownTracing } from '../src/telemetry/state.js';
import { startMetricsServer } from './metrics-server.js';
import { startWorkers } from './start.js';
import type { RunningWorkers } from './role.js';
import type { Db } from 'mongodb';
import type { Server } from 'node:http';

// `npm run worker`: the roles named by WORKERS (default: all), never the web server.
const config = loadConfigOrExit();
if (!config.MONGO_URL) {
  process.stderr.write('Invalid configuration: MONGO_URL: required by npm run worker\n');
  process.exit(1);
}
const mongoUrl = config.MONGO_URL;
const logger = createLogger(config.LOG_LEVEL, 'worker');

let db: Db | undefined;
let workers: RunningWorkers | undefined;
let stop: (() => Promise<void>) | undefined;
let metricsServer: Server | undefined;
const probeRedis = createRequestPathRedis(config.REDIS_URL); // only for /readyz
probeRedis.on('error', () => {});

// SIGTERM: in-flight jobs finish (BullMQ's worker.close waits for them), then connections close. Installed
// first, so a SIGTERM while MongoDB or Redis are still awaited is a clean exit too.
closeWithGrace({ delay: 10_000, logger }, async ({ signal, err }) => {
  if (err) logger.error({ err }, 'shutting down after an error');
  else logger.info({ signal }, 'shutting down');
  await stop?.();
  metricsServer?.close();
  probeRedis.disconnect();
});

// Health first: while MongoDB or Redis are awaited, /healthz answers and /readyz says why it is not ready.
metricsServer =
  config.METRICS_PORT === undefined
    ? undefined
    : await startMetricsServer(config.METRICS_PORT, {
        async dependencies() {
          const [mongoUp, redisUp] = await Promise.all([db ? pingMongo(db) : false, isRedisReady(probeRedis)]);
          return { mongo: mongoUp ? 'ok' : 'down', redis: redisUp ? 'ok' : 'down' };
        },
        roles: () => workers?.states() ?? Object.fromEntries(config.WORKERS.map((role) => [role, 'starting'])),
      }).catch((error) => exitOnStartupFailure(logger, listenError('METRICS_PORT', config.METRICS_PORT!, error)));

const deadline = Date.now() + config.STARTUP_TIMEOUT_MS;
// With MONGO_COMMAND_METRICS, mongodb_commands_total on /metrics (METRICS_PORT): the round trips of each role.
const mongo = await reachMongo(
  { url: mongoUrl, dbName: config.MONGO_DB, countCommands: config.MONGO_COMMAND_METRICS },
  { deadline, logger },
).catch((error) => exitOnStartupFailure(logger, error));
// Every role needs Redis (queues, tick claims); without it the worker would sit idle, looking healthy.
await untilReachable('Redis', (attemptMs) => pingRedisOnce(config.REDIS_URL, attemptMs), { deadline, logger }).catch(
  (error) => exitOnStartupFailure(logger, error),
);
db = mongo.db;
workers = await startWorkers({ config, db: mongo.db, logger }).catch((error) => exitOnStartupFailure(logger, error));
logger.info({ roles: config.WORKERS }, 'worker process ready');
stop = async () => {
  await workers?.close();
  await mongo.client.close();
  await shutdownTracing(); // exports the spans still buffered
};
