import { ERASURE_SWEEP_AGE_MS } from '../src/erasure/job.js';
import { startWorker } from '../src/shared/queues.js';
import { createWorkerRedis } from '../src/shared/redis.js';
import type { RoleStarter } from './role.js';

/**
 * The erasures role: runs erasure jobs (src/erasure/job.ts), one at a time per process, and every minute queues
 * again the erasures MongoDB says are unfinished.
 */
export const startErasures: RoleStarter = async ({ config, logger, container }) => {
  const connection = createWorkerRedis(config.REDIS_URL);
  connection.on('error', () => {});
  const erasures = container.processors.erasures();
  const settings = { connection, prefix: config.QUEUE_PREFIX, lockMs: erasures.lockMs, logger };
  const worker = startWorker('erasures', erasures.process, settings, { concurrency: 1 });
  worker.on('error', () => {});
  const sweep = setInterval(
    () => void erasures.sweep().catch((error: unknown) => logger.warn({ err: error }, 'erasure sweep failed')),
    ERASURE_SWEEP_AGE_MS,
  );
  sweep.unref();
  return {
    async close() {
      clearInterval(sweep);
      await worker.close();
      connection.disconnect();
    },
  };
};
