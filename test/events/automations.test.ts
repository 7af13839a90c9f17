import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { processAutomationEvent } from '../../src/automations/processor.js';
import { AutomationsRepository } from '../../src/automations/repository.js';
import { must } from '../../src/shared/must.js';
import { buildTestApp, startTestWorkers, type TestApp } from '../helpers/app.js';
import { admin, createItem, createTenant, expectProblem, ext, type Tenant } from '../helpers/fixtures.js';
import { automationRuns, eventIdsOf, eventsFinished, waitForRuns } from '../helpers/hooks.js';
import { waitFor } from '../helpers/wait.js';
import type { EventEnvelope } from '../../src/contracts/envelope.js';

let t: TestApp;
let workers: { close(): Promise<void> };
beforeAll(async () => {
  t = await buildTestApp({ RATE_LIMIT_MAX: '1000000' }, { publisher: true });
  workers = await startTestWorkers(t.config, t.db, ['relay', 'automations']);
});
afterAll(async () => {
  await workers?.close();
  await t?.close();
});

const due = '2030-01-01T10:00:00.000Z';
/** Creates an item and a task on it, completes the task, and waits until the item reaches `version`. */
async function completeTaskOnNewItem(tenant: Tenant, version: number) {
  const item = await createItem(t.app, tenant);
  const task = (
    await ext(t.app, tenant.key, 'POST', '/tasks', { title: 'Close', due_at: due, item_id: item.item_id })
  ).json();
  await ext(t.app, tenant.key, 'PATCH', `/tasks/${task.task_id}`, { is_completed: true });
  return waitFor(async () => {
    const current = (await ext(t.app, tenant.key, 'GET', `/items/${item.item_id}`)).json();
    return current.version === version ? current : undefined;
  });
}

async function automation(tenant: Tenant, body: Record<string, unknown>) {
  return (
    await admin(t.app, 'POST', `/companies/${tenant.companyId}/automations`, { name: 'rule', ...body }, 201)
  ).json();
}
const tasksOf = (companyId: string, filter: Record<string, unknown> = {}) =>
  t.db
    .collection('tasks')
    .find({ company_id: companyId, ...filter })
    .toArray();

describe('automation admin API', () => {
  it('validates triggers, actions and references', async () => {
    const tenant = await createTenant(t.app);
    const other = await createTenant(t.app);
    const url = `/companies/${tenant.companyId}/automations`;
    expectProblem(
      await admin(t.app, 'POST', url, {
        name: 'x',
        trigger: 'item.created',
        actions: [{ type: 'create_task', title: 'x', due_in_minutes: 1 }],
      }),
      400,
      'validation_failed',
    );
    expectProblem(
      await admin(t.app, 'POST', url, { name: 'x', trigger: 'task.created', actions: [] }),
      400,
      'validation_failed',
    );
    expectProblem(
      await admin(t.app, 'POST', url, { name: 'x', trigger: 'task.created', actions: [{ type: 'send_fax' }] }),
      400,
      'validation_failed',
    );
    const foreign = expectProblem(
      await admin(t.app, 'POST', url, {
        name: 'x',
        trigger: 'task.created',
        actions: [
          { type: 'create_task', title: 'x', due_in_minutes: 1, assigned_to: other.userId },
          { type: 'update_item', stage_id: other.stageIds[0] },
        ],
      }),
      400,
      'validation_failed',
    );
    expect(foreign.errors.map((error: { path: string }) => error.path)).toEqual([
      'actions.0.assigned_to',
      'actions.1.stage_id',
    ]);
    const created = await automation(tenant, {
      trigger: 'task.completed',
      conditions: { priority: 'high' },
      actions: [{ type: 'webhook', url: 'https://example.com/hook' }],
    });
    expect(created).toMatchObject({
      automation_id: expect.any(String),
      enabled: true,
      trigger: 'task.completed',
      conditions: { priority: 'high' },
    });
    const patched = (await admin(t.app, 'PATCH', `${url}/${created.automation_id}`, { enabled: false }, 200)).json();
    expect(patched.enabled).toBe(false);
    expectProblem(
      await admin(t.app, 'PATCH', `/companies/${other.companyId}/automations/${created.automation_id}`, {
        enabled: true,
      }),
      404,
      'not_found',
    );
    await admin(t.app, 'DELETE', `${url}/${created.automation_id}`, undefined, 204);
    expect((await admin(t.app, 'GET', url, undefined, 200)).json()).toEqual([]);
  });
});

