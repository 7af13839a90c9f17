import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { DelayedError, UnrecoverableError, type Job, type Queue } from 'bullmq';
import { isEventBatch } from '../contracts/jobs.js';
import { Coalescer, WORKER_RECORD_INTERVAL_MS } from '../shared/coalesce.js';
import { withoutRedaction } from '../shared/logger.js';
import { observeDeliveryAttempt } from '../shared/metrics.js';
import { hookDeliveryKey, type AttemptRecord, type DeliveriesRepository } from './deliveries.repository.js';
import { deliveryRun, retryPolicyFrom } from './delivery-policy.js';
import { deliverWebhook, type DeliveryDeps, type DeliveryOutcome } from './delivery.js';
import { claimFanOut } from './fanout-claim.js';
import { fanOutEvent } from './fanout.js';
import { HookLanes } from './lanes.js';
import { RECOVERY_WINDOW_PER_IN_FLIGHT, RecoveryRunner, type RecordedEvents } from './recovery.js';
import { WebhookSender } from './sender.js';
import type { EventEnvelope, EventRef } from '../contracts/envelope.js';
import type { DeliveryJob, EventJobData } from '../contracts/jobs.js';
import type { Config } from '../shared/config.js';
import type { Logger } from '../shared/logger.js';
import type { RedisClient } from '../shared/redis.js';
import type { TargetGuard } from '../shared/target-guard.js';
import type { RecoveriesRepository } from './recoveries.repository.js';
import type { HooksRepository } from './repository.js';
import type { WebhookSecretsRepository } from './webhook-secrets.repository.js';

export interface HookProcessorDeps {
  config: Pick<
    Config,
    | 'QUEUE_PREFIX'
    | 'JOB_LOCK_MS'
    | 'HOOK_TIMEOUT_MS'
    | 'HOOK_CONCURRENCY'
    | 'HOOK_MAX_IN_FLIGHT_PER_HOOK'
    | 'HOOK_MAX_ATTEMPTS'
    | 'HOOK_BACKOFF_MS'
    | 'HOOK_RETRY_SCHEDULE'
  >;
  hooks: HooksRepository;
  deliveries: DeliveriesRepository;
  recoveries: RecoveriesRepository;
  webhookSecrets: WebhookSecretsRepository;
  /** The events feature's store: a recovery's events. */
  events: Pick<RecordedEvents, 'recoveryPage'>;
  /** Whether a publisher's own fan-out job of this event exists (the events feature tracks which job carried it). */
  publisherJobExists(event: EventRef): Promise<boolean>;
  deliveriesQueue: Queue<DeliveryJob, unknown, string>;
  targetGuard: TargetGuard;
  /** The worker's own Redis connection (fan-out claims). */
  redis: RedisClient;
  logger: Logger;
}

/**
 * The hooks worker's processors, plain functions over their dependencies (workers/hooks.ts hands them to
 * BullMQ): the fan-out of an event to its hooks with each one's first attempt, the `deliveries` lane's runs
 * (retries, redeliveries, recoveries, automation webhooks), and the hook recoveries' runner. Every rule of
 * what follows an attempt is in delivery-policy.ts; this only carries it out on the queue.
 */
