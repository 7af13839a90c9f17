import { buildCompanyEvent } from '../contracts/company-events.js';
import { SYSTEM_ACTOR } from '../contracts/envelope.js';
import { toTaskResponse } from '../contracts/tasks.js';
import { overdueScanDuration, overdueTasksFired } from '../shared/metrics.js';
import type { EventEnvelope } from '../contracts/envelope.js';
import type { OverdueTickJob } from '../contracts/jobs.js';
import type { Logger } from '../shared/logger.js';
import type { OutboxCollection } from '../shared/outbox.js';
import type { TasksRepository } from './repository.js';
import type { JobsOptions, Queue } from 'bullmq';

/** Tasks read (and held in memory) at a time; memory does not grow with the number of overdue tasks. */
export const OVERDUE_BATCH_SIZE = 500;

export interface OverdueScanDeps {
  tasks: TasksRepository;
  /**
   * QueueEventPublisher in production: moves the events to `events`, where the sequencer takes them;
   * a throw leaves them in the outbox for the relay.
   */
  publisher: {
    publishAndClear(
      collection: OutboxCollection,
      documents: Array<{ documentId: string; events: EventEnvelope[] }>,
    ): Promise<void>;
  };
  logger: Logger;
}

export interface OverdueScanOptions {
  batchSize?: number;
  /** Checked between batches: the worker's close() stops the scan at a batch boundary. */
  signal?: AbortSignal;
}

export interface OverdueScanResult {
  fired: number;
  batches: number;
  /** Events that could not be moved out of their tasks' outbox; they wait there for the relay. */
  unpublished: number;
}

/**
 * One overdue scan (DECISIONS.md section 9): fires task.overdue once per task and due time for
 * every open task due by `now`. Batch by batch: fired tasks leave the filter, so each batch re-reads
 * the front of the index, and a task lost to a concurrent PATCH is read again if it is still overdue.
 * The scan ends at an empty batch, or at one that fired nothing (its tasks belong to a concurrent scan).
 */
export async function scanOverdueTasks(
  deps: OverdueScanDeps,
  now: Date,
  options: OverdueScanOptions = {},
): Promise<OverdueScanResult> {
  const batchSize = options.batchSize ?? OVERDUE_BATCH_SIZE;
  const result: OverdueScanResult = { fired: 0, batches: 0, unpublished: 0 };
  while (!options.signal?.aborted) {
    const batch = await deps.tasks.overdueBatch(now, batchSize).toArray();
    if (batch.length === 0) break;
    result.batches++;
    const fired = await Promise.all(
      batch.map(async (task) => {
        const event = buildCompanyEvent('task.overdue', task.company_id, toTaskResponse(task), {
          actor: SYSTEM_ACTOR,
          occurredAt: now,
        });
        const fired: EventEnvelope | null = (await deps.tasks.markOverdueFired(task, event)) ? event : null;
        return { id: task._id, event: fired };
      }),
    );
    const toPublish = fired.filter((entry): entry is { id: string; event: EventEnvelope } => entry.event !== null);
    result.fired += toPublish.length;
    try {
      await deps.publisher.publishAndClear(
        'tasks',
        toPublish.map(({ id, event }) => ({ documentId: id, events: [event] })),
      );
    } catch (error) {
      if (result.unpublished === 0)
        deps.logger.warn({ err: error }, 'task.overdue events not published yet; the relay will deliver them');
      result.unpublished += toPublish.length;
    }
    if (toPublish.length === 0) break;
  }
  return result;
}

/**
 * A tick's job. Its id names the tick, and BullMQ ignores an add whose job id it still holds, so every
 * process adds the tick and one job results. That lasts only while the job exists, so finished tick
 * jobs are kept an hour (far more than the clock skew between processes or a late cron callback), then
 * removed. Not BullMQ's `deduplication` option: in its simple mode the id is free again once the job
 * finishes, so a process adding the tick after a quick scan would scan it twice. One attempt: the next
 * tick scans everything due anyway.
 */
export const OVERDUE_TICK_JOB_OPTIONS = {
  attempts: 1,
  removeOnComplete: { age: 3600 },
  removeOnFail: { age: 3600 },
} satisfies JobsOptions;

/** `tick-<epoch seconds>`: every process's cron fires the same tick time. */
export function overdueTickJobId(tick: Date): string {
  return `tick-${Math.floor(tick.getTime() / 1000)}`;
}

/**
 * Adds a cron tick's scan to the `overdue` queue, once across processes. The queue's global
 * concurrency of 1 keeps two scans from overlapping across processes; it is set again at every tick
 * (one HSET), so a Redis that lost its data has it before the tick's job can run.
 */
export async function enqueueOverdueTick(
  queue: Pick<Queue<OverdueTickJob, unknown, string>, 'add' | 'setGlobalConcurrency'>,
  tick: Date,
): Promise<void> {
  await queue.setGlobalConcurrency(1);
  await queue.add('tick', { tick: tick.toISOString() }, { ...OVERDUE_TICK_JOB_OPTIONS, jobId: overdueTickJobId(tick) });
}

/**
 * The `overdue` queue's processor: one scan for one tick, timed and counted. A failure fails the job
 * (one attempt) and the next tick scans again.
 */
export async function processOverdueTick(
  deps: OverdueScanDeps,
  job: OverdueTickJob,
  signal?: AbortSignal,
): Promise<OverdueScanResult> {
  const started = performance.now();
  try {
    const result = await scanOverdueTasks(deps, new Date(), { signal });
    const stats = { tick: job.tick, ...result, duration_ms: Math.round(performance.now() - started) };
    overdueScanDuration.observe(stats.duration_ms / 1000);
    overdueTasksFired.inc(result.fired);
    if (result.fired > 0) deps.logger.info(stats, 'overdue scan fired task.overdue');
    else deps.logger.debug(stats, 'overdue scan found nothing due');
    return result;
  } catch (error) {
    deps.logger.error({ err: error, tick: job.tick }, 'overdue scan failed; the next tick retries');
    throw error;
  }
}
