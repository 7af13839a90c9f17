import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureIndexes } from '../../src/repositories.js';
import { acquireScanLock, claimOverdueTick } from '../../src/tasks/overdue-claims.js';
import { startOverdue } from '../../workers/overdue.js';
import { createWorkerContext } from '../../workers/start.js';
import { buildTestApp, startTestWorkers, uniqueName, type TestApp } from '../helpers/app.js';
import { admin, createTask, createTenant, ext } from '../helpers/fixtures.js';
import { automationRuns } from '../helpers/hooks.js';
import { sleep, waitFor } from '../helpers/wait.js';
import { insertOpenTasks } from './seed.js';

let t: TestApp;
let workers: { close(): Promise<void> };
beforeAll(async () => {
  t = await buildTestApp({ RATE_LIMIT_MAX: '1000000', OVERDUE_SCAN_CRON: '* * * * * *' }, { publisher: true });
  workers = await startTestWorkers(t.config, t.db, ['relay', 'automations', 'overdue']);
});
afterAll(async () => {
  await workers?.close();
  await t?.close();
});

describe('the overdue worker role (1-second cron)', () => {
  it('a task due in 2 s reaches an automation exactly once within 4 s; a completed one never', async () => {
    const tenant = await createTenant(t.app);
    const rule = (
      await admin(
        t.app,
        'POST',
        `/companies/${tenant.companyId}/automations`,
        {
          name: 'chase',
          trigger: 'task.overdue',
          actions: [{ type: 'create_task', title: 'Chase', due_in_minutes: 60 }],
        },
        201,
      )
    ).json();
    const start = Date.now();
    const dueAt = new Date(start + 2_000).toISOString();
    const open = await createTask(t.app, tenant, { title: 'Open', due_at: dueAt });
    const done = await createTask(t.app, tenant, { title: 'Done', due_at: dueAt });
    expect((await ext(t.app, tenant.key, 'PATCH', `/tasks/${done.task_id}`, { is_completed: true })).statusCode).toBe(
      200,
    );

    const chases = () => t.db.collection('tasks').countDocuments({ company_id: tenant.companyId, title: 'Chase' });
    expect(await waitFor(async () => (await chases()) > 0, 4_000 - (Date.now() - start), 25)).toBe(true);
    expect(Date.now() - start).toBeLessThanOrEqual(4_000);

    await sleep(2_000); // two more ticks, room for a (wrong) second fire
    expect(await chases()).toBe(1);
    const runs = await automationRuns(t.app, tenant, rule.automation_id);
    expect(runs).toHaveLength(1);
    expect(runs[0]).toMatchObject({ event_type: 'task.overdue', status: 'succeeded' });
    const tasks = t.db.collection('tasks');
    expect(await tasks.findOne({ _id: open.task_id })).toMatchObject({ overdue_fired_for: new Date(dueAt) });
    expect(await tasks.findOne({ _id: done.task_id })).toMatchObject({ overdue_fired_for: null });
  });

  it('a tick is claimed once across processes, and no scan starts while one is running', async () => {
    const prefix = `${t.config.QUEUE_PREFIX}:claims`;
    const tick = new Date('2030-01-01T10:00:00.000Z');
    expect(await claimOverdueTick(t.redis, prefix, tick)).toBe(true);
    expect(await claimOverdueTick(t.redis, prefix, tick)).toBe(false);
    expect(await claimOverdueTick(t.redis, prefix, new Date(tick.getTime() + 1_000))).toBe(true);

    const lock = await acquireScanLock(t.redis, prefix, 300);
    expect(lock).not.toBeNull();
    await sleep(500); // renewed past its first expiry while held
    expect(await acquireScanLock(t.redis, prefix, 300)).toBeNull();
    expect(lock!.lost.aborted).toBe(false);
    await lock!.release();
    const next = await acquireScanLock(t.redis, prefix, 300);
    expect(next).not.toBeNull();
    await t.redis.del(`${prefix}:overdue:running`); // e.g. Redis restarted: the holder learns it lost the lock
    await waitFor(() => next!.lost.aborted, 1_000, 20);
    expect(next!.lost.aborted).toBe(true);
    await next!.release();
  });

  it('skips ticks while Redis is unreachable, logging it once, and closes cleanly', async () => {
    const lines: string[] = [];
    const logger = pino(
      { level: 'warn' },
      new Writable({ write: (chunk, _encoding, done) => void (lines.push(String(chunk)), done()) }),
    );
    const db = t.mongoClient.db(uniqueName('t')); // out of reach of this file's running workers
    await ensureIndexes(db);
    const [taskId] = await insertOpenTasks(db, 'cmp_unreachable', 'usr_unreachable', [new Date(Date.now() - 60_000)]);
    const context = createWorkerContext({ config: { ...t.config, REDIS_URL: 'redis://127.0.0.1:1' }, db, logger });
    const role = await startOverdue(context);
    await sleep(2_100); // two ticks at least
    await role.close();
    await context.close();
    expect(await db.collection('tasks').findOne({ _id: taskId as never })).toMatchObject({ overdue_fired_for: null });
    expect(lines.filter((line) => line.includes('Redis unreachable'))).toHaveLength(1);
    await db.dropDatabase();
  });
});
