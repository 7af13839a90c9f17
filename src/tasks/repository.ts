import { type DeclaredIndex, ensureCollectionIndexes } from '../shared/indexes.js';
import { OUTBOX_INDEX, outboxOnUpdate, updateWithEvents, type OutboxOverflow } from '../shared/outbox.js';
import { afterCursor, mongoSort, type SortSpec } from '../shared/pagination.js';
import type { EventEnvelope } from '../contracts/envelope.js';
import type { TaskDoc } from '../contracts/tasks.js';
import type { Collection, Db, Filter, FindCursor } from 'mongodb';

/** Matches live tasks: archived_at null or absent (tasks written before archiving existed have none). */
export const LIVE_TASK = { archived_at: null };

/** The fields a PATCH may write (completed_at follows is_completed; overdue_fired_for is reset by a due_at change). */
export type TaskChanges = Partial<
  Pick<
    TaskDoc,
    | 'title'
    | 'due_at'
    | 'assigned_to'
    | 'description'
    | 'priority'
    | 'task_type'
    | 'item_id'
    | 'duration_minutes'
    | 'reminder_minutes'
    | 'notes'
    | 'is_completed'
    | 'completed_at'
    | 'overdue_fired_for'
  >
>;

export interface TaskListFilter {
  is_completed?: boolean;
  assigned_to?: string;
  item_id?: string;
  due_before?: Date;
  due_after?: Date;
  updated_after?: Date;
  task_type?: TaskDoc['task_type'];
  priority?: TaskDoc['priority'];
  /** Open and past due at `now` (true), or the complement (false). */
  overdue?: { value: boolean; now: Date };
}

const EQUALITY_FILTERS = ['is_completed', 'assigned_to', 'item_id', 'task_type', 'priority'] as const;

/** Tasks to the overdue scanner: open, live, due, not fired for their due time (see overdueBatch). */
const OVERDUE_SCAN_INDEX = 'overdue_scan';
/** Due times remembered per task as already fired for (a task's due time rarely moves more often). */
const FIRED_DUES_KEPT = 20;

export class TasksRepository {
  private readonly collection: Collection<TaskDoc>;

  /** Where a too-full outbox is moved (see updateWithEvents). */
  private readonly eventStore: OutboxOverflow;

  /** `eventStore`: where a full outbox's events go first (the events repository). */
  constructor(db: Db, eventStore: OutboxOverflow) {
    this.eventStore = eventStore;
    this.collection = db.collection<TaskDoc>('tasks');
  }

  /** List indexes end in _id for keyset ties; the last one serves the overdue scanner. */
  static async ensureIndexes(db: Db): Promise<string[]> {
    const indexes: DeclaredIndex[] = [
      { key: { company_id: 1, due_at: 1, _id: 1 }, name: 'list_due_at' },
      { key: { company_id: 1, created_at: 1, _id: 1 }, name: 'list_created_at' },
      { key: { company_id: 1, assigned_to: 1, due_at: 1, _id: 1 }, name: 'list_assigned_to_due_at' },
      { key: { company_id: 1, item_id: 1, due_at: 1, _id: 1 }, name: 'list_item_id_due_at' },
      { key: { company_id: 1, is_completed: 1, due_at: 1, _id: 1 }, name: 'list_is_completed_due_at' },
      { key: { company_id: 1, updated_at: 1, _id: 1 }, name: 'list_updated_at' },
      { ...OUTBOX_INDEX },
      { key: { is_completed: 1, overdue_fired_for: 1, due_at: 1 }, name: OVERDUE_SCAN_INDEX },
    ];
    // None is unique: each may be rebuilt at start when its declaration changes.
    return ensureCollectionIndexes(
      db,
      'tasks',
      indexes.map((index) => ({ ...index, migratable: true })),
    );
  }

  async insert(doc: TaskDoc): Promise<void> {
    await this.collection.insertOne(doc);
  }

  /**
   * Every live task of the company for an export, in creation order (list_created_at: a task never moves in it,
   * unlike in due_at order, so a write during the read neither skips nor repeats one).
   */
  exportCursor(companyId: string, batchSize: number) {
    return this.collection
      .find({ company_id: companyId, ...LIVE_TASK }, { projection: { pending_events: 0 } })
      .sort({ created_at: 1, _id: 1 })
      .hint('list_created_at')
      .batchSize(batchSize);
  }

  /** Erasure (docs/erasure.md): the task's document, archived or not, its outbox with it. */
  async erase(companyId: string, taskId: string): Promise<void> {
    await this.collection.deleteOne({ company_id: companyId, _id: taskId });
  }

