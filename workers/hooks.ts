import { startWorker } from '../src/shared/queues.js';
import { createWorkerRedis } from '../src/shared/redis.js';
import type { RoleStarter } from './role.js';

/**
 * The hooks role: `hook-fanout` makes each event's first attempt to every matching hook, and
 * `deliveries` runs the retries, redeliveries, recoveries and automation webhooks (src/hooks/processors.ts).
 */
export const startHooks: RoleStarter = async ({ config, logger, container }) => {
  const connection = createWorkerRedis(config.REDIS_URL);
  const settings = { connection, prefix: config.QUEUE_PREFIX, lockMs: config.JOB_LOCK_MS, logger };
  const hooks = container.processors.hooks(connection);
  const concurrency = { concurrency: config.HOOK_CONCURRENCY };
  const fanOut = startWorker('hook-fanout', hooks.fanOut, settings, concurrency);
  const delivering = startWorker('deliveries', hooks.deliver, settings, concurrency);
  hooks.recoveries.start();

  return {
    state: () => (fanOut.isRunning() && delivering.isRunning() ? 'running' : 'stopped'),
    async close() {
      await Promise.all([fanOut.close(), delivering.close()]);
      await hooks.close();
      connection.disconnect();
    },
  };
};
