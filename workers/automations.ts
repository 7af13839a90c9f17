import { startWorker } from '../src/shared/queues.js';
import { createWorkerRedis } from '../src/shared/redis.js';
import type { RoleStarter } from './role.js';

/**
 * The automations role: evaluates automation rules for every task event (src/automations/processor.ts). Its
 * actions go through the same task and item services as the API's, so the events they cause are recorded alike.
 */
export const startAutomations: RoleStarter = async ({ config, logger, container }) => {
  const connection = createWorkerRedis(config.REDIS_URL);
  const settings = { connection, prefix: config.QUEUE_PREFIX, lockMs: config.JOB_LOCK_MS, logger };
  const automations = container.processors.automations();
  const worker = startWorker('automations', automations.process, settings, { concurrency: automations.concurrency });

  return {
    state: () => (worker.isRunning() ? 'running' : 'stopped'),
    async close() {
      await worker.close();
      await automations.close();
      connection.disconnect();
    },
  };
};
