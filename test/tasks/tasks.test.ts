import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, startTestWorkers, type TestApp } from '../helpers/app.js';
import { feedEvents, feedOf } from '../helpers/events.js';
import { admin, createItem, createTask, createTenant, expectProblem, ext, type Tenant } from '../helpers/fixtures.js';
import { automationRuns, queuesIdle } from '../helpers/hooks.js';
import { waitFor } from '../helpers/wait.js';

let t: TestApp;
let tenant: Tenant;

beforeAll(async () => {
  t = await buildTestApp({ RATE_LIMIT_MAX: '1000000' }, { publisher: true });
  tenant = await createTenant(t.app);
});
afterAll(async () => t?.close());

const DUE = '2026-11-22T09:30:00.000Z';
const paths = (body: { errors: Array<{ path: string }> }) => body.errors.map((error) => error.path).sort();
const post = (body: unknown, who = tenant) => ext(t.app, who.key, 'POST', '/tasks', body);
const patch = (taskId: string, body: unknown, who = tenant) => ext(t.app, who.key, 'PATCH', `/tasks/${taskId}`, body);
const stored = async (taskId: string) => (await t.db.collection('tasks').findOne({ _id: taskId as never }))!;
/** The types of a task's events in the feed, once `count` of them are readable. */
const eventTypes = async (taskId: string, count: number, who = tenant) =>
  (await feedOf(t.app, who.key, taskId, count)).map((event) => event.type);
/**
 * A task's events in the feed up to a last change made now (priority to urgent), without it: once its event is
 * readable, so is every event recorded before it (the feed never shows an event behind one it has shown).
 */
async function eventsBeforeMarker(taskId: string) {
  expect((await patch(taskId, { priority: 'urgent' })).statusCode).toBe(200);
  const events = await waitFor(async () => {
    const found = await feedEvents(t.app, tenant.key, `resource_id=${taskId}`);
    return found.at(-1)?.changes?.priority?.to === 'urgent' ? found : undefined;
  });
  return events!.slice(0, -1);
}

