import { buildCompanyEvent } from '../contracts/company-events.js';
import { diffResources, type EventEnvelope } from '../contracts/envelope.js';
import { toTaskResponse } from '../contracts/tasks.js';
import { NotFoundError, PreconditionFailedError, ValidationError, type FieldProblem } from '../shared/errors.js';
import { ifMatchAccepts, representationEtag } from '../shared/etag.js';
import { newId } from '../shared/ids.js';
import { retryLostRaces } from '../shared/optimistic.js';
import { outboxOnInsert } from '../shared/outbox.js';
import { pageOf, parseSort, type CursorCodec, type Rows } from '../shared/pagination.js';
import type { Actor } from '../contracts/auth-context.js';
import type { TaskDoc, CreateTaskBody, ListTasksQuery, TaskResponse, UpdateTaskBody } from '../contracts/tasks.js';
import type { EventPublisher } from '../shared/outbox.js';
import type { TaskChanges, TasksRepository } from './repository.js';

// Each lost race means another writer won, so this bounds waiting under heavy contention on one task.
const UPDATE_RETRIES = 25;

export interface TasksServiceDeps {
  tasks: Pick<TasksRepository, 'insert' | 'findById' | 'updateIfRevision' | 'archive'> & {
    /** A page's rows, read only as far as the page needs (the repository's driver cursor). */
    list(...args: Parameters<TasksRepository['list']>): Rows<TaskDoc>;
  };
  /** The users and items features' cached existence checks: a task's assignee and item are in its company. */
  users: { existsCached(companyId: string, userId: string): Promise<boolean> };
  items: { existsCached(companyId: string, itemId: string): Promise<boolean> };
  publisher: EventPublisher;
  cursors: () => Promise<CursorCodec>;
}

/** Who acts: an API key's company and creator, or the automation that acts on their behalf. */

export interface TaskWriteOptions {
  /** Automation chain depth, put on every event the call records (DECISIONS.md section 9). */
  depth?: number;
  /**
   * create only: the id to give the new task. A retried automation job passes the same id, so its
   * second insert fails with a duplicate key instead of creating the task twice.
   */
  taskId?: string;
}

/** A task's ETag: a digest of its API shape, so it changes exactly when something visible changes. */
export const taskEtag = (task: TaskResponse) => representationEtag(task);

/** "null when empty" (spec): an empty or blank note is stored as null, on create and update alike. */
function normaliseNotes(notes: string | null): string | null {
  return notes === null || notes.trim() === '' ? null : notes;
}

/** The stored values a PATCH body leads to; completed_at follows is_completed (DECISIONS.md section 8). */
export function changesFrom(current: TaskDoc, body: UpdateTaskBody, now: Date): TaskChanges {
  const { notes, is_completed: isCompleted, ...rest } = body;
  // Absent and undefined are the same ("not supplied"); an undefined must never reach $set as null.
  const changes = Object.fromEntries(Object.entries(rest).filter(([, value]) => value !== undefined)) as TaskChanges;
  if (notes !== undefined) changes.notes = normaliseNotes(notes);
  if (isCompleted !== undefined && isCompleted !== current.is_completed) {
    changes.is_completed = isCompleted;
    changes.completed_at = isCompleted ? now : null;
  }
  // task.overdue fires once per due time (DECISIONS.md section 9): a due time it has not fired for
  // re-arms it, one it already fired for (D → E → D) does not; reopening alone does not either.
  const due = changes.due_at;
  if (due && due.getTime() !== current.due_at.getTime()) {
    const firedFor = [
      ...(current.overdue_fired_dues ?? []),
      ...(current.overdue_fired_for ? [current.overdue_fired_for] : []),
    ];
    changes.overdue_fired_for = firedFor.some((fired) => fired.getTime() === due.getTime()) ? due : null;
  }
  return changes;
}

export class TasksService {
  constructor(private readonly deps: TasksServiceDeps) {}

  /** assigned_to and item_id must resolve in the caller's company; every problem is reported at once. */
  async referenceProblems(
    companyId: string,
    refs: { assigned_to?: string; item_id?: string | null },
  ): Promise<FieldProblem[]> {
    // Usually answered from memory (see existsCached): a reference seen recently needs no read.
    const [user, item] = await Promise.all([
      refs.assigned_to === undefined ? true : this.deps.users.existsCached(companyId, refs.assigned_to),
      refs.item_id ? this.deps.items.existsCached(companyId, refs.item_id) : true,
    ]);
    const problems: FieldProblem[] = [];
    if (!user) problems.push({ path: 'assigned_to', message: 'is not a user of this company' });
    if (!item) problems.push({ path: 'item_id', message: 'is not an item of this company' });
    return problems;
  }

