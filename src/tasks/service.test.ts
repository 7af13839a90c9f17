import { describe, expect, it } from 'vitest';
import { listTasksQuery } from '../contracts/tasks.js';
import { storedTaskDoc } from '../contracts/tasks.test-support.js';
import { NotFoundError, PreconditionFailedError } from '../shared/errors.js';
import { problemsOf } from '../shared/errors.test-support.js';
import { ContendedError } from '../shared/optimistic.js';
import { CursorCodec } from '../shared/pagination.js';
import { TasksService, taskEtag, type TasksServiceDeps } from './service.js';
import type { Actor } from '../contracts/auth-context.js';
import type { EventEnvelope } from '../contracts/envelope.js';
import type { TaskDoc } from '../contracts/tasks.js';
import type { OutboxEvent } from '../shared/outbox.js';
import type { TaskChanges } from './repository.js';

const at = new Date('2026-11-24T09:00:00Z');
const actor: Actor = { companyId: 'cmp_1', userId: 'usr_1', cause: { type: 'api_key', id: 'key_1' } };

const storedTask = (id: string, companyId = 'cmp_1'): TaskDoc =>
  storedTaskDoc({
    _id: id,
    company_id: companyId,
    title: `Task ${id}`,
    due_at: new Date('2026-11-30T09:00:00Z'),
    created_at: at,
    pending_events: [],
    outbox_pending: true,
  });

/** What a stored task's outbox holds, as type and the task's title then: enough to tell events apart. */
const outboxOf = (doc: TaskDoc | undefined) =>
  (doc?.pending_events ?? []).map((event) => `${event.type} ${String(event.data.title)}`);

/**
 * The tasks store in memory with the real one's conditions (company-scoped, live tasks only, compare-and-set on
 * the revision, events appended to the document's outbox), the users and items features' existence checks, and
 * a publisher that records what it was handed.
 */
function world() {
  const tasks = new Map<string, TaskDoc>([
    ['tsk_a', storedTask('tsk_a')],
    ['tsk_other', storedTask('tsk_other', 'cmp_2')],
  ]);
  const users = new Set(['cmp_1/usr_1', 'cmp_1/usr_2', 'cmp_2/usr_9']);
  const items = new Set(['cmp_1/itm_1', 'cmp_2/itm_9']);
  const published: Array<{ collection: string; documentId: string; events: OutboxEvent[] }> = [];
  const lookups: string[] = [];
  /** Writers that get in first: each makes the next compare-and-set lose, after changing the task itself. */
  const rivals: Array<(doc: TaskDoc) => void> = [];
  let writes = 0;

  const live = (companyId: string, taskId: string) => {
    const doc = tasks.get(taskId);
    return doc && doc.company_id === companyId && !doc.archived_at ? doc : undefined;
  };
  const withoutOutbox = (doc: TaskDoc): TaskDoc => {
    const { pending_events: _events, outbox_pending: _pending, outbox_bytes: _bytes, ...rest } = structuredClone(doc);
    return rest;
  };
  const compareAndSet = (
    companyId: string,
    taskId: string,
    revision: number,
    change: (doc: TaskDoc) => void,
    events: EventEnvelope[],
  ) => {
    writes++;
    const doc = live(companyId, taskId);
    const rival = rivals.shift();
    if (doc && rival) {
      rival(doc);
      doc.revision++;
    }
    if (!doc || doc.revision !== revision) return null;
    change(doc);
    doc.revision++;
    doc.pending_events = [...(doc.pending_events ?? []), ...events];
    doc.outbox_pending = true;
    return withoutOutbox(doc);
  };

  const deps: TasksServiceDeps = {
    tasks: {
      async insert(doc) {
        if (tasks.has(doc._id)) throw new Error(`E11000 duplicate key ${doc._id}`);
        tasks.set(doc._id, structuredClone(doc));
      },
      async findById(companyId, taskId) {
        const doc = live(companyId, taskId);
        return doc ? withoutOutbox(doc) : null;
      },
      async updateIfRevision(companyId, taskId, expectedRevision, changes: TaskChanges, updatedAt, events) {
        return compareAndSet(
          companyId,
          taskId,
          expectedRevision,
          (doc) => Object.assign(doc, changes, { updated_at: updatedAt }),
          events,
        );
      },
      async archive(companyId, task, archivedAt, events) {
        return compareAndSet(
          companyId,
          task._id,
          task.revision,
          (doc) => Object.assign(doc, { archived_at: archivedAt }),
          events,
        );
      },
      // The live tasks of the company in (sort field, _id) order after the cursor; equality filters only.
      list(companyId, filter, sort, limit, cursor) {
        const key = (doc: TaskDoc) => doc[sort.field as 'due_at' | 'created_at'].getTime();
        return [...tasks.values()]
          .filter((doc) => doc.company_id === companyId && !doc.archived_at)
          .filter((doc) => filter.is_completed === undefined || doc.is_completed === filter.is_completed)
          .sort((a, b) => sort.direction * (key(a) - key(b) || a._id.localeCompare(b._id)))
          .filter(
            (doc) =>
              !cursor ||
              sort.direction * (key(doc) - cursor.value) > 0 ||
              (key(doc) === cursor.value && sort.direction * doc._id.localeCompare(cursor.id) > 0),
          )
          .slice(0, limit)
          .map(withoutOutbox);
      },
    },
    users: {
      async existsCached(companyId, userId) {
        lookups.push(`users ${companyId}/${userId}`);
        return users.has(`${companyId}/${userId}`);
      },
    },
    items: {
      async existsCached(companyId, itemId) {
        lookups.push(`items ${companyId}/${itemId}`);
        return items.has(`${companyId}/${itemId}`);
      },
    },
    publisher: {
      publishRecorded(collection, documentId, events) {
        published.push({ collection, documentId, events });
      },
      async close() {},
    },
    cursors: async () => codec,
  };
  return { deps, tasks, published, lookups, rivals, writes: () => writes };
}

