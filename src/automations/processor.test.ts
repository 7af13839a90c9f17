import { MongoServerError } from 'mongodb';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { ValidationError } from '../shared/errors.js';
import { followUpTaskId, processAutomationEvent, type AutomationDeps } from './processor.js';
import { MAX_AUTOMATION_DEPTH } from './schemas.js';
import type { Actor } from '../contracts/auth-context.js';
import type { EventEnvelope } from '../contracts/envelope.js';
import type { DeliveryJob } from '../contracts/jobs.js';
import type { CreateTaskBody, TaskResponse } from '../contracts/tasks.js';
import type { AutomationDoc, AutomationRunDoc } from './repository.js';
import type { AutomationAction, AutomationConditions } from './schemas.js';

const at = new Date('2026-11-24T09:00:00Z');

const task: TaskResponse = {
  task_id: 'tsk_1',
  title: 'Call Acme',
  due_at: '2026-11-24T10:00:00.000Z',
  assigned_to: 'usr_assignee',
  description: null,
  priority: 'none',
  task_type: 'call',
  item_id: 'itm_1',
  duration_minutes: null,
  reminder_minutes: null,
  notes: null,
  is_completed: true,
  created_by: 'usr_creator',
  completed_at: '2026-11-24T09:00:00.000Z',
  created_at: '2026-11-24T08:00:00.000Z',
  updated_at: '2026-11-24T09:00:00.000Z',
};

const event = (overrides: Partial<EventEnvelope> = {}): EventEnvelope => ({
  event_id: 'evt_1',
  type: 'task.completed',
  company_id: 'cmp_1',
  occurred_at: '2026-11-24T09:00:00.000Z',
  actor: { type: 'api_key', id: 'key_1' },
  data: task,
  ...overrides,
});

const automation = (
  id: string,
  actions: AutomationAction[],
  conditions: AutomationConditions | null = null,
  rest: Partial<AutomationDoc> = {},
): AutomationDoc => ({
  _id: id,
  company_id: 'cmp_1',
  name: id,
  enabled: true,
  trigger: 'task.completed',
  conditions,
  actions,
  created_at: at,
  updated_at: at,
  ...rest,
});

interface Call {
  port: 'tasks.create' | 'items.update' | 'enqueueDelivery';
  args: unknown[];
}

/**
 * The processor's ports in memory: the automations and their runs (a run succeeded is never started again, as
 * the repository's upsert refuses it), the tasks and items services as far as actions use them, the delivery
 * queue, and a logger whose lines are kept.
 */
function world(automations: AutomationDoc[]) {
  const runs = new Map<string, AutomationRunDoc>();
  const calls: Call[] = [];
  const logLines: Array<Record<string, unknown>> = [];
  const failures: { tasks: Error[]; items: Error[] } = { tasks: [], items: [] };
  let triggeredByCalls = 0;
  const deps: AutomationDeps = {
    automations: {
      async triggeredBy(companyId, trigger) {
        triggeredByCalls++;
        return automations
          .filter((doc) => doc.company_id === companyId && doc.trigger === trigger && doc.enabled && !doc.deleted_at)
          .sort((a, b) => a._id.localeCompare(b._id));
      },
      async startRun(doc, started, depth) {
        const runId = `${doc._id}:${started.event_id}`;
        const run = runs.get(runId);
        if (run?.status === 'succeeded') return null;
        runs.set(runId, {
          _id: runId,
          company_id: doc.company_id,
          automation_id: doc._id,
          event_id: started.event_id,
          event_type: started.type,
          depth,
          started_at: run?.started_at ?? new Date(),
          status: 'running',
          error: null,
          finished_at: null,
          attempts: (run?.attempts ?? 0) + 1,
        });
        return runId;
      },
      async finishRun(companyId, runId, status, error) {
        const run = runs.get(runId);
        if (!run || run.company_id !== companyId) throw new Error(`no run ${runId} in ${companyId}`);
        Object.assign(run, { status, error, finished_at: new Date() });
      },
    },
    tasks: {
      async create(actor: Actor, body: CreateTaskBody, options: { depth: number; taskId: string }) {
        calls.push({ port: 'tasks.create', args: [actor, body, options] });
        const failure = failures.tasks.shift();
        if (failure) throw failure;
        return { task_id: options.taskId };
      },
    },
    items: {
      async update(actor, itemId, changes, ifMatch, options) {
        calls.push({ port: 'items.update', args: [actor, itemId, changes, ifMatch, options] });
        const failure = failures.items.shift();
        if (failure) throw failure;
        return {};
      },
    },
    async enqueueDelivery(job: DeliveryJob, jobId: string) {
      calls.push({ port: 'enqueueDelivery', args: [job, jobId] });
    },
    logger: pino({ level: 'info' }, { write: (line: string) => void logLines.push(JSON.parse(line)) }),
  };
  const runsOf = () =>
    [...runs.values()].map((run) => ({
      id: run._id,
      status: run.status,
      error: run.error,
      attempts: run.attempts,
      depth: run.depth,
    }));
  return { deps, calls, runsOf, failures, logLines, triggeredBy: () => triggeredByCalls };
}

