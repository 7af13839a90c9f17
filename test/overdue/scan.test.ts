import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEventPublisher } from '../../src/container.js';
import { relayPendingEvents } from '../../src/events/relay.js';
import { EventsRepository } from '../../src/events/repository.js';
import { scanOverdueTasks, type OverdueScanDeps } from '../../src/tasks/overdue.js';
import { TasksRepository } from '../../src/tasks/repository.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { feedOf } from '../helpers/events.js';
import { createTask, createTenant, ext, type Tenant } from '../helpers/fixtures.js';
import { insertOpenTasks } from './seed.js';
import type { EventEnvelope } from '../../src/contracts/envelope.js';

// The scan on its own (no cron, no queues): each test looks only at its own tasks, since a scan covers every company.
let t: TestApp;
let tenant: Tenant;
let published: EventEnvelope[];
let deps: OverdueScanDeps;

beforeAll(async () => {
  t = await buildTestApp({ RATE_LIMIT_MAX: '1000000' });
  tenant = await createTenant(t.app);
  published = [];
  deps = {
    tasks: new TasksRepository(t.db, new EventsRepository(t.db)),
    publisher: {
      publishAndClear: async (_collection, documents) =>
        void published.push(...documents.flatMap((document) => document.events)),
    },
    logger: pino({ level: 'silent' }),
  };
});
afterAll(async () => t?.close());

const HOUR = 3_600_000;
const at = (offsetMs: number) => new Date(Date.now() + offsetMs);
const scan = (now: Date) => scanOverdueTasks(deps, now);
const overdueEvents = (taskId: string) => published.filter((event) => event.data.task_id === taskId);
const patch = (taskId: string, body: unknown) => ext(t.app, tenant.key, 'PATCH', `/tasks/${taskId}`, body);
const stored = async (taskId: string) => (await t.db.collection('tasks').findOne({ _id: taskId as never }))!;