export function createHookProcessors(deps: HookProcessorDeps) {
  const { config, deliveriesQueue } = deps;
  const sender = new WebhookSender(deps.targetGuard, config.HOOK_TIMEOUT_MS);
  // One bulk write for the attempts made together (under load, those of each WORKER_RECORD_INTERVAL_MS).
  const attempts = new Coalescer<AttemptRecord>((records) => deps.deliveries.recordAttempts(records), {
    minIntervalMs: WORKER_RECORD_INTERVAL_MS,
  });
  const deliveryDeps: DeliveryDeps = {
    hooks: deps.hooks,
    deliveries: {
      recordAttempt: (record) => {
        observeDeliveryAttempt(record.attempt, record.event.occurred_at);
        return attempts.add(record);
      },
      deleteForHook: (companyId, hookId) => deps.deliveries.deleteForHook(companyId, hookId),
    },
    secrets: deps.webhookSecrets,
    send: (webhook) => sender.send(webhook),
    retry: retryPolicyFrom(config),
    // A delivery's lines hold ids, status, error category and the target's origin: never a secret.
    logger: withoutRedaction(deps.logger),
  };
  const lanes = new HookLanes({
    maxInFlight: config.HOOK_MAX_IN_FLIGHT_PER_HOOK,
    concurrency: config.HOOK_CONCURRENCY,
    timeoutMs: config.HOOK_TIMEOUT_MS,
  });
  const claimDeps = {
    redis: deps.redis,
    prefix: config.QUEUE_PREFIX,
    publisherJobExists: (event: EventRef) => deps.publisherJobExists(event),
  };

  /** To the deliveries lane, recorded first in MongoDB so that it survives Redis losing the job. */
  const handOff = async (hookId: string, data: DeliveryJob, jobId: string) => {
    await deps.deliveries.recordScheduled({
      key: hookDeliveryKey(hookId, data.event.event_id),
      target: { hook_id: hookId, automation_id: null },
      event: data.event,
      job: { ...data, id: jobId },
    });
    await deliveriesQueue.add('delivery', data, { jobId });
  };

  /** One event of a `hook-fanout` job: the first attempt to each matching hook (the events feature tracks progress). */
  async function fanOut(event: EventEnvelope, job: Job<EventJobData>, alongside: (write: Promise<void>) => void) {
    const hooks = await fanOutEvent(event, {
      hooks: deps.hooks,
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
          await deliveriesQueue.add('delivery', { ...data, attempts_before: 1 }, { jobId, delay: result.delayMs });
      },
    });
    return { hooks };
  }

  /** One run of a `deliveries` job. */
  async function deliver(job: Job<DeliveryJob>, token?: string) {
    const { target, event } = job.data;
    const run = deliveryRun(job.id!, job.data, job.attemptsStarted);
    const recovering = run.recovering;
    // What succeeded (through another job: a recovery, a redelivery) is not sent again (DECISIONS.md 13.2).
    if (target.kind === 'hook' && run.checkDeliveredFirst) {
      const key = hookDeliveryKey(target.hook_id, event.event_id);
      if (await deps.deliveries.succeeded(event.company_id, key)) {
        if (recovering) await deps.deliveries.attemptSkipped(event.company_id, key, 'succeeded');
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
    const log = deliveryDeps.logger.child({ queue: 'deliveries', job_id: job.id });
    let result: DeliveryOutcome | undefined;
    try {
      result = await deliverWebhook(
        job.data,
        { jobId: job.id!, attempt: run.attempt, answered: (delivered) => permit?.done(delivered) },
        { ...deliveryDeps, logger: log },
      );
    } finally {
      permit?.done(result?.outcome === 'delivered');
    }
    if (result.outcome === 'retry') {
      // The policy's delay, not the job's retry options: park the job until then and tell BullMQ so.
      await job.moveToDelayed(Date.now() + result.delayMs, token);
      throw new DelayedError();
    }
    // A recovery waits for each of its deliveries' attempt: one not made (the hook disabled) must say so.
    if (result.outcome === 'skipped' && recovering && target.kind === 'hook')
      await deps.deliveries.attemptSkipped(event.company_id, hookDeliveryKey(target.hook_id, event.event_id), 'failed');
    // Given up: the job lands in the failed set (visible to operators); the attempts stay listed.
    if (result.outcome === 'gave_up') throw new UnrecoverableError(result.reason);
    return result;
  }

  // Hook recoveries (DECISIONS.md 13.2): their state is in MongoDB; this process drives those it takes.
  const recoveries = new RecoveryRunner({
    hooks: deps.hooks,
    events: deps.events,
    deliveries: deps.deliveries,
    recoveries: deps.recoveries,
    hookById: (companyId, hookId) => deps.hooks.findById(companyId, hookId),
    enqueue: async (jobs) =>
      void (await deliveriesQueue.addBulk(
        jobs.map(({ data, jobId }) => ({ name: 'delivery', data, opts: { jobId } })),
      )),
    // Four times what may be in flight to one hook: its lane is kept busy while the next ones are handed
    // over, and the queue holds no more of it (the lanes' in-flight limit still holds at the receiver).
    window: RECOVERY_WINDOW_PER_IN_FLIGHT * config.HOOK_MAX_IN_FLIGHT_PER_HOOK,
    leaseMs: config.JOB_LOCK_MS,
    pollMs: 25,
    claimEveryMs: 500,
    maxConcurrent: 4,
    holder: `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`,
    logger: deps.logger,
  });

  return {
    fanOut,
    deliver,
    recoveries,
    /** After the workers stopped: the last attempts' records, then the agent's sockets. */
    async close() {
      await recoveries.close();
      await attempts.close();
      await sender.close();
    },
  };
}

export type HookProcessors = ReturnType<typeof createHookProcessors>;
