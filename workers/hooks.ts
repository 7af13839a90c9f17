import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { DelayedError, UnrecoverableError } from 'bullmq';
import { isEventBatch } from '../src/contracts/jobs.js';
import { ConsumerProgress, WORKER_RECORD_INTERVAL_MS } from '../src/events/progress.js';
import { hookDeliveryKey, type AttemptRecord } from '../src/hooks/deliveries.repository.js';
import { deliverWebhook, type DeliveryDeps, type DeliveryOutcome } from '../src/hooks/delivery.js';
import { claimFanOut, type FanOutClaimDeps } from '../src/hooks/fanout-claim.js';
import { fanOutEvent } from '../src/hooks/fanout.js';
import { HookLanes } from '../src/hooks/lanes.js';
import { isRecoveryJob, RECOVERY_WINDOW_PER_IN_FLIGHT, RecoveryRunner } from '../src/hooks/recovery.js';
import { retryPolicyFrom } from '../src/hooks/retry-policy.js';
import { WebhookSender } from '../src/hooks/sender.js';
import { Coalescer } from '../src/shared/coalesce.js';
import { withoutRedaction } from '../src/shared/logger.js';
import { observeDeliveryAttempt } from '../src/shared/metrics.js';
import { jobStillQueued, startWorker } from '../src/shared/queues.js';
import { createWorkerRedis } from '../src/shared/redis.js';
import type { DeliveryJob } from '../src/contracts/jobs.js';
import type { RoleStarter } from './role.js';

/**
 * The hooks role: `hook-fanout` makes each event's first attempt to every matching hook, and
 * `deliveries` runs the retries, redeliveries and automation webhooks; all over one keep-alive agent.
 */