  async create(actor: Actor, body: CreateTaskBody, options: TaskWriteOptions = {}): Promise<TaskResponse> {
    const assignedTo = body.assigned_to ?? actor.userId;
    // The key's creator was checked when the key was made (users are never deleted): no lookup for the default.
    ValidationError.throwIfAny(
      await this.referenceProblems(actor.companyId, { assigned_to: body.assigned_to, item_id: body.item_id }),
    );
    const now = new Date();
    const isCompleted = body.is_completed ?? false;
    const doc: TaskDoc = {
      _id: options.taskId ?? newId('task'),
      company_id: actor.companyId,
      title: body.title,
      due_at: body.due_at,
      assigned_to: assignedTo,
      description: body.description ?? null,
      priority: body.priority ?? 'none',
      task_type: body.task_type ?? 'to_do',
      item_id: body.item_id ?? null,
      duration_minutes: body.duration_minutes ?? null,
      reminder_minutes: body.reminder_minutes ?? null,
      notes: normaliseNotes(body.notes ?? null),
      is_completed: isCompleted,
      created_by: actor.userId,
      completed_at: isCompleted ? now : null,
      created_at: now,
      updated_at: now,
      revision: 1,
      overdue_fired_for: null,
    };
    const response = toTaskResponse(doc);
    const eventOptions = { actor: actor.cause, occurredAt: now, depth: options.depth };
    const events: EventEnvelope[] = [buildCompanyEvent('task.created', actor.companyId, response, eventOptions)];
    if (isCompleted) events.push(buildCompanyEvent('task.completed', actor.companyId, response, eventOptions));
    await this.deps.tasks.insert({ ...doc, ...outboxOnInsert(events) });
    this.deps.publisher.publishRecorded('tasks', doc._id, events);
    return response;
  }

  async get(actor: Actor, taskId: string): Promise<TaskResponse> {
    const doc = await this.deps.tasks.findById(actor.companyId, taskId);
    if (!doc) throw new NotFoundError('Task');
    return toTaskResponse(doc);
  }

  /**
   * Partial update as a compare-and-set on the revision it read, retried on a lost race, so the
   * completion transition and its events are never computed from a stale read. A no-op writes nothing.
   */
  async update(
    actor: Actor,
    taskId: string,
    body: UpdateTaskBody,
    options: TaskWriteOptions = {},
  ): Promise<TaskResponse> {
    ValidationError.throwIfAny(
      await this.referenceProblems(actor.companyId, { assigned_to: body.assigned_to, item_id: body.item_id }),
    );
    return retryLostRaces('task', UPDATE_RETRIES, async () => {
      const current = await this.deps.tasks.findById(actor.companyId, taskId);
      if (!current) throw new NotFoundError('Task');
      const now = new Date();
      const next = changesFrom(current, body, now);
      const before = toTaskResponse(current);
      const after = toTaskResponse({ ...current, ...next, updated_at: now });
      const changes = diffResources(before, after, ['updated_at']);
      if (Object.keys(changes).length === 0) return before;

      const eventOptions = { actor: actor.cause, changes, occurredAt: now, depth: options.depth };
      const events: EventEnvelope[] = [buildCompanyEvent('task.updated', actor.companyId, after, eventOptions)];
      if (!current.is_completed && after.is_completed)
        events.push(buildCompanyEvent('task.completed', actor.companyId, after, eventOptions));
      const saved = await this.deps.tasks.updateIfRevision(
        actor.companyId,
        taskId,
        current.revision,
        next,
        now,
        events,
      );
      if (!saved) return null;
      this.deps.publisher.publishRecorded('tasks', taskId, events);
      return toTaskResponse(saved);
    });
  }

  /**
   * Archives the task (DECISIONS.md section 12.3): reads 404 afterwards and task.deleted carries the
   * task as it was. `If-Match` is compared with the task's ETag (see taskEtag).
   */
  async delete(actor: Actor, taskId: string, ifMatch?: string): Promise<void> {
    await retryLostRaces('task', UPDATE_RETRIES, async () => {
      const current = await this.deps.tasks.findById(actor.companyId, taskId);
      if (!current) throw new NotFoundError('Task');
      const before = toTaskResponse(current);
      if (ifMatch !== undefined && !ifMatchAccepts(ifMatch, taskEtag(before))) throw new PreconditionFailedError();
      const now = new Date();
      const events = [
        buildCompanyEvent('task.deleted', actor.companyId, before, { actor: actor.cause, occurredAt: now }),
      ];
      if (!(await this.deps.tasks.archive(actor.companyId, current, now, events))) return null;
      this.deps.publisher.publishRecorded('tasks', taskId, events);
      return true;
    });
  }

  async list(actor: Actor, query: ListTasksQuery): Promise<{ tasks: TaskResponse[]; nextCursor?: string }> {
    const sort = parseSort(query.sort);
    const { cursor: rawCursor, limit, sort: _sort, overdue, ...filter } = query;
    const codec = await this.deps.cursors();
    // A cursor is only valid for the company, filters and sort it was issued for.
    const scope = `tasks:${actor.companyId}:${JSON.stringify({ ...filter, overdue, sort: query.sort })}`;
    const cursor = rawCursor ? codec.decode(rawCursor, scope) : undefined;
    const rows = this.deps.tasks.list(
      actor.companyId,
      { ...filter, ...(overdue === undefined ? {} : { overdue: { value: overdue, now: new Date() } }) },
      sort,
      limit + 1,
      cursor,
    );
    const page = await pageOf(
      rows,
      limit,
      (row) => row[sort.field as 'due_at' | 'created_at'],
      (value, id) => codec.encode({ scope, value, id }),
    );
    return { tasks: page.rows.map(toTaskResponse), nextCursor: page.nextCursor };
  }
}
