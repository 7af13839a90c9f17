import { buildCompanyEvent } from '../contracts/company-events.js';
import { SYSTEM_ACTOR } from '../contracts/envelope.js';
import { toTaskResponse } from '../contracts/tasks.js';
import type { EventEnvelope } from '../contracts/envelope.js';
import type { OutboxCollection } from '../events/publisher.js';
import type { Logger } from '../shared/logger.js';
import type { TasksRepository } from './repository.js';

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
  /** Checked between batches: close() and a lost scan lock stop the scan at a batch boundary. */
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
