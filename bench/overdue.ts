// `npm run bench:overdue`: one overdue scan over 100,000 tasks of which 10,000 are overdue. Not a test.
// MongoDB: MONGO_URL (a fresh database, dropped afterwards), else the stand-in in a child process, so that
// this process's memory figures are the scan's own and not the stand-in's copy of the collection.
// Redis: REDIS_URL, else a private redis-server when installed, else events stay in the outbox.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createInterface } from 'node:readline';
import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import { Redis } from 'ioredis';
import { MongoClient, type Document } from 'mongodb';
import { pino } from 'pino';
import { createEventPublisher } from '../src/container.js';
import { EVENT_QUEUES } from '../src/contracts/jobs.js';
import { type TaskDoc } from '../src/contracts/tasks.js';
import { hasRedisServerBinary, PrivateRedisServer } from '../src/dev/redis-server.js';
import { EventsRepository } from '../src/events/repository.js';
import { newId } from '../src/shared/ids.js';
import { createQueue } from '../src/shared/queues.js';
import { scanOverdueTasks, type OverdueScanDeps } from '../src/tasks/overdue.js';
import { TasksRepository } from '../src/tasks/repository.js';
import { compiled } from './children.js';

const TOTAL = 100_000;
const OVERDUE = 10_000;
const CHUNK = 5_000;
const MB = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MB`;

/** `npm run mongo:standin` on a free port; resolves with its URI once it accepts connections. */
async function spawnStandin(): Promise<{ uri: string; child: ChildProcess }> {
  const child = spawn(process.execPath, [compiled('src/dev/mongo-standin/cli.ts'), '--port', '0'], {
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  for await (const line of createInterface({ input: child.stdout })) {
    if (line.startsWith('ready ')) return { uri: line.slice('ready '.length), child };
  }
  throw new Error('the MongoDB stand-in did not start');
}

const standin = process.env.MONGO_URL ? undefined : await spawnStandin();
const redisServer = !process.env.REDIS_URL && hasRedisServerBinary() ? await PrivateRedisServer.start() : undefined;
const redisUrl = process.env.REDIS_URL ?? redisServer?.url;
const client = await MongoClient.connect(process.env.MONGO_URL ?? standin!.uri);
const db = client.db(`bench_overdue_${randomUUID().slice(0, 8)}`);
const logger = pino({ level: 'warn' });
console.log(
  `mongo: ${standin ? 'stand-in (child process)' : 'MONGO_URL'}; redis: ${redisUrl ?? 'none (events stay in the outbox)'}; database ${db.databaseName}`,
);

// Overdue: open and past due. The rest must not fire: 30% completed and past due, the others due in the future.
function taskAt(index: number, now: number): TaskDoc {
  const overdue = index < OVERDUE;
  const completed = !overdue && index % 3 === 0;
  const dueAt = new Date(overdue || completed ? now - (index + 1) * 1_000 : now + (index + 1) * 60_000);
  const at = new Date(now - 86_400_000);
  return {
    _id: newId('task'),
    company_id: `cmp_bench${index % 50}`,
    title: `Task ${index}`,
    due_at: dueAt,
    assigned_to: 'usr_bench',
    description: null,
    priority: 'none',
    task_type: 'call',
    item_id: null,
    duration_minutes: null,
    reminder_minutes: null,
    notes: null,
    is_completed: completed,
    created_by: 'usr_bench',
    completed_at: completed ? at : null,
    created_at: at,
    updated_at: at,
    revision: 1,
    overdue_fired_for: null,
  };
}

await TasksRepository.ensureIndexes(db);
const tasks = new TasksRepository(db, new EventsRepository(db));
const seedStart = performance.now();
for (let offset = 0; offset < TOTAL; offset += CHUNK) {
  const now = Date.now();
  await db.collection<TaskDoc>('tasks').insertMany(
    Array.from({ length: CHUNK }, (_, i) => taskAt(offset + i, now)),
    { ordered: false },
  );
  process.stdout.write(`\rseeding ${offset + CHUNK}/${TOTAL}`);
}
console.log(` in ${((performance.now() - seedStart) / 1000).toFixed(1)} s`);

if (!standin) {
  const plan = await tasks.overdueBatch(new Date(), 500).explain('executionStats');
  const stages: string[] = [];
  for (
    let stage: Document | undefined = plan.queryPlanner.winningPlan.queryPlan ?? plan.queryPlanner.winningPlan;
    stage;
    stage = stage.inputStage
  ) {
    stages.push(stage.indexName ? `${stage.stage}(${stage.indexName})` : stage.stage);
  }
  const stats = plan.executionStats;
  console.log(
    `query plan of one batch: ${stages.join(' <- ')}; keys examined ${stats.totalKeysExamined}, docs examined ${stats.totalDocsExamined}, returned ${stats.nReturned}`,
  );
} else {
  console.log('query plan: not available on the stand-in (no explain); set MONGO_URL to a real MongoDB');
}

const connection = redisUrl ? new Redis(redisUrl, { enableOfflineQueue: false, maxRetriesPerRequest: 1 }) : undefined;
connection?.on('error', () => {});
if (connection) await new Promise((resolve) => connection.once('ready', resolve));
const prefix = `bench${randomUUID().slice(0, 8)}`;
const queuePublisher = connection ? createEventPublisher(db, { connection, prefix }, logger) : undefined;
const publisher: OverdueScanDeps['publisher'] = queuePublisher ?? {
  publishAndClear: async () => Promise.reject(new Error('no Redis')),
};

// Peak heap includes garbage not yet collected; the live heap (sampled right after a forced GC) is what
// the scan actually holds, and must stay flat however many tasks are overdue.
v8.setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
gc();
const baseline = process.memoryUsage();
const peak = { rss: baseline.rss, heapUsed: baseline.heapUsed, liveHeap: baseline.heapUsed };
const sampler = setInterval(() => {
  const usage = process.memoryUsage();
  peak.rss = Math.max(peak.rss, usage.rss);
  peak.heapUsed = Math.max(peak.heapUsed, usage.heapUsed);
}, 10);
const liveSampler = setInterval(() => {
  gc();
  peak.liveHeap = Math.max(peak.liveHeap, process.memoryUsage().heapUsed);
}, 500);
const scanStart = performance.now();
const result = await scanOverdueTasks({ tasks, publisher, logger }, new Date());
const scanMs = performance.now() - scanStart;
clearInterval(sampler);
clearInterval(liveSampler);

const firedInDb = await db.collection('tasks').countDocuments({ overdue_fired_for: { $ne: null } });
console.log(
  `scan: ${(scanMs / 1000).toFixed(2)} s, fired ${result.fired} (in MongoDB: ${firedInDb}) in ${result.batches} batches, unpublished ${result.unpublished}`,
);
const growth = (key: 'rss' | 'heapUsed' | 'liveHeap') =>
  `${MB(peak[key])} (+${MB(peak[key] - (key === 'liveHeap' ? baseline.heapUsed : baseline[key]))})`;
console.log(
  `memory (before the scan: RSS ${MB(baseline.rss)}, heap ${MB(baseline.heapUsed)}): peak RSS ${growth('rss')}, peak heap ${growth('heapUsed')}, peak live heap after GC ${growth('liveHeap')}`,
);

await queuePublisher?.close();
if (connection)
  for (const name of EVENT_QUEUES) await createQueue(name, { connection, prefix }).obliterate({ force: true });
connection?.disconnect();
await db.dropDatabase();
await client.close();
standin?.child.kill('SIGTERM');
await redisServer?.stop();
