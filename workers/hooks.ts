import { DelayedError, UnrecoverableError } from 'bullmq';
import { deliverWebhook, type DeliveryDeps } from '../src/hooks/delivery.js';
import { fanOutEvent } from '../src/hooks/fanout.js';
import { WebhookSender } from '../src/hooks/sender.js';
import { TargetGuard } from '../src/hooks/target-guard.js';
import { createRepositories } from '../src/repositories.js';
import { createQueue, startWorker } from '../src/shared/queues.js';
import { createWorkerRedis } from '../src/shared/redis.js';
import type { RoleStarter } from './start.js';

/**
 * The hooks role: `hook-fanout` turns each event into one delivery job per matching hook, and
 * `deliveries` sends them (REST hooks and automation webhooks alike) over one keep-alive agent.
 */
export const startHooks: RoleStarter = async ({ config, db, logger, resolver }) => {
  const connection = createWorkerRedis(config.REDIS_URL);
  const settings = { connection, prefix: config.QUEUE_PREFIX, lockMs: config.JOB_LOCK_MS, logger };
  const repos = createRepositories(db);
  const deliveries = createQueue('deliveries', settings);
  const sender = new WebhookSender(new TargetGuard(config.HOOK_ALLOW_PRIVATE_TARGETS, resolver), config.HOOK_TIMEOUT_MS);
  const deliveryDeps: DeliveryDeps = {
    hooks: repos.hooks,
    deliveries: repos.deliveries,
    secrets: repos.webhookSecrets,
    send: (webhook) => sender.send(webhook),
    maxAttempts: config.HOOK_MAX_ATTEMPTS,
    backoffMs: config.HOOK_BACKOFF_MS,
    logger,
  };

  const fanOut = startWorker('hook-fanout', async (job) => {
    const hooks = await fanOutEvent(job.data, {
      hooks: repos.hooks,
      enqueueDeliveries: async (jobs) => void (await deliveries.addBulk(jobs.map(({ data, jobId }) => ({ name: 'delivery', data, opts: { jobId } })))),
    });
    return { hooks };
  }, settings);

  const delivering = startWorker('deliveries', async (job, token?: string) => {
    // attemptsStarted counts every run of this job, including one cut short by a crash.
    const log = logger.child({ queue: 'deliveries', job_id: job.id });
    const result = await deliverWebhook(job.data, { jobId: job.id!, attempt: job.attemptsStarted }, { ...deliveryDeps, logger: log });
    if (result.outcome === 'retry') {
      // Retries follow our schedule (backoff with jitter, Retry-After), not the job's retry options,
      // which differ between fan-out and automation jobs: park the job and tell BullMQ so.
      await job.moveToDelayed(Date.now() + result.delayMs, token);
      throw new DelayedError();
    }
    // Given up: the job lands in the failed set (visible to operators); the attempts stay listed.
    if (result.outcome === 'gave_up') throw new UnrecoverableError(result.reason);
    return result;
  }, settings);

  return {
    async close() {
      await Promise.all([fanOut.close(), delivering.close()]);
      await deliveries.close();
      await sender.close();
      connection.disconnect();
    },
  };
};
