import { runErasure } from '../src/erasure/job.js';
import { startWorker } from '../src/shared/queues.js';
import { createWorkerRedis } from '../src/shared/redis.js';
import type { RoleStarter } from './role.js';

/** The most an erasure waits for the sequencer before its second pass (docs/erasure.md). */
const SETTLE_MS = 30_000;
/** How often the role queues again erasures whose job Redis may have lost, and how old they must be. */
const SWEEP_INTERVAL_MS = 60_000;

/**
 * The erasures role: runs erasure jobs (src/erasure/job.ts), one at a time per process, and every minute queues
 * again the erasures MongoDB says are unfinished (a job lost with Redis, or one the request could not queue).
 */
export const startErasures: RoleStarter = async ({ config, logger, container }) => {
  const connection = createWorkerRedis(config.REDIS_URL);
  connection.on('error', () => {});
  const repos = container.repos;
  const worker = startWorker(
    'erasures',
    async (job) =>
      runErasure(
        { repos, queues: container.queues, logger, settleMs: SETTLE_MS },
        job.data.company_id,
        job.data.erasure_id,
      ),
    { connection, prefix: config.QUEUE_PREFIX, lockMs: Math.max(config.JOB_LOCK_MS, SETTLE_MS + 30_000), logger },
    { concurrency: 1 },
  );
  worker.on('error', () => {});
  const sweep = setInterval(() => {
    void (async () => {
      const stale = await repos.erasures.unfinished(new Date(Date.now() - SWEEP_INTERVAL_MS), 100);
      for (const erasure of stale) {
        const data = { erasure_id: erasure._id, company_id: erasure.company_id };
        // A job id BullMQ still holds (waiting, running, kept as done) is not added again.
        await container.queues.erasures.add('erasure', data, { jobId: erasure._id });
      }
    })().catch((error: unknown) => logger.warn({ err: error }, 'erasure sweep failed; the next one retries'));
  }, SWEEP_INTERVAL_MS);
  sweep.unref();
  return {
    async close() {
      clearInterval(sweep);
      await worker.close();
      connection.disconnect();
    },
  };
};