const due = new Date('2026-12-01T10:00:00Z');
const codec = new CursorCodec(Buffer.alloc(32, 7));
const listQuery = (query: Record<string, unknown>) => listTasksQuery.parse(query);

describe('TasksService', () => {
  it("create refuses an assignee and an item the company does not have (another company's too), every problem at once", async () => {
    const { deps, tasks, published, lookups } = world();
    const service = new TasksService(deps);
    expect(
      await problemsOf(service.create(actor, { title: 'Call', due_at: due, assigned_to: 'usr_9', item_id: 'itm_9' })),
    ).toEqual([
      { path: 'assigned_to', message: 'is not a user of this company' },
      { path: 'item_id', message: 'is not an item of this company' },
    ]);
    expect(lookups).toEqual(['users cmp_1/usr_9', 'items cmp_1/itm_9']);
    expect(tasks.size).toBe(2);
    expect(published).toEqual([]);
  });

  it('create stores the task with its defaults and its event in its outbox, and hands the same events to the publisher', async () => {
    const { deps, tasks, published, lookups } = world();
    const created = await new TasksService(deps).create(
      actor,
      { title: 'Call', due_at: due, notes: '  ' },
      { depth: 2 },
    );
    // The default assignee is the key's creator, checked when the key was made: no lookup.
    expect(lookups).toEqual([]);
    expect(created).toEqual({
      task_id: expect.stringMatching(/^tsk_[0-9a-f]{24}$/),
      title: 'Call',
      due_at: '2026-12-01T10:00:00.000Z',
      assigned_to: 'usr_1',
      description: null,
      priority: 'none',
      task_type: 'to_do',
      item_id: null,
      duration_minutes: null,
      reminder_minutes: null,
      notes: null, // blank notes are stored as null
      is_completed: false,
      created_by: 'usr_1',
      completed_at: null,
      created_at: expect.any(String),
      updated_at: expect.any(String),
    });
    const stored = tasks.get(created.task_id);
    expect(stored).toMatchObject({ company_id: 'cmp_1', revision: 1, overdue_fired_for: null, outbox_pending: true });
    expect(stored?.pending_events).toEqual([
      expect.objectContaining({
        type: 'task.created',
        company_id: 'cmp_1',
        actor: actor.cause,
        depth: 2,
        data: created,
      }),
    ]);
    expect(published).toEqual([{ collection: 'tasks', documentId: created.task_id, events: stored?.pending_events }]);
  });

  it('create of a completed task records task.created and task.completed; a given task id is used, and only once', async () => {
    const { deps, tasks, published } = world();
    const service = new TasksService(deps);
    const body = { title: 'Done already', due_at: due, is_completed: true, assigned_to: 'usr_2', item_id: 'itm_1' };
    const created = await service.create(actor, body, { taskId: 'tsk_fixed' });
    expect(created).toMatchObject({
      task_id: 'tsk_fixed',
      is_completed: true,
      completed_at: created.created_at,
      assigned_to: 'usr_2',
      item_id: 'itm_1',
    });
    expect(outboxOf(tasks.get('tsk_fixed'))).toEqual(['task.created Done already', 'task.completed Done already']);
    // A retried automation job passes the same id: the store refuses the second insert, nothing is published.
    await expect(service.create(actor, body, { taskId: 'tsk_fixed' })).rejects.toThrow('duplicate key');
    expect(published).toHaveLength(1);
  });

  it('update after a lost race reads again and builds its events from what the other writer left', async () => {
    const { deps, tasks, published, rivals, writes } = world();
    rivals.push((doc) => Object.assign(doc, { priority: 'urgent' }));
    const updated = await new TasksService(deps).update(actor, 'tsk_a', { is_completed: true, title: 'Called' });
    expect(writes()).toBe(2);
    expect(updated).toMatchObject({ title: 'Called', is_completed: true, priority: 'urgent' });
    expect(updated.completed_at).toEqual(updated.updated_at);
    const events = tasks.get('tsk_a')?.pending_events ?? [];
    expect(events.map((event) => event.type)).toEqual(['task.updated', 'task.completed']);
    // The other writer's change is in the data, not in this update's changes.
    expect(events[0]?.data).toMatchObject({ priority: 'urgent', title: 'Called' });
    expect(Object.keys(events[0]?.changes ?? {}).sort()).toEqual(['completed_at', 'is_completed', 'title']);
    expect(published).toEqual([{ collection: 'tasks', documentId: 'tsk_a', events }]);
  });

  it('update that keeps losing gives up with 503 (ContendedError), having changed and published nothing', async () => {
    const { deps, tasks, published, rivals, writes } = world();
    const before = structuredClone(tasks.get('tsk_a'));
    for (let n = 0; n < 25; n++) rivals.push(() => {});
    const error = await new TasksService(deps)
      .update(actor, 'tsk_a', { title: 'Never' })
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ContendedError);
    expect(error).toMatchObject({ status: 503 });
    expect(writes()).toBe(25);
    expect(tasks.get('tsk_a')).toEqual({ ...before, revision: 26 });
    expect(published).toEqual([]);
  });

  it('update that changes nothing writes and publishes nothing; a reference or a task not of the company is refused first', async () => {
    const { deps, published, lookups, writes } = world();
    const service = new TasksService(deps);
    const current = await service.get(actor, 'tsk_a');
    expect(await service.update(actor, 'tsk_a', { title: current.title, notes: '' })).toEqual(current);
    expect(writes()).toBe(0);
    expect(published).toEqual([]);

    expect(await problemsOf(service.update(actor, 'tsk_a', { item_id: 'itm_9' }))).toEqual([
      { path: 'item_id', message: 'is not an item of this company' },
    ]);
    expect(lookups).toEqual(['items cmp_1/itm_9']);
    await expect(service.update(actor, 'tsk_other', { title: 'Mine' })).rejects.toBeInstanceOf(NotFoundError);
    await expect(service.get(actor, 'tsk_other')).rejects.toBeInstanceOf(NotFoundError);
  });

  it('delete honours If-Match against the current ETag, archives the task with task.deleted, and it reads 404 afterwards', async () => {
    const { deps, tasks, published } = world();
    const service = new TasksService(deps);
    const current = await service.get(actor, 'tsk_a');
    await expect(service.delete(actor, 'tsk_a', '"not-the-etag"')).rejects.toBeInstanceOf(PreconditionFailedError);
    expect(tasks.get('tsk_a')?.archived_at).toBeUndefined();

    await service.delete(actor, 'tsk_a', `W/"x", ${taskEtag(current)}`);
    expect(tasks.get('tsk_a')?.archived_at).toBeInstanceOf(Date);
    expect(published).toEqual([
      {
        collection: 'tasks',
        documentId: 'tsk_a',
        events: [expect.objectContaining({ type: 'task.deleted', data: current })],
      },
    ]);
    await expect(service.get(actor, 'tsk_a')).rejects.toBeInstanceOf(NotFoundError);
    await expect(service.delete(actor, 'tsk_a')).rejects.toBeInstanceOf(NotFoundError);
    await expect(service.delete(actor, 'tsk_other')).rejects.toBeInstanceOf(NotFoundError);
    expect(tasks.get('tsk_other')?.archived_at).toBeUndefined();
  });

  it("list pages the company's live tasks by due time with a signed cursor, valid only for the filters it was issued for", async () => {
    const { deps, tasks } = world();
    for (const [id, hours] of [
      ['tsk_b', 3],
      ['tsk_c', 1],
      ['tsk_d', 2],
    ] as const)
      tasks.set(id, { ...storedTask(id), due_at: new Date(due.getTime() + hours * 3_600_000) });
    tasks.set('tsk_gone', { ...storedTask('tsk_gone'), archived_at: new Date() });
    const service = new TasksService(deps);
    const first = await service.list(actor, listQuery({ limit: '3' }));
    expect(first.tasks.map((task) => task.task_id)).toEqual(['tsk_a', 'tsk_c', 'tsk_d']);
    expect(first.nextCursor).toBeDefined();
    const second = await service.list(actor, listQuery({ limit: '3', cursor: first.nextCursor }));
    expect(second.tasks.map((task) => task.task_id)).toEqual(['tsk_b']);
    expect(second.nextCursor).toBeUndefined();
    // The same cursor with another filter, or from another company, is refused rather than misread.
    expect(
      await problemsOf(service.list(actor, listQuery({ limit: '3', is_completed: 'true', cursor: first.nextCursor }))),
    ).toEqual([{ path: 'cursor', message: 'is not a cursor issued for this list and these filters' }]);
    const otherActor = { ...actor, companyId: 'cmp_2' };
    expect(
      await problemsOf(service.list(otherActor, listQuery({ limit: '3', cursor: first.nextCursor }))),
    ).toHaveLength(1);
    expect((await service.list(otherActor, listQuery({}))).tasks.map((task) => task.task_id)).toEqual(['tsk_other']);
  });
});
