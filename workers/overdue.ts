import cron from 'node-cron';
import { createQueue, startWorker } from '../src/shared/queues.js';
import { createWorkerRedis } from '../src/shared/redis.js';
import { enqueueOverdueTick, processOverdueTick } from '../src/tasks/overdue.js';
import type { Logger } from '../src/shared/logger.js';
import type { RoleStarter } from './role.js';

/** node-cron's own messages go to pino; its warnings (a tick missed under load) are harmless here. */
function cronLogger(logger: Logger) {
  return {
    info: (message: string) => logger.debug(message),
    debug: (message: string | Error) => logger.debug(String(message)),
    warn: (message: string) => logger.info(message),
    error: (message: string | Error, err?: Error) => logger.error({ err: err ?? message }, 'node-cron error'),
  };
}

/**
 * The overdue role: on every OVERDUE_SCAN_CRON tick every process adds the tick's job to the `overdue`
 * queue (one job per tick across processes), and a worker of concurrency 1, global concurrency 1, scans
 * (src/tasks/overdue.ts). With Redis unreachable ticks are skipped and the role reports `failing`.
 */
export const startOverdue: RoleStarter = async ({ config, logger, container }) => {
  const prefix = config.QUEUE_PREFIX;
  // Adds go on the container's client, which fails fast: an outage shows at the tick, not as a wait.
  const ticks = createQueue('overdue', { connection: container.redis, prefix });
  ticks.on('error', () => {});
  const connection = createWorkerRedis(config.REDIS_URL);
  connection.on('error', () => {});
  const closing = new AbortController(); // a running scan stops after its current batch
  const deps = { tasks: container.repos.tasks, publisher: container.services.publisher, logger };
  const worker = startWorker(
    'overdue',
    (job) => processOverdueTick(deps, job.data, closing.signal),
    { connection, prefix, lockMs: config.JOB_LOCK_MS, logger },
    { concurrency: 1 },
  );
  let redisDown = false;
  let adding: Promise<void> = Promise.resolve();

  async function addTick(tick: Date): Promise<void> {
    try {
      if (container.redis.status !== 'ready') throw new Error(`Redis connection ${container.redis.status}`);
      await enqueueOverdueTick(ticks, tick);
      if (redisDown) logger.info('Redis answers again; overdue ticks resume');
      redisDown = false;
    } catch (error) {
      if (!redisDown) logger.warn({ err: error }, 'Redis unreachable; overdue ticks are skipped until it answers');
      logger.debug({ tick: tick.toISOString() }, 'overdue tick skipped');
      redisDown = true;
    }
  }

  const schedule = cron.schedule(config.OVERDUE_SCAN_CRON, (context) => (adding = addTick(context.date)), {
    name: 'overdue-tick',
    noOverlap: true,
    logger: cronLogger(logger),
  });

  return {
    state: () => (redisDown ? 'failing' : 'running'),
    async close() {
      await schedule.destroy();
      closing.abort();
      await adding;
      await worker.close();
      await ticks.close();
      connection.disconnect();
    },
  };
};
