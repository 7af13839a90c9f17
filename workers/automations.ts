import { processAutomationEvent } from '../src/automations/processor.js';
import { ConsumerProgress } from '../src/events/progress.js';
import { jobStillQueued, startWorker } from '../src/shared/queues.js';
import { createWorkerRedis } from '../src/shared/redis.js';
import type { RoleStarter } from './role.js';

/** Events evaluated at once, whichever jobs carry them. */
const AUTOMATIONS_CONCURRENCY = 10;

/**
 * The automations role: evaluates automation rules for every task event. Its actions go through the
 * same task and item services as the API's, so the events they cause are recorded and published alike.
 */
export const startAutomations: RoleStarter = async ({ config, logger, container }) => {
  const { repos, services, queues } = container;
  const connection = createWorkerRedis(config.REDIS_URL);
  const settings = { connection, prefix: config.QUEUE_PREFIX, lockMs: config.JOB_LOCK_MS, logger };
  const progress = new ConsumerProgress('automations', repos.events, {
    concurrency: AUTOMATIONS_CONCURRENCY,
    jobExists: (jobId) => jobStillQueued(queues.automations, jobId),
  });

  const worker = startWorker(
    'automations',
    progress.track(async (event, job) => {
      const ran = await processAutomationEvent(event, {
        automations: repos.automations,
        tasks: services.tasks,
        items: services.items,
        enqueueDelivery: async (data, jobId) => void (await queues.deliveries.add('delivery', data, { jobId })),
        logger: logger.child({ job_id: job.id, attempt: job.attemptsMade + 1 }),
      });
      return { ran };
    }),
    settings,
    { concurrency: AUTOMATIONS_CONCURRENCY },
  );

  return {
    state: () => (worker.isRunning() ? 'running' : 'stopped'),
    async close() {
      await worker.close();
      await progress.close();
      connection.disconnect();
    },
  };
};