const actorOf = (automationId: string) => ({
  companyId: 'cmp_1',
  userId: 'usr_creator',
  cause: { type: 'automation', id: automationId },
});

describe('processAutomationEvent', () => {
  it('runs the matching automations in order, once per event: a second delivery of the event does nothing more', async () => {
    const { deps, calls, runsOf } = world([
      automation('aut_2', [{ type: 'update_item', stage_id: 'stg_won', status_id: 'sts_closed' }], {
        task_type: 'call',
      }),
      automation('aut_1', [
        { type: 'create_task', title: 'Send the summary', due_in_minutes: 90, priority: 'high', task_type: 'email' },
        { type: 'create_task', title: 'Check in', due_in_minutes: 0, assigned_to: 'usr_other' },
      ]),
      automation('aut_3', [{ type: 'webhook', url: 'https://hooks.example/x' }], { priority: 'urgent' }), // no match
      automation('aut_4', [{ type: 'webhook', url: 'https://hooks.example/y' }], null, { enabled: false }),
      automation('aut_5', [{ type: 'webhook', url: 'https://hooks.example/z' }], null, { trigger: 'task.created' }),
      automation('aut_6', [{ type: 'webhook', url: 'https://hooks.example/w' }], null, { company_id: 'cmp_2' }),
    ]);

    expect(await processAutomationEvent(event(), deps)).toBe(2);
    expect(calls).toEqual([
      {
        port: 'tasks.create',
        args: [
          actorOf('aut_1'),
          {
            title: 'Send the summary',
            due_at: new Date('2026-11-24T10:30:00.000Z'), // 90 minutes after the event, not after this run
            assigned_to: 'usr_assignee',
            item_id: 'itm_1',
            task_type: 'email',
            priority: 'high',
          },
          { depth: 1, taskId: followUpTaskId('aut_1', 'evt_1', 0) },
        ],
      },
      {
        port: 'tasks.create',
        args: [
          actorOf('aut_1'),
          {
            title: 'Check in',
            due_at: new Date('2026-11-24T09:00:00.000Z'),
            assigned_to: 'usr_other',
            item_id: 'itm_1',
          },
          { depth: 1, taskId: followUpTaskId('aut_1', 'evt_1', 1) },
        ],
      },
      {
        port: 'items.update',
        args: [actorOf('aut_2'), 'itm_1', { stage_id: 'stg_won', status_id: 'sts_closed' }, undefined, { depth: 1 }],
      },
    ]);
    expect(runsOf()).toEqual([
      { id: 'aut_1:evt_1', status: 'succeeded', error: null, attempts: 1, depth: 0 },
      { id: 'aut_2:evt_1', status: 'succeeded', error: null, attempts: 1, depth: 0 },
    ]);

    expect(await processAutomationEvent(event(), deps)).toBe(0);
    expect(calls).toHaveLength(3);
    expect(runsOf().map((run) => run.attempts)).toEqual([1, 1]);
  });

  it('follow-up task ids are fixed by (automation, event, action) and distinct otherwise', () => {
    const id = followUpTaskId('aut_1', 'evt_1', 0);
    expect(id).toMatch(/^tsk_[0-9a-f]{24}$/);
    expect(followUpTaskId('aut_1', 'evt_1', 0)).toBe(id);
    expect(
      new Set([
        id,
        followUpTaskId('aut_1', 'evt_1', 1),
        followUpTaskId('aut_1', 'evt_2', 0),
        followUpTaskId('aut_2', 'evt_1', 0),
      ]).size,
    ).toBe(4);
  });

  it('carries the chain depth on, and runs nothing for an event at the maximum depth', async () => {
    const { deps, calls, runsOf, logLines, triggeredBy } = world([
      automation('aut_1', [{ type: 'create_task', title: 'Next', due_in_minutes: 1 }]),
      automation('aut_2', [{ type: 'update_item', stage_id: 'stg_won' }]),
    ]);
    const deep = MAX_AUTOMATION_DEPTH - 1;
    expect(await processAutomationEvent(event({ event_id: 'evt_deep', depth: deep }), deps)).toBe(2);
    expect(calls.map((call) => call.args.at(-1))).toEqual([
      { depth: deep + 1, taskId: followUpTaskId('aut_1', 'evt_deep', 0) },
      { depth: deep + 1 },
    ]);
    expect(runsOf().map((run) => run.depth)).toEqual([deep, deep]);

    expect(await processAutomationEvent(event({ event_id: 'evt_max', depth: MAX_AUTOMATION_DEPTH }), deps)).toBe(0);
    expect(calls).toHaveLength(2);
    expect(triggeredBy()).toBe(1);
    expect(logLines.at(-1)).toMatchObject({
      event_id: 'evt_max',
      msg: 'automation chain depth reached; not running automations',
    });
  });

  it('ignores events that are not about tasks, and moves no item for a task linked to none', async () => {
    const { deps, calls, runsOf } = world([
      automation('aut_1', [{ type: 'update_item', stage_id: 'stg_won' }], null, { trigger: 'task.updated' }),
    ]);
    expect(await processAutomationEvent(event({ type: 'item.updated' }), deps)).toBe(0);
    expect(await processAutomationEvent(event({ type: 'task.updated', data: { ...task, item_id: null } }), deps)).toBe(
      1,
    );
    expect(calls).toEqual([]);
    expect(runsOf()).toEqual([{ id: 'aut_1:evt_1', status: 'succeeded', error: null, attempts: 1, depth: 0 }]);
  });

  it('a webhook action queues one delivery of the event to the URL, under a job id fixed by (automation, event, action)', async () => {
    const { deps, calls } = world([
      automation('aut_1', [
        { type: 'update_item', status_id: 'sts_closed' },
        { type: 'webhook', url: 'https://hooks.example/automation' },
      ]),
    ]);
    const completed = event();
    await processAutomationEvent(completed, deps);
    expect(calls.filter((call) => call.port === 'enqueueDelivery')).toEqual([
      {
        port: 'enqueueDelivery',
        args: [
          {
            event: completed,
            target: { kind: 'automation', automation_id: 'aut_1', url: 'https://hooks.example/automation' },
          },
          'aut_1:evt_1:1',
        ],
      },
    ]);
  });

  it("a failing action fails the job (BullMQ retries it) after the other automations' runs are recorded; the retry runs only the failed one", async () => {
    const { deps, calls, runsOf, failures, logLines } = world([
      automation('aut_1', [
        { type: 'create_task', title: 'First', due_in_minutes: 1 },
        { type: 'update_item', stage_id: 'stg_won' },
      ]),
      automation('aut_2', [{ type: 'update_item', status_id: 'sts_closed' }]),
    ]);
    const outage = new Error('connection reset');
    failures.tasks.push(outage);

    await expect(processAutomationEvent(event(), deps)).rejects.toBe(outage);
    // aut_1 stopped at its failing action; aut_2 still ran.
    expect(calls.map((call) => call.port)).toEqual(['tasks.create', 'items.update']);
    expect(calls[1]?.args[0]).toEqual(actorOf('aut_2'));
    expect(runsOf()).toEqual([
      { id: 'aut_1:evt_1', status: 'failed', error: 'action failed', attempts: 1, depth: 0 },
      { id: 'aut_2:evt_1', status: 'succeeded', error: null, attempts: 1, depth: 0 },
    ]);
    expect(logLines.at(-1)).toMatchObject({ automation_id: 'aut_1', event_id: 'evt_1', msg: 'automation run failed' });

    // The retry: aut_1 again from its first action (same task id), aut_2 not again.
    expect(await processAutomationEvent(event(), deps)).toBe(1);
    expect(calls.slice(2).map((call) => [call.port, call.args[0]])).toEqual([
      ['tasks.create', actorOf('aut_1')],
      ['items.update', actorOf('aut_1')],
    ]);
    expect(calls[2]?.args[2]).toEqual(calls[0]?.args[2]);
    expect(runsOf()[0]).toEqual({ id: 'aut_1:evt_1', status: 'succeeded', error: null, attempts: 2, depth: 0 });
  });

  it('a refused input is recorded as the run’s error and not retried; a task made by an earlier attempt counts as made', async () => {
    const { deps, calls, runsOf, failures } = world([
      automation('aut_1', [{ type: 'update_item', stage_id: 'stg_gone' }]),
      automation('aut_2', [
        { type: 'create_task', title: 'Made before', due_in_minutes: 1 },
        { type: 'webhook', url: 'https://hooks.example/after' },
      ]),
    ]);
    failures.items.push(ValidationError.single('stage', 'is not a stage of the item’s pipeline'));
    failures.tasks.push(new MongoServerError({ code: 11000, errmsg: 'E11000 duplicate key error' }));

    expect(await processAutomationEvent(event(), deps)).toBe(2);
    expect(runsOf()).toEqual([
      {
        id: 'aut_1:evt_1',
        status: 'failed',
        error: 'validation_failed: stage: is not a stage of the item’s pipeline',
        attempts: 1,
        depth: 0,
      },
      { id: 'aut_2:evt_1', status: 'succeeded', error: null, attempts: 1, depth: 0 },
    ]);
    // The duplicate task did not stop the automation's next action.
    expect(calls.map((call) => call.port)).toEqual(['items.update', 'tasks.create', 'enqueueDelivery']);
  });
});