describe('the overdue scan', () => {
  it('fires task.overdue once when an open task is past due, with the task as the API shows it', async () => {
    const task = await createTask(t.app, tenant, { due_at: at(HOUR).toISOString() });
    await scan(new Date());
    expect(overdueEvents(task.task_id)).toHaveLength(0);

    const now = at(2 * HOUR);
    await scan(now);
    await scan(at(3 * HOUR));
    const events = overdueEvents(task.task_id);
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({
      type: 'task.overdue',
      company_id: tenant.companyId,
      occurred_at: now.toISOString(),
    });
    expect(events[0]?.data).toEqual((await ext(t.app, tenant.key, 'GET', `/tasks/${task.task_id}`)).json());
    expect(events[0]?.data).toEqual(task); // updated_at and every API field unchanged
  });

  it('never fires for a task completed before its due time, and fires on reopening only if it never fired for that due time', async () => {
    const completedEarly = await createTask(t.app, tenant, { due_at: at(HOUR).toISOString() });
    await patch(completedEarly.task_id, { is_completed: true });
    await scan(at(2 * HOUR));
    expect(overdueEvents(completedEarly.task_id)).toHaveLength(0);
    await patch(completedEarly.task_id, { is_completed: false });
    await scan(at(2 * HOUR));
    expect(overdueEvents(completedEarly.task_id)).toHaveLength(1);

    const firedThenReopened = await createTask(t.app, tenant, { due_at: at(-60_000).toISOString() });
    await scan(new Date());
    await patch(firedThenReopened.task_id, { is_completed: true });
    await patch(firedThenReopened.task_id, { is_completed: false });
    await scan(at(HOUR));
    expect(overdueEvents(firedThenReopened.task_id)).toHaveLength(1);
  });

  it('re-arms when due_at moves later, and not on other changes', async () => {
    const task = await createTask(t.app, tenant, { due_at: at(-60_000).toISOString() });
    await scan(new Date());
    await patch(task.task_id, { title: 'Renamed' });
    await scan(new Date());
    expect(overdueEvents(task.task_id)).toHaveLength(1);

    const later = at(HOUR).toISOString();
    expect((await patch(task.task_id, { due_at: later })).statusCode).toBe(200);
    expect(await stored(task.task_id)).toMatchObject({ overdue_fired_for: null });
    await scan(new Date());
    expect(overdueEvents(task.task_id)).toHaveLength(1);
    await scan(at(2 * HOUR));
    await scan(at(3 * HOUR));
    const events = overdueEvents(task.task_id);
    expect(events).toHaveLength(2);
    expect(events[1]?.data).toMatchObject({ due_at: later, title: 'Renamed' });
  });

  it('fires once per due time: moving due_at back to a time it already fired for does not fire again', async () => {
    const first = at(-60_000);
    const task = await createTask(t.app, tenant, { due_at: first.toISOString() });
    await scan(new Date());
    const second = at(HOUR);
    await patch(task.task_id, { due_at: second.toISOString() });
    await scan(at(2 * HOUR));
    expect(overdueEvents(task.task_id).map((event) => event.data.due_at)).toEqual([
      first.toISOString(),
      second.toISOString(),
    ]);

    expect((await patch(task.task_id, { due_at: first.toISOString() })).statusCode).toBe(200); // back to a fired due time
    expect(await stored(task.task_id)).toMatchObject({ overdue_fired_for: first });
    await scan(at(3 * HOUR));
    expect(overdueEvents(task.task_id)).toHaveLength(2);

    const third = at(4 * HOUR);
    await patch(task.task_id, { due_at: third.toISOString() }); // a new due time re-arms
    await scan(at(5 * HOUR));
    expect(overdueEvents(task.task_id).map((event) => event.data.due_at)).toEqual(
      [first, second, third].map((due) => due.toISOString()),
    );
  });

  it('overlapping scans fire each task exactly once', async () => {
    const other = await createTenant(t.app);
    const ids = await insertOpenTasks(
      t.db,
      other.companyId,
      other.userId,
      Array.from({ length: 300 }, (_, i) => at(-i * 1_000)),
    );
    await Promise.all([1, 2, 3].map(() => scanOverdueTasks(deps, new Date(), { batchSize: 40 })));
    const mine = published.filter((event) => event.company_id === other.companyId);
    expect(mine).toHaveLength(300);
    expect(new Set(mine.map((event) => event.data.task_id))).toEqual(new Set(ids));
    expect(
      await t.db.collection('tasks').countDocuments({ company_id: other.companyId, overdue_fired_for: null }),
    ).toBe(0);
  });

  it('leaves the event for the relay when the queues cannot take it: a relay pass makes it readable, once', async () => {
    const task = await createTask(t.app, tenant, { due_at: at(-1_000).toISOString() });
    const failing: OverdueScanDeps = {
      ...deps,
      publisher: { publishAndClear: async () => Promise.reject(new Error('redis down')) },
    };
    const result = await scanOverdueTasks(failing, new Date());
    expect(result.unpublished).toBeGreaterThanOrEqual(1);
    expect(overdueEvents(task.task_id)).toHaveLength(0);
    // The relay's pass moves what the write recorded with the task; its publisher's sequencer makes it readable.
    const logger = pino({ level: 'silent' });
    const relay = createEventPublisher(t.db, { connection: t.redis, prefix: t.config.QUEUE_PREFIX }, logger, {
      sequencerLeaseMs: t.config.SEQUENCER_LEASE_MS,
    });
    try {
      await relayPendingEvents(t.db, relay, logger);
      const feed = await feedOf(t.app, tenant.key, task.task_id, 2);
      expect(feed.map((event) => event.type)).toEqual(['task.created', 'task.overdue']);
      // Fired for that due time: the next scan fires nothing more for it.
      await scanOverdueTasks(deps, new Date());
      expect(overdueEvents(task.task_id)).toHaveLength(0);
    } finally {
      await relay.close();
    }
  });
});
