import { Writable } from 'node:stream';
import { Queue, type Job } from 'bullmq';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureIndexes } from '../../src/repositories.js';
import { queuePrefixFor } from '../../src/shared/redis.js';
import { overdueTickJobId, type OverdueScanResult } from '../../src/tasks/overdue.js';
import { startOverdue } from '../../workers/overdue.js';
import { createWorkerContext } from '../../workers/start.js';
import { buildTestApp, startTestWorkers, uniqueName, type TestApp } from '../helpers/app.js';
import { admin, createTask, createTenant, ext } from '../helpers/fixtures.js';
import { automationRuns } from '../helpers/hooks.js';
import { waitFor } from '../helpers/wait.js';
import { insertOpenTasks } from './seed.js';
import type { OverdueTickJob } from '../../src/contracts/jobs.js';

type TickJob = Job<OverdueTickJob, OverdueScanResult>;

let t: TestApp;
let workers: { close(): Promise<void> };
let ticks: Queue<OverdueTickJob, OverdueScanResult>;
beforeAll(async () => {
  t = await buildTestApp({ RATE_LIMIT_MAX: '1000000', OVERDUE_SCAN_CRON: '* * * * * *' }, { publisher: true });
  workers = await startTestWorkers(t.config, t.db, ['relay', 'automations', 'overdue']);
  ticks = new Queue('overdue', { connection: t.redis, prefix: t.config.QUEUE_PREFIX });
});
afterAll(async () => {
  await ticks?.close();
  await workers?.close();
  await t?.close();
});

/**
 * Waits until a tick at or after `time` has been scanned. Scans run one at a time in tick order, so
 * every earlier tick's scan has finished too.
 */
async function scannedThrough(queue: Queue<OverdueTickJob, OverdueScanResult>, time: Date): Promise<void> {
  const done = async () => (await queue.getCompleted()).some((job) => new Date(job.data.tick) >= time);
  await waitFor(done, 15_000, 50);
}

/** The tick jobs a queue kept once finished (an hour), by the time their scan started. */
async function finishedTicks(queue: Queue<OverdueTickJob, OverdueScanResult>): Promise<TickJob[]> {
  const jobs: TickJob[] = await queue.getJobs(['completed', 'failed']);
  return jobs.sort((a, b) => a.processedOn! - b.processedOn!);
}

const firedBy = (jobs: TickJob[]) => jobs.reduce((sum, job) => sum + (job.returnvalue?.fired ?? 0), 0);

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

    // Two more ticks scanned, room for a (wrong) second fire: the scans together fired the one task once.
    await scannedThrough(ticks, new Date(Date.now() + 2_000));
    const scanned = await finishedTicks(ticks);
    expect(scanned.filter((job) => job.failedReason)).toEqual([]);
    expect(firedBy(scanned)).toBe(1);
    expect(await chases()).toBe(1);
    const runs = await automationRuns(t.app, tenant, rule.automation_id);
    expect(runs).toHaveLength(1);
    expect(runs[0]).toMatchObject({ event_type: 'task.overdue', status: 'succeeded' });
    const tasks = t.db.collection('tasks');
    expect(await tasks.findOne({ _id: open.task_id })).toMatchObject({ overdue_fired_for: new Date(dueAt) });
    expect(await tasks.findOne({ _id: done.task_id })).toMatchObject({ overdue_fired_for: null });
  });

  it('two processes add each tick, and it is scanned once; two scans never run at once', async () => {
    // Two role instances of their own (queue prefix, database), out of reach of this file's workers.
    const config = { ...t.config, QUEUE_PREFIX: queuePrefixFor(t.config.REDIS_URL, uniqueName('q')) };
    const db = t.mongoClient.db(uniqueName('t'));
    await ensureIndexes(db);
    const count = 1_500;
    await insertOpenTasks(
      db,
      'cmp_two',
      'usr_two',
      Array.from({ length: count }, () => new Date(Date.now() - 60_000)),
    );
    const queue = new Queue<OverdueTickJob, OverdueScanResult>('overdue', {
      connection: t.redis,
      prefix: config.QUEUE_PREFIX,
    });
    // Paused until three ticks wait, so the scans meet a backlog and two idle workers.
    await queue.pause();
    const logger = pino({ level: 'silent' });
    const contexts = [1, 2].map(() => createWorkerContext({ config, db, logger }));
    const roles = await Promise.all(contexts.map((context) => startOverdue(context)));
    try {
      expect(await waitFor(async () => (await queue.getWaitingCount()) >= 3, 10_000)).toBe(true);
      await queue.resume();
      const fired = () => db.collection('tasks').countDocuments({ overdue_fired_for: { $ne: null } });
      expect(await waitFor(async () => (await fired()) === count, 30_000, 100)).toBe(true);
      await scannedThrough(queue, new Date(Date.now() + 2_000));
      expect(roles.map((role) => role.state?.())).toEqual(['running', 'running']);
    } finally {
      await Promise.all(roles.map((role) => role.close()));
      await Promise.all(contexts.map((context) => context.close()));
    }
    try {
      const scanned = await finishedTicks(queue);
      expect(scanned.filter((job) => job.failedReason)).toEqual([]);
      // One job per tick, named by it, run once: both processes added every tick.
      expect(scanned.map((job) => job.id)).toEqual(scanned.map((job) => overdueTickJobId(new Date(job.data.tick))));
      expect(scanned.every((job) => job.attemptsStarted === 1)).toBe(true);
      expect(firedBy(scanned)).toBe(count);
      // Global concurrency 1: each scan started after the one before had finished...
      expect(await queue.getGlobalConcurrency()).toBe(1);
      for (let i = 1; i < scanned.length; i++)
        expect(scanned[i]!.processedOn).toBeGreaterThanOrEqual(scanned[i - 1]!.finishedOn!);
      // ...though later ticks were added while a scan ran (they waited rather than started beside it).
      expect(scanned.some((job, i) => i > 0 && job.timestamp < scanned[i - 1]!.finishedOn!)).toBe(true);
    } finally {
      await queue.obliterate({ force: true });
      await queue.close();
      await db.dropDatabase();
    }
  }, 60_000);

  it('skips ticks while Redis is unreachable, logging it once, reports failing, and closes cleanly', async () => {
    const lines: Array<{ level: number; msg: string }> = [];
    const logger = pino(
      { level: 'debug' },
      new Writable({ write: (chunk, _encoding, done) => void (lines.push(JSON.parse(String(chunk))), done()) }),
    );
    const db = t.mongoClient.db(uniqueName('t')); // out of reach of this file's running workers
    await ensureIndexes(db);
    const [taskId] = await insertOpenTasks(db, 'cmp_unreachable', 'usr_unreachable', [new Date(Date.now() - 60_000)]);
    const context = createWorkerContext({ config: { ...t.config, REDIS_URL: 'redis://127.0.0.1:1' }, db, logger });
    const role = await startOverdue(context);
    // Three ticks skipped, each one logged at debug level.
    const skipped = () => lines.filter((line) => line.msg === 'overdue tick skipped').length;
    expect(await waitFor(() => skipped() >= 3, 10_000, 20)).toBe(true);
    expect(role.state?.()).toBe('failing');
    await role.close();
    await context.close();
    expect(await db.collection('tasks').findOne({ _id: taskId as never })).toMatchObject({ overdue_fired_for: null });
    expect(lines.filter((line) => line.msg.includes('Redis unreachable'))).toHaveLength(1);
    await db.dropDatabase();
  });
});