describe('creating a task', () => {
  it('answers 201 with exactly the spec keys, in order, defaults applied and unset fields null', async () => {
    const response = await post({ title: '  Call Acme  ', due_at: '2026-11-22T10:30:00+01:00' });
    expect(response.statusCode, response.body).toBe(201);
    const task = response.json();
    expect(Object.keys(task)).toEqual([
      'task_id',
      'title',
      'due_at',
      'assigned_to',
      'description',
      'priority',
      'task_type',
      'item_id',
      'duration_minutes',
      'reminder_minutes',
      'notes',
      'is_completed',
      'created_by',
      'completed_at',
      'created_at',
      'updated_at',
    ]);
    expect(task).toMatchObject({
      title: 'Call Acme',
      due_at: DUE,
      assigned_to: tenant.userId,
      description: null,
      priority: 'none',
      task_type: 'to_do',
      item_id: null,
      duration_minutes: null,
      reminder_minutes: null,
      notes: null,
      is_completed: false,
      created_by: tenant.userId,
      completed_at: null,
    });
    expect(task.task_id).toMatch(/^tsk_/);
    expect(task.created_at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    expect(task.updated_at).toBe(task.created_at);
    expect((await ext(t.app, tenant.key, 'GET', `/tasks/${task.task_id}`)).json()).toEqual(task);
    expect(await stored(task.task_id)).toMatchObject({
      company_id: tenant.companyId,
      revision: 1,
      overdue_fired_for: null,
    });
  });

  it('keeps every supplied field and accepts a colleague and an item of the company', async () => {
    const colleague = (
      await admin(t.app, 'POST', `/companies/${tenant.companyId}/users`, { name: 'Bo', email: 'bo@example.com' }, 201)
    ).json();
    const item = await createItem(t.app, tenant);
    const body = {
      title: 'Demo',
      due_at: DUE,
      assigned_to: colleague.user_id,
      description: 'Show v2',
      priority: 'urgent',
      task_type: 'meeting',
      item_id: item.item_id,
      duration_minutes: 525_600,
      reminder_minutes: 0,
      notes: 'Bring slides',
    };
    const task = await createTask(t.app, tenant, body);
    expect(task).toMatchObject({ ...body, created_by: tenant.userId });
  });

  it('requires title and due_at and rejects bad values, naming each path', async () => {
    expect(paths(expectProblem(await post({}), 400, 'validation_failed'))).toEqual(['due_at', 'title']);
    const bad = await post({
      title: ' ',
      due_at: 'tomorrow',
      priority: 'critical',
      task_type: 'lunch',
      duration_minutes: 525_601,
      reminder_minutes: -1,
      is_completed: 'yes',
      description: 'x'.repeat(10_001),
    });
    expect(paths(expectProblem(bad, 400, 'validation_failed'))).toEqual([
      'description',
      'due_at',
      'duration_minutes',
      'is_completed',
      'priority',
      'reminder_minutes',
      'task_type',
      'title',
    ]);
    expect(
      paths(
        expectProblem(
          await post({ title: 'x'.repeat(501), due_at: DUE, duration_minutes: 1.5 }),
          400,
          'validation_failed',
        ),
      ),
    ).toEqual(['duration_minutes', 'title']);
    expect(paths(expectProblem(await post({ title: 'x', due_at: '2026-11-22' }), 400, 'validation_failed'))).toEqual([
      'due_at',
    ]);
    expect(
      paths(expectProblem(await post({ title: 'x', due_at: '2026-02-30T10:30:00Z' }), 400, 'validation_failed')),
    ).toEqual(['due_at']);
    expect(
      paths(expectProblem(await post({ title: 'x', due_at: '2026-11-22T24:30:00Z' }), 400, 'validation_failed')),
    ).toEqual(['due_at']);
  });

  it('rejects unknown and output-only fields', async () => {
    const outputOnly = {
      task_id: 'tsk_x',
      created_by: tenant.userId,
      completed_at: DUE,
      created_at: DUE,
      updated_at: DUE,
    };
    for (const extra of [
      ...Object.entries(outputOnly).map(([key, value]) => ({ [key]: value })),
      { colour: 'red' },
      { company_id: 'cmp_x' },
    ]) {
      const body = expectProblem(await post({ title: 'x', due_at: DUE, ...extra }), 400, 'validation_failed');
      expect(paths(body)).toEqual(Object.keys(extra));
    }
    const task = await createTask(t.app, tenant);
    expect(
      paths(expectProblem(await patch(task.task_id, { completed_at: DUE, revision: 3 }), 400, 'validation_failed')),
    ).toEqual(['completed_at', 'revision']);
  });

  it('refuses an assignee or item that is not in the caller company, reporting both', async () => {
    const other = await createTenant(t.app);
    const foreignItem = await createItem(t.app, other);
    const both = expectProblem(
      await post({ title: 'x', due_at: DUE, assigned_to: other.userId, item_id: foreignItem.item_id }),
      400,
      'validation_failed',
    );
    expect(paths(both)).toEqual(['assigned_to', 'item_id']);
    // Alongside schema problems too: errors[] lists every problem at once.
    const mixed = expectProblem(
      await post({ title: '', due_at: 'soon', assigned_to: other.userId, item_id: foreignItem.item_id }),
      400,
      'validation_failed',
    );
    expect(paths(mixed)).toEqual(['assigned_to', 'due_at', 'item_id', 'title']);
    expect(
      paths(
        expectProblem(
          await post({ title: 'x', due_at: DUE, assigned_to: 'usr_000000000000000000000000' }),
          400,
          'validation_failed',
        ),
      ),
    ).toEqual(['assigned_to']);
    const task = await createTask(t.app, tenant);
    expect(
      paths(expectProblem(await patch(task.task_id, { item_id: foreignItem.item_id }), 400, 'validation_failed')),
    ).toEqual(['item_id']);
    expect(await t.db.collection('tasks').countDocuments({ company_id: tenant.companyId, title: 'x' })).toBe(0);
  });

  it('stores an empty note as null, on create and on update', async () => {
    const task = await createTask(t.app, tenant, { notes: '' });
    expect(task.notes).toBeNull();
    expect((await patch(task.task_id, { notes: 'call first' })).json().notes).toBe('call first');
    expect((await patch(task.task_id, { notes: '' })).json().notes).toBeNull();
    expect((await stored(task.task_id)).notes).toBeNull();
  });
});

describe('updating a task', () => {
  it('changes only the supplied fields and clears nullable ones with null', async () => {
    const item = await createItem(t.app, tenant);
    const task = await createTask(t.app, tenant, { item_id: item.item_id, duration_minutes: 30, description: 'd' });
    const response = await patch(task.task_id, {
      title: 'Renamed',
      due_at: '2026-12-01T08:00:00-05:00',
      item_id: null,
      duration_minutes: null,
    });
    expect(response.statusCode).toBe(200);
    const updated = response.json();
    expect(updated).toEqual({
      ...task,
      title: 'Renamed',
      due_at: '2026-12-01T13:00:00.000Z',
      item_id: null,
      duration_minutes: null,
      updated_at: updated.updated_at,
    });
    expect(updated.updated_at >= task.updated_at).toBe(true);
    expect(
      paths(
        expectProblem(
          await patch(task.task_id, { title: '', due_at: null, assigned_to: null }),
          400,
          'validation_failed',
        ),
      ),
    ).toEqual(['assigned_to', 'due_at', 'title']);
  });

  it('tracks completed_at through every completion transition', async () => {
    const task = await createTask(t.app, tenant);
    const done = (await patch(task.task_id, { is_completed: true })).json();
    expect(done.is_completed).toBe(true);
    expect(Date.parse(done.completed_at)).toBeGreaterThanOrEqual(Date.parse(task.created_at));
    expect(done.completed_at).toBe(done.updated_at);
    await new Promise((resolve) => setTimeout(resolve, 5));
    const again = (await patch(task.task_id, { is_completed: true, notes: 'still done' })).json();
    expect(again.completed_at).toBe(done.completed_at); // true→true keeps it
    const reopened = (await patch(task.task_id, { is_completed: false })).json();
    expect(reopened).toMatchObject({ is_completed: false, completed_at: null });
    const createdDone = await createTask(t.app, tenant, { is_completed: true });
    expect(createdDone.completed_at).toBe(createdDone.created_at);
  });

  it('answers a PATCH that changes nothing with the current task, untouched', async () => {
    const task = await createTask(t.app, tenant, { notes: 'n', priority: 'low' });
    await new Promise((resolve) => setTimeout(resolve, 5));
    const same = await patch(task.task_id, {
      title: task.title,
      notes: 'n',
      priority: 'low',
      is_completed: false,
      due_at: '2026-11-22T10:30:00+01:00',
    });
    expect(same.statusCode).toBe(200);
    expect(same.json()).toEqual(task);
    expect((await patch(task.task_id, {})).json()).toEqual(task);
    expect(await stored(task.task_id)).toMatchObject({ revision: 1, updated_at: new Date(task.updated_at) });
  });
});

describe('tenant isolation', () => {
  it('answers 404 for another company task, an unknown id and a malformed id, and changes nothing', async () => {
    const other = await createTenant(t.app);
    const foreign = await createTask(t.app, other);
    expectProblem(await ext(t.app, tenant.key, 'GET', `/tasks/${foreign.task_id}`), 404, 'not_found');
    expectProblem(await patch(foreign.task_id, { title: 'hijack', is_completed: true }), 404, 'not_found');
    expectProblem(await ext(t.app, tenant.key, 'GET', '/tasks/tsk_000000000000000000000000'), 404, 'not_found');
    expectProblem(await ext(t.app, tenant.key, 'GET', '/tasks/%24where'), 404, 'not_found');
    expectProblem(await patch('%24where', { title: 'x' }), 404, 'not_found');
    expect((await ext(t.app, other.key, 'GET', `/tasks/${foreign.task_id}`)).json()).toEqual(foreign);
    expect(await eventTypes(foreign.task_id, 1, other)).toEqual(['task.created']);
    expect(await feedEvents(t.app, tenant.key, `resource_id=${foreign.task_id}`)).toEqual([]);
    expect((await ext(t.app, tenant.key, 'GET', `/tasks?assigned_to=${other.userId}`)).json()).toEqual([]);
  });
});

describe('events recorded with the change', () => {
  it('records created, updated with changes, and completed, each once with a unique id', async () => {
    const task = await createTask(t.app, tenant);
    expect(await eventTypes(task.task_id, 1)).toEqual(['task.created']);
    const renamed = (await patch(task.task_id, { title: 'Call Acme' })).json();
    expect(await eventTypes(task.task_id, 2)).toEqual(['task.created', 'task.updated']);
    await patch(task.task_id, { title: 'Call Acme' }); // no-op: no event
    const done = (await patch(task.task_id, { is_completed: true })).json();
    await patch(task.task_id, { is_completed: true }); // true→true: nothing to record
    const events = await eventsBeforeMarker(task.task_id);
    expect(events.map((event) => event.type)).toEqual([
      'task.created',
      'task.updated',
      'task.updated',
      'task.completed',
    ]);
    expect(new Set(events.map((event) => event.event_id)).size).toBe(4);
    for (const event of events)
      expect(event).toMatchObject({ company_id: tenant.companyId, data: { task_id: task.task_id } });
    expect(events[0]!.data).toEqual(task);
    expect(events[0]!.changes).toBeUndefined();
    expect(events[1]!.changes).toEqual({ title: { from: 'Call back', to: 'Call Acme' } });
    expect(events[1]!.data).toEqual(renamed);
    const completion = { is_completed: { from: false, to: true }, completed_at: { from: null, to: done.completed_at } };
    expect(events[2]).toMatchObject({ changes: completion, data: done });
    expect(events[3]).toMatchObject({ changes: completion, data: done, occurred_at: events[2]!.occurred_at });
    expect(events[0]!.actor).toEqual({ type: 'api_key', id: tenant.keyId }); // caused by the key, not by an automation
  });

  it('records task.created and task.completed for a task created completed', async () => {
    const task = await createTask(t.app, tenant, { is_completed: true });
    expect(await eventTypes(task.task_id, 2)).toEqual(['task.created', 'task.completed']);
    await patch(task.task_id, { is_completed: false });
    expect(await eventTypes(task.task_id, 3)).toEqual(['task.created', 'task.completed', 'task.updated']);
  });

  it('completes once when ten clients complete the same task at the same moment', async () => {
    const task = await createTask(t.app, tenant);
    const responses = await Promise.all(Array.from({ length: 10 }, () => patch(task.task_id, { is_completed: true })));
    expect(responses.map((response) => response.statusCode)).toEqual(Array(10).fill(200));
    expect(new Set(responses.map((response) => response.json().completed_at)).size).toBe(1);
    expect((await eventsBeforeMarker(task.task_id)).map((event) => event.type)).toEqual([
      'task.created',
      'task.updated',
      'task.completed',
    ]);
  });

  it('lets the automation worker write through the service, carrying the chain depth on every event', async () => {
    // The depth shows where automations see it: a rule for each of the three events, and their runs.
    const own = await createTenant(t.app);
    const rule = async (trigger: string) =>
      (
        await admin(
          t.app,
          'POST',
          `/companies/${own.companyId}/automations`,
          {
            name: trigger,
            trigger,
            conditions: { task_type: 'follow_up' },
            actions: [{ type: 'create_task', title: 'Next', due_in_minutes: 5 }],
          },
          201,
        )
      ).json().automation_id as string;
    const rules = [await rule('task.created'), await rule('task.completed'), await rule('task.updated')];
    const actor = {
      companyId: own.companyId,
      userId: own.userId,
      cause: { type: 'automation' as const, id: 'aut_x' },
    };
    const created = await t.app.services.tasks.create(
      actor,
      { title: 'Follow up', due_at: new Date(DUE), task_type: 'follow_up', is_completed: true },
      { depth: 2 },
    );
    expect(created).toMatchObject({ task_type: 'follow_up', assigned_to: own.userId, created_by: own.userId });
    await t.app.services.tasks.update(actor, created.task_id, { priority: 'high' }, { depth: 3 });
    const events = await feedOf(t.app, own.key, created.task_id, 3);
    expect(events.map((event) => [event.type, event.actor])).toEqual([
      ['task.created', actor.cause],
      ['task.completed', actor.cause],
      ['task.updated', actor.cause],
    ]);
    const workers = await startTestWorkers(t.config, t.db, ['automations']);
    try {
      // Readable means queued; an idle queue, that the automations ran for each of the three (or chose not to).
      await queuesIdle(t, ['automations']);
      const runs = await Promise.all(rules.map((id) => automationRuns(t.app, own, id)));
      expect(runs.map((list) => list.map((run) => [run.event_id, run.depth]))).toEqual([
        [[events[0]!.event_id, 2]],
        [[events[1]!.event_id, 2]],
        [], // depth 3: the end of the chain
      ]);
    } finally {
      await workers.close();
    }
    // A retried job passes the same task id and cannot create the task twice.
    const retry = t.app.services.tasks.create(
      actor,
      { title: 'Follow up', due_at: new Date(DUE) },
      { taskId: created.task_id },
    );
    await expect(retry).rejects.toThrow(/duplicate key/i);
    expect(await t.db.collection('tasks').countDocuments({ _id: created.task_id as never })).toBe(1);
  });
});
