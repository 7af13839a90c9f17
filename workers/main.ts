import closeWithGrace from 'close-with-grace';
import { loadConfigOrExit } from '../src/config.js';
import { createLogger } from '../src/shared/logger.js';
import { connectMongo } from '../src/shared/mongo.js';
import { startMetricsServer } from './metrics-server.js';
import { startWorkers } from './start.js';

// `npm run worker`: the roles named by WORKERS (default: all), never the web server.
const config = loadConfigOrExit();
if (!config.MONGO_URL) {
  process.stderr.write('Invalid configuration: MONGO_URL: required by npm run worker\n');
  process.exit(1);
}
const logger = createLogger(config.LOG_LEVEL, 'worker');
const mongo = await connectMongo(config.MONGO_URL, config.MONGO_DB);
const workers = await startWorkers({ config, db: mongo.db, logger });
const metricsServer = config.METRICS_PORT !== undefined ? await startMetricsServer(config.METRICS_PORT) : undefined;
logger.info({ roles: config.WORKERS }, 'worker process ready');

// SIGTERM: in-flight jobs finish (BullMQ's worker.close waits for them), then connections close.
closeWithGrace({ delay: 10_000, logger }, async ({ signal, err }) => {
  if (err) logger.error({ err }, 'shutting down after an error');
  else logger.info({ signal }, 'shutting down');
  await workers.close();
  metricsServer?.close();
  await mongo.client.close();
});
