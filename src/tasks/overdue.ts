import { buildEvent, type EventEnvelope } from '../events/envelope.js';
import { outboxOnUpdate } from '../events/outbox.js';
import { LIVE_TASK, type TaskDoc, type TasksRepository } from './repository.js';
import { toTaskResponse } from './schemas.js';
import type { OutboxCollection } from '../events/publisher.js';
import type { Logger } from '../shared/logger.js';
import type { Collection, Filter, FindCursor } from 'mongodb';

/** Tasks read (and held in memory) at a time; memory does not grow with the number of overdue tasks. */
export const OVERDUE_BATCH_SIZE = 500;
/** Due times remembered per task as already fired for (a task's due time rarely moves more often). */
const FIRED_DUES_KEPT = 20;
/** Declared with the other task indexes in TasksRepository.ensureIndexes. */
export const OVERDUE_SCAN_INDEX = 'overdue_scan';

export interface OverdueScanDeps {
  tasks: TasksRepository;
  /**
   * QueueEventPublisher in production: false when the queues did not take the events (they wait in
   * `events` for the relay); a throw leaves them in the outbox for the relay.
   */
  publisher: {
    publishAndClear(
      collection: OutboxCollection,
      documents: Array<{ documentId: string; events: EventEnvelope[] }>,
    ): Promise<boolean | void>;
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
  /** Events the queues did not take; they wait in the tasks' outbox for the relay. */
  unpublished: number;
}

/** Open live tasks due by `now` that have not fired for their due time (archiving also sets overdue_fired_for). */
function overdueFilter(now: Date): Filter<TaskDoc> {
  return { is_completed: false, overdue_fired_for: null, due_at: { $lte: now }, ...LIVE_TASK };
}

/** One batch's query; hinted so it can never become a collection scan (bench/overdue.ts prints its plan). */
export function overdueBatchQuery(collection: Collection<TaskDoc>, now: Date, limit: number): FindCursor<TaskDoc> {
  return collection
    .find(overdueFilter(now), { projection: { pending_events: 0 } })
    .sort({ due_at: 1 })
    .hint(OVERDUE_SCAN_INDEX)
    .limit(limit);
}

/**
 * Marks one task as fired for its due time and records task.overdue in the same single-document
 * write, conditional on the revision that was read (and, spelled out, on still being open, unfired
 * and due then): of two overlapping scans, or a scan racing a PATCH, only one write can match.
 * The revision bump makes a concurrent PATCH re-read and retry; updated_at is untouched because
 * nothing in the task's API shape changed. Returns the event when this call fired it.
 */
async function fireOverdue(collection: Collection<TaskDoc>, task: TaskDoc, now: Date): Promise<EventEnvelope | null> {
  const event = buildEvent('task.overdue', task.company_id, toTaskResponse(task), { occurredAt: now });
  const outbox = outboxOnUpdate([event]);
  const result = await collection.updateOne(
    {
      _id: task._id,
      company_id: task.company_id,
      revision: task.revision,
      is_completed: false,
      overdue_fired_for: null,
      due_at: task.due_at,
      ...LIVE_TASK,
    },
    {
      $set: { overdue_fired_for: task.due_at, ...outbox.$set },
      $inc: { revision: 1, ...outbox.$inc },
      $push: { ...outbox.$push, overdue_fired_dues: { $each: [task.due_at], $slice: -FIRED_DUES_KEPT } } as never,
    },
  );
  return result.modifiedCount === 1 ? event : null;
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
    const batch = await overdueBatchQuery(deps.tasks.collection, now, batchSize).toArray();
    if (batch.length === 0) break;
    result.batches++;
    const fired = await Promise.all(
      batch.map(async (task) => ({ id: task._id, event: await fireOverdue(deps.tasks.collection, task, now) })),
    );
    const toPublish = fired.filter((entry): entry is { id: string; event: EventEnvelope } => entry.event !== null);
    result.fired += toPublish.length;
    try {
      const queued = await deps.publisher.publishAndClear(
        'tasks',
        toPublish.map(({ id, event }) => ({ documentId: id, events: [event] })),
      );
      if (queued === false) throw new Error('the queues did not take the events');
    } catch (error) {
      if (result.unpublished === 0)
        deps.logger.warn({ err: error }, 'task.overdue events not published yet; the relay will deliver them');
      result.unpublished += toPublish.length;
    }
    if (toPublish.length === 0) break;
  }
  return result;
}