export const startHooks: RoleStarter = async ({ config, logger, container }) => {
  const { repos, queues } = container;
  const connection = createWorkerRedis(config.REDIS_URL);
  const settings = { connection, prefix: config.QUEUE_PREFIX, lockMs: config.JOB_LOCK_MS, logger };
  const fanOutJobQueued = (jobId: string) => jobStillQueued(queues['hook-fanout'], jobId);
  // One event in flight per HOOK_CONCURRENCY slot, however many events each fan-out job carries.
  const progress = new ConsumerProgress('hook-fanout', repos.events, {
    concurrency: config.HOOK_CONCURRENCY,
    jobExists: fanOutJobQueued,
  });
  const deliveries = queues.deliveries;
  const claimDeps: FanOutClaimDeps = {
    redis: connection,
    prefix: config.QUEUE_PREFIX,
    publisherJobExists: async (event) => {
      if (await fanOutJobQueued(event.event_id)) return true;
      const { publishJob } = await repos.events.progressOf('hook-fanout', event);
      return publishJob !== undefined && (await fanOutJobQueued(publishJob));
    },
  };
  const sender = new WebhookSender(container.services.targetGuard, config.HOOK_TIMEOUT_MS);
  // One bulk write for the attempts made together (under load, those of each WORKER_RECORD_INTERVAL_MS).
  const attempts = new Coalescer<AttemptRecord>((records) => repos.deliveries.recordAttempts(records), {
    minIntervalMs: WORKER_RECORD_INTERVAL_MS,
  });
  const deliveryDeps: DeliveryDeps = {
    hooks: repos.hooks,
    deliveries: {
      recordAttempt: (record) => {
        observeDeliveryAttempt(record.attempt, record.event.occurred_at);
        return attempts.add(record);
      },
      deleteForHook: (companyId, hookId) => repos.deliveries.deleteForHook(companyId, hookId),
    },
    secrets: repos.webhookSecrets,
    send: (webhook) => sender.send(webhook),
    retry: retryPolicyFrom(config),
    // A delivery's lines hold ids, status, error category and the target's origin: never a secret.
    logger: withoutRedaction(logger),
  };

  const lanes = new HookLanes({
    maxInFlight: config.HOOK_MAX_IN_FLIGHT_PER_HOOK,
    concurrency: config.HOOK_CONCURRENCY,
    timeoutMs: config.HOOK_TIMEOUT_MS,
  });
  /** To the deliveries lane, recorded first in MongoDB so that it survives Redis losing the job. */
  const handOff = async (hookId: string, data: DeliveryJob, jobId: string) => {
    await repos.deliveries.recordScheduled({
      key: hookDeliveryKey(hookId, data.event.event_id),
      target: { hook_id: hookId, automation_id: null },
      event: data.event,
      job: { ...data, id: jobId },
    });
    await deliveries.add('delivery', data, { jobId });
  };

  const fanOut = startWorker(
    'hook-fanout',
    progress.track(async (event, job, alongside) => {
      const hooks = await fanOutEvent(event, {
        hooks: repos.hooks,
        // A move's batch is the publisher's own job of each of its events (see claimFanOut).
        claim: (claimed) => (isEventBatch(job.data) ? Promise.resolve(true) : claimFanOut(claimDeps, claimed, job.id!)),
        deliver: async (hook, data, jobId) => {
          // A slow or failing receiver is served by the deliveries lane only, and a hook gets a share
          // of the fan-out's slots, so none can hold up the fan-out (and every other hook's delivery).
          const permit = lanes.isSlowOrFailing(hook) ? undefined : await lanes.enterFanOut(hook._id);
          if (!permit) return handOff(hook._id, data, jobId);
          let result: DeliveryOutcome | undefined;
          try {
            result = await deliverWebhook(
              data,
              // The attempt's record is awaited with the event's progress record (one batch write's wait).
              { jobId, attempt: 1, hook, answered: (delivered) => permit.done(delivered), alongside },
              deliveryDeps,
            );
          } finally {
            permit.done(result?.outcome === 'delivered');
          }
          // The retries are a delivery job of their own; the job id makes a re-run fan-out add it once.
          if (result.outcome === 'retry')
            await deliveries.add('delivery', { ...data, attempts_before: 1 }, { jobId, delay: result.delayMs });
        },
      });
      return { hooks };
    }),
    settings,
    { concurrency: config.HOOK_CONCURRENCY },
  );

  const delivering = startWorker(
    'deliveries',
    async (job, token?: string) => {
      const { target, event } = job.data;
      const recovering = isRecoveryJob(job.id!);
      // A recovery's delivery, or a retry, of a delivery that has succeeded since (through another job: a
      // recovery, a redelivery) sends nothing: what succeeded is not sent again (DECISIONS.md 13.2).
      const retry = (job.data.attempts_before ?? 0) + job.attemptsStarted - (job.data.deferrals ?? 0) > 1;
      if (target.kind === 'hook' && (recovering || (retry && !job.id!.includes(':redeliver-')))) {
        const key = hookDeliveryKey(target.hook_id, event.event_id);
        if (await repos.deliveries.succeeded(event.company_id, key)) {
          if (recovering) await repos.deliveries.attemptSkipped(event.company_id, key, 'succeeded');
          return { outcome: 'skipped', reason: 'delivered already' };
        }
      }
      const permit = target.kind === 'hook' ? await lanes.enterLane(target.hook_id) : undefined;
      if (target.kind === 'hook' && !permit) {
        // The hook has its limit in flight: try again a little later, without counting an attempt.
        const deferrals = job.data.deferrals ?? 0;
        await job.updateData({ ...job.data, deferrals: deferrals + 1 });
        await job.moveToDelayed(Date.now() + lanes.retryLaterMs(deferrals), token);
        throw new DelayedError();
      }
      // attemptsStarted counts every run of this job, including one cut short by a crash.
      const log = deliveryDeps.logger.child({ queue: 'deliveries', job_id: job.id });
      const attempt = (job.data.attempts_before ?? 0) + job.attemptsStarted - (job.data.deferrals ?? 0);
      let result: DeliveryOutcome | undefined;
      try {
        result = await deliverWebhook(
          job.data,
          { jobId: job.id!, attempt, answered: (delivered) => permit?.done(delivered) },
          { ...deliveryDeps, logger: log },
        );
      } finally {
        permit?.done(result?.outcome === 'delivered');
      }
      if (result.outcome === 'retry') {
        // Retries follow our schedule (backoff with jitter, Retry-After), not the job's retry options,
        // which differ between fan-out and automation jobs: park the job and tell BullMQ so.
        await job.moveToDelayed(Date.now() + result.delayMs, token);
        throw new DelayedError();
      }
      // A recovery waits for each of its deliveries' attempt: one not made (the hook disabled) must say so.
      if (result.outcome === 'skipped' && recovering && target.kind === 'hook')
        await repos.deliveries.attemptSkipped(
          event.company_id,
          hookDeliveryKey(target.hook_id, event.event_id),
          'failed',
        );
      // Given up: the job lands in the failed set (visible to operators); the attempts stay listed.
      if (result.outcome === 'gave_up') throw new UnrecoverableError(result.reason);
      return result;
    },
    settings,
    { concurrency: config.HOOK_CONCURRENCY },
  );

  // Hook recoveries (DECISIONS.md 13.2): their state is in MongoDB; this process drives those it takes.
  const recoveries = new RecoveryRunner({
    hooks: repos.hooks,
    events: repos.events,
    deliveries: repos.deliveries,
    recoveries: repos.recoveries,
    hookById: (companyId, hookId) => repos.hooks.findById(companyId, hookId),
    enqueue: async (jobs) =>
      void (await deliveries.addBulk(jobs.map(({ data, jobId }) => ({ name: 'delivery', data, opts: { jobId } })))),
    // Four times what may be in flight to one hook: its lane is kept busy while the next ones are handed
    // over, and the queue holds no more of it (the lanes' in-flight limit still holds at the receiver).
    window: RECOVERY_WINDOW_PER_IN_FLIGHT * config.HOOK_MAX_IN_FLIGHT_PER_HOOK,
    leaseMs: config.JOB_LOCK_MS,
    pollMs: 25,
    claimEveryMs: 500,
    maxConcurrent: 4,
    holder: `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`,
    logger,
  });
  recoveries.start();

  return {
    state: () => (fanOut.isRunning() && delivering.isRunning() ? 'running' : 'stopped'),
    async close() {
      await recoveries.close();
      await Promise.all([fanOut.close(), delivering.close()]);
      await Promise.all([attempts.close(), progress.close()]);
      await sender.close();
      connection.disconnect();
    },
  };
};