describe('automations on task events', () => {
  it('create_task makes one follow-up on the same item for the same user, and the run is recorded', async () => {
    const tenant = await createTenant(t.app);
    const rule = await automation(tenant, {
      trigger: 'task.completed',
      conditions: { task_type: 'call' },
      actions: [{ type: 'create_task', title: 'Send summary', due_in_minutes: 60, task_type: 'email' }],
    });
    const item = await createItem(t.app, tenant);
    const task = (
      await ext(t.app, tenant.key, 'POST', '/tasks', {
        title: 'Call',
        due_at: due,
        task_type: 'call',
        item_id: item.item_id,
      })
    ).json();
    const other = (
      await ext(t.app, tenant.key, 'POST', '/tasks', { title: 'Mail', due_at: due, task_type: 'email' })
    ).json();
    await ext(t.app, tenant.key, 'PATCH', `/tasks/${other.task_id}`, { is_completed: true }); // condition does not match
    await ext(t.app, tenant.key, 'PATCH', `/tasks/${task.task_id}`, { is_completed: true });
    const followUps = await waitFor(async () => {
      const found = await tasksOf(tenant.companyId, { title: 'Send summary' });
      return found.length > 0 ? found : undefined;
    });
    expect(followUps).toHaveLength(1);
    expect(followUps![0]).toMatchObject({ item_id: item.item_id, assigned_to: tenant.userId, task_type: 'email' });
    const runs = await waitForRuns(
      t.app,
      tenant,
      rule.automation_id,
      (listed) => listed.length === 1 && listed[0]?.status === 'succeeded',
    );
    expect(runs![0]).toMatchObject({
      automation_id: rule.automation_id,
      event_type: 'task.completed',
      status: 'succeeded',
      error: null,
      depth: 0,
    });
  });

  it('a retried job creates the follow-up only once', async () => {
    const tenant = await createTenant(t.app);
    const rule = await automation(tenant, {
      trigger: 'task.updated',
      actions: [{ type: 'create_task', title: 'Once only', due_in_minutes: 5 }],
    });
    const services = t.app.services;
    const event: EventEnvelope = {
      event_id: 'evt_retry_test_000000000001',
      type: 'task.updated',
      company_id: tenant.companyId,
      occurred_at: new Date().toISOString(),
      actor: { type: 'system' },
      data: {
        task_id: 'tsk_x',
        assigned_to: tenant.userId,
        created_by: tenant.userId,
        item_id: null,
        task_type: 'to_do',
        priority: 'none',
      },
    };
    const deps = {
      automations: t.app.repos.automations,
      tasks: services.tasks,
      items: services.items,
      enqueueDelivery: async () => {},
      logger: pino({ level: 'silent' }),
    };
    expect(await processAutomationEvent(event, deps)).toBe(1);
    expect(await processAutomationEvent(event, deps)).toBe(0); // the redelivered job finds the run done
    // A crash after the action but before the run was marked done: the action itself is idempotent.
    await t.db
      .collection('automation_runs')
      .updateOne({ _id: `${rule.automation_id}:${event.event_id}` as never }, { $set: { status: 'running' } });
    expect(await processAutomationEvent(event, deps)).toBe(1);
    expect(await tasksOf(tenant.companyId, { title: 'Once only' })).toHaveLength(1);
    const runs = await t.db.collection('automation_runs').find({ automation_id: rule.automation_id }).toArray();
    expect(runs).toHaveLength(1);
    expect(runs[0]).toMatchObject({ status: 'succeeded', attempts: 2 });
  });

  it('update_item moves the linked item and bumps its version', async () => {
    const tenant = await createTenant(t.app);
    await automation(tenant, {
      trigger: 'task.completed',
      actions: [{ type: 'update_item', stage_id: tenant.stageIds[2], status_id: tenant.statusIds[1] }],
    });
    const moved = await completeTaskOnNewItem(tenant, 2);
    expect(moved).toMatchObject({ stage: tenant.stageIds[2], status: tenant.statusIds[1], version: 2 });
  });

  // The test stand-in answers unsorted finds in a random order (shuffleUnsorted), as MongoDB may.
  it('automations triggered by one event run oldest first, so the newest one has the last word', async () => {
    const tenant = await createTenant(t.app);
    const rules = [];
    for (const stage of [tenant.stageIds[1], tenant.stageIds[2], tenant.stageIds[0]]) {
      rules.push(
        await automation(tenant, { trigger: 'task.completed', actions: [{ type: 'update_item', stage_id: stage }] }),
      );
    }
    const repository = new AutomationsRepository(t.db);
    for (let read = 0; read < 5; read++) {
      const triggered = await repository.triggeredBy(tenant.companyId, 'task.completed');
      expect(triggered.map((rule) => rule._id)).toEqual(rules.map((rule) => rule.automation_id));
    }
    const moved = await completeTaskOnNewItem(tenant, 4);
    expect(moved.stage).toBe(tenant.stageIds[0]);
  });

  it('a chain of automations stops at depth 3', async () => {
    const tenant = await createTenant(t.app);
    const rule = await automation(tenant, {
      trigger: 'task.created',
      actions: [{ type: 'create_task', title: 'Next', due_in_minutes: 1 }],
    });
    await ext(t.app, tenant.key, 'POST', '/tasks', { title: 'Origin', due_at: due });
    const chain = await waitFor(async () => {
      const found = await tasksOf(tenant.companyId);
      return found.length >= 4 ? found : undefined;
    }, 10_000);
    // Every task's task.created went through the automations worker (the last one's at depth 3 too):
    // had that one run the rule, a fifth task would exist by now.
    const ids = await Promise.all(must(chain, 'the chain').map((task) => eventIdsOf(t, String(task._id))));
    await eventsFinished(t, 'automations', ids.flat());
    expect(await tasksOf(tenant.companyId)).toHaveLength(4);
    const runs = await automationRuns(t.app, tenant, rule.automation_id);
    expect(runs.map((run) => run.depth as number).sort()).toEqual([0, 1, 2]);
  });
});
