import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compiledTree, REPO_ROOT } from '../../scripts/compiled-tree.js';
import { createEventPublisher } from '../../src/container.js';
import { relayPendingEvents } from '../../src/events/relay.js';
import { ensureIndexes } from '../../src/repositories.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';
import { sleep, waitFor } from '../helpers/wait.js';
import { insertOpenTasks } from './seed.js';
import type { EventEnvelope } from '../../src/contracts/envelope.js';

const RUN_MS = 10_000;

let env: TestEnv;
beforeAll(async () => {
  env = await createTestEnv();
  await ensureIndexes(env.db);
});
afterAll(async () => env?.close());

interface ScanLog {
  pid: number;
  tick: string;
  fired: number;
}
let ready = 0;

/** The worker (`dist/workers/main.js` of the compiled tree) as a real process with only the overdue role, on this file's database and queue prefix. */
function spawnOverdueWorker(tree: string, scans: ScanLog[]): ChildProcess {
  const child = spawn(process.execPath, [`${tree}/dist/workers/main.js`], {
    cwd: REPO_ROOT,
    env: {
      ...process.env,
      MONGO_URL: env.config.MONGO_URL!,
      MONGO_DB: env.config.MONGO_DB,
      REDIS_URL: env.config.REDIS_URL,
      QUEUE_PREFIX: env.config.QUEUE_PREFIX,
      WORKERS: 'overdue',
      OVERDUE_SCAN_CRON: '* * * * * *',
      LOG_LEVEL: 'info',
      NODE_ENV: 'test',
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  // pino JSON lines; the scans that fired something say which tick they claimed.
  createInterface({ input: child.stdout }).on('line', (line) => {
    if (!line.startsWith('{')) return;
    const entry = JSON.parse(line);
    if (entry.msg === 'worker process ready') ready++;
    if (entry.fired !== undefined) scans.push({ pid: entry.pid, tick: entry.tick, fired: entry.fired });
  });
  return child;
}

function stop(child: ChildProcess): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((resolve) => {
    child.once('exit', (code) => resolve(code));
    child.kill('SIGTERM');
  });
}

describe('three worker processes running the overdue role', () => {
  it('fire each of 500 overdue tasks exactly once over 10 s', async () => {
    const scans: ScanLog[] = [];
    const tree = await compiledTree();
    const workers = [1, 2, 3].map(() => spawnOverdueWorker(tree, scans));
    expect(await waitFor(() => ready === 3, 20_000)).toBe(true);
    const start = Date.now();
    // Due times spread over the first 5 s, so many ticks (claimed by different processes) have work.
    const ids = await insertOpenTasks(
      env.db,
      'cmp_overdue',
      'usr_overdue',
      Array.from({ length: 500 }, (_, i) => new Date(start + i * 10)),
    );
    try {
      const fired = () => env.db.collection('tasks').countDocuments({ overdue_fired_for: { $ne: null } });
      expect(await waitFor(async () => (await fired()) === 500, 25_000, 200)).toBe(true);
      await sleep(Math.max(0, start + RUN_MS - Date.now()));
      expect(await Promise.all(workers.map(stop))).toEqual([0, 0, 0]);

      // A relay pass moves whatever a scan left in its tasks' outboxes (the queues may not have taken it) to the
      // event store, which then holds every task.overdue recorded; a double fire shows as two event ids.
      const logger = pino({ level: 'silent' });
      const relay = createEventPublisher(env.db, { connection: env.redis, prefix: env.config.QUEUE_PREFIX }, logger, {
        sequencer: false,
      });
      try {
        await relayPendingEvents(env.db, relay, logger);
      } finally {
        await relay.close();
      }
      const events = new Map<string, EventEnvelope>();
      for (const doc of await env.db.collection('events').find({ company_id: 'cmp_overdue' }).toArray())
        events.set(String(doc._id), doc.event as EventEnvelope);
      const perTask = new Map<string, number>();
      for (const event of events.values())
        if (event.type === 'task.overdue')
          perTask.set(String(event.data.task_id), (perTask.get(String(event.data.task_id)) ?? 0) + 1);
      expect(perTask.size).toBe(500);
      expect(new Set(perTask.keys())).toEqual(new Set(ids));
      expect([...perTask.values()].every((count) => count === 1)).toBe(true);
      // Each tick was scanned by one process only, and the fires add up.
      expect(new Set(scans.map((scan) => scan.tick)).size).toBe(scans.length);
      expect(scans.reduce((sum, scan) => sum + scan.fired, 0)).toBe(500);
    } finally {
      await Promise.all(workers.map(stop));
    }
  }, 60_000);
});