  /** Whether the company has or had the task (archived counts): its history stays readable. */
  async existsEver(companyId: string, taskId: string): Promise<boolean> {
    return (await this.collection.findOne({ company_id: companyId, _id: taskId }, { projection: { _id: 1 } })) !== null;
  }

  findById(companyId: string, taskId: string): Promise<TaskDoc | null> {
    return this.collection.findOne(
      { company_id: companyId, _id: taskId, ...LIVE_TASK },
      { projection: { pending_events: 0 } },
    );
  }

  /**
   * Archives the task at the revision that was read, with its task.deleted event in the same write.
   * Marking it fired for its due time takes it out of the overdue scanner's index range for good.
   */
  archive(companyId: string, task: TaskDoc, at: Date, events: EventEnvelope[]): Promise<TaskDoc | null> {
    return updateWithEvents(
      this.collection,
      { company_id: companyId, _id: task._id, ...LIVE_TASK },
      { field: 'revision', expected: task.revision },
      { archived_at: at, overdue_fired_for: task.overdue_fired_for ?? task.due_at },
      events,
      this.eventStore,
    );
  }

  /**
   * The one write path of an update: matches only while the task still has the revision the caller
   * read, so a concurrent writer makes it return null instead of being overwritten. Events ride along.
   */
  updateIfRevision(
    companyId: string,
    taskId: string,
    expectedRevision: number,
    changes: TaskChanges,
    updatedAt: Date,
    events: EventEnvelope[],
  ): Promise<TaskDoc | null> {
    return updateWithEvents(
      this.collection,
      { company_id: companyId, _id: taskId, ...LIVE_TASK },
      { field: 'revision', expected: expectedRevision },
      { ...changes, updated_at: updatedAt },
      events,
      this.eventStore,
    );
  }

  /**
   * One batch of the overdue scan (across companies): open live tasks due by `now` that have not fired
   * for their due time, earliest first; hinted so it can never become a collection scan (bench/overdue.ts
   * prints its plan). Archiving also sets overdue_fired_for, so archived tasks are never in range.
   */
  overdueBatch(now: Date, limit: number): FindCursor<TaskDoc> {
    return this.collection
      .find(
        { is_completed: false, overdue_fired_for: null, due_at: { $lte: now }, ...LIVE_TASK },
        { projection: { pending_events: 0 } },
      )
      .sort({ due_at: 1 })
      .hint(OVERDUE_SCAN_INDEX)
      .limit(limit);
  }

  /**
   * Marks one task as fired for its due time and records its task.overdue in the same single-document
   * write, conditional on the revision that was read (and, spelled out, on still being open, unfired
   * and due then): of two overlapping scans, or a scan racing a PATCH, only one write can match.
   * The revision bump makes a concurrent PATCH re-read and retry; updated_at is untouched because
   * nothing in the task's API shape changed. True when this call fired it.
   */
  async markOverdueFired(task: TaskDoc, event: EventEnvelope): Promise<boolean> {
    const outbox = outboxOnUpdate([event]);
    const result = await this.collection.updateOne(
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
    return result.modifiedCount === 1;
  }

  list(
    companyId: string,
    filter: TaskListFilter,
    sort: SortSpec,
    limit: number,
    cursor?: { value: number; id: string },
  ): FindCursor<TaskDoc> {
    const query: Filter<TaskDoc> = { company_id: companyId, ...LIVE_TASK };
    for (const field of EQUALITY_FILTERS) if (filter[field] !== undefined) query[field] = filter[field] as never;
    const dueAt: Record<string, Date> = {};
    if (filter.due_before) dueAt.$lt = filter.due_before;
    if (filter.due_after) dueAt.$gt = filter.due_after;
    if (filter.updated_after) query.updated_at = { $gt: filter.updated_after };
    const clauses: Filter<TaskDoc>[] = [query];
    if (Object.keys(dueAt).length > 0) clauses.push({ due_at: dueAt });
    if (filter.overdue) {
      const { value, now } = filter.overdue;
      clauses.push(
        value
          ? { is_completed: false, due_at: { $lt: now } }
          : { $or: [{ is_completed: true }, { due_at: { $gte: now } }] },
      );
    }
    if (cursor) clauses.push(afterCursor(sort, cursor) as Filter<TaskDoc>);
    return this.collection
      .find(clauses.length === 1 ? query : { $and: clauses }, { projection: { pending_events: 0 } })
      .sort(mongoSort(sort))
      .limit(limit);
  }
}
