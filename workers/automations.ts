import { processAutomationEvent } from '../src/automations/processor.js';
import { ConsumerProgress } from '../src/events/progress.js';
import { QueueEventPublisher } from '../src/events/queue-publisher.js';
import { createRepositories } from '../src/repositories.js';
import { createDomainServices } from '../src/services.js';
import { createQueue, startWorker } from '../src/shared/queues.js';
import { connectRedis, createWorkerRedis } from '../src/shared/redis.js';
import type { RoleStarter } from './start.js';

/** The automations role: evaluates automation rules for every task event. */
export const startAutomations: RoleStarter = async ({ config, db, logger }) => {
  const connection = createWorkerRedis(config.REDIS_URL);
  // Events the actions cause are published like the API's: fast path, outbox as the safety net.
  const publishConnection = connectRedis(config.REDIS_URL, { enableOfflineQueue: false, maxRetriesPerRequest: 1 });
  publishConnection.on('error', () => {});
  const settings = { connection, prefix: config.QUEUE_PREFIX, lockMs: config.JOB_LOCK_MS, logger };
  const repos = createRepositories(db, { eventsRetentionDays: config.EVENTS_RETENTION_DAYS });
  const progress = new ConsumerProgress('automations', repos.events);
  const publisher = new QueueEventPublisher(
    db,
    { connection: publishConnection, prefix: config.QUEUE_PREFIX },
    logger,
    {
      eventStore: repos.events,
    },
  );
  const services = createDomainServices(db, repos, publisher);
  const deliveries = createQueue('deliveries', settings);

  const worker = startWorker(
    'automations',
    progress.track(async (job) => {
      const ran = await processAutomationEvent(job.data, {
        automations: repos.automations,
        tasks: services.tasks,
        items: services.items,
        enqueueDelivery: async (data, jobId) => void (await deliveries.add('delivery', data, { jobId })),
        logger: logger.child({ job_id: job.id, attempt: job.attemptsMade + 1 }),
      });
      return { ran };
    }),
    settings,
  );

  return {
    state: () => (worker.isRunning() ? 'running' : 'stopped'),
    async close() {
      await worker.close();
      await progress.close();
      await deliveries.close();
      await publisher.close();
      publishConnection.disconnect();
      connection.disconnect();
    },
  };
};
