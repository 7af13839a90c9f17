// `npm run bench:overdue`: one overdue scan over 100,000 tasks of which 10,000 are overdue. Not a test.
// MongoDB: MONGO_URL (a fresh database, dropped afterwards), else the in-process stand-in.
// Redis: REDIS_URL, else a private redis-server when installed, else events stay in the outbox.
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { MongoClient, type Document } from 'mongodb';
import { pino } from 'pino';
import { hasRedisServerBinary, PrivateRedisServer } from '../src/dev/redis-server.js';
import { startMongoStandin } from '../src/dev/mongo-standin/index.js';
import { QueueEventPublisher } from '../src/events/queue-publisher.js';
import { newId } from '../src/shared/ids.js';
import { createQueue, EVENT_QUEUES } from '../src/shared/queues.js';
import { overdueBatchQuery, scanOverdueTasks, type OverdueScanDeps } from '../src/tasks/overdue.js';
import { TasksRepository, type TaskDoc } from '../src/tasks/repository.js';

const TOTAL = 100_000;
const OVERDUE = 10_000;
const CHUNK = 5_000;
const MB = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MB`;

const standin = process.env.MONGO_URL ? undefined : await startMongoStandin({ quiet: true });
const redisServer = !process.env.REDIS_URL && hasRedisServerBinary() ? await PrivateRedisServer.start() : undefined;
const redisUrl = process.env.REDIS_URL ?? redisServer?.url;
const client = await MongoClient.connect(process.env.MONGO_URL ?? standin!.uri);
const db = client.db(`bench_overdue_${randomUUID().slice(0, 8)}`);
const logger = pino({ level: 'warn' });
console.log(`mongo: ${standin ? 'in-process stand-in' : 'MONGO_URL'}; redis: ${redisUrl ?? 'none (events stay in the outbox)'}; database ${db.databaseName}`);

// Overdue: open and past due. The rest must not fire: 30% completed and past due, the others due in the future.
function taskAt(index: number, now: number): TaskDoc {
  const overdue = index < OVERDUE;
  const completed = !overdue && index % 3 === 0;
  const dueAt = new Date(overdue || completed ? now - (index + 1) * 1_000 : now + (index + 1) * 60_000);
  const at = new Date(now - 86_400_000);
  return {
    _id: newId('task'), company_id: `cmp_bench${index % 50}`, title: `Task ${index}`, due_at: dueAt, assigned_to: 'usr_bench',
    description: null, priority: 'none', task_type: 'call', item_id: null, duration_minutes: null, reminder_minutes: null, notes: null,
    is_completed: completed, created_by: 'usr_bench', completed_at: completed ? at : null, created_at: at, updated_at: at,
    revision: 1, overdue_fired_for: null,
  };
}

await TasksRepository.ensureIndexes(db);
const tasks = new TasksRepository(db);
const seedStart = performance.now();
for (let offset = 0; offset < TOTAL; offset += CHUNK) {
  const now = Date.now();
  await tasks.collection.insertMany(Array.from({ length: CHUNK }, (_, i) => taskAt(offset + i, now)), { ordered: false });
  process.stdout.write(`\rseeding ${offset + CHUNK}/${TOTAL}`);
}
console.log(` in ${((performance.now() - seedStart) / 1000).toFixed(1)} s`);

if (!standin) {
  const plan = await overdueBatchQuery(tasks.collection, new Date(), 500).explain('executionStats');
  const stages: string[] = [];
  for (let stage: Document | undefined = plan.queryPlanner.winningPlan.queryPlan ?? plan.queryPlanner.winningPlan; stage; stage = stage.inputStage) {
    stages.push(stage.indexName ? `${stage.stage}(${stage.indexName})` : stage.stage);
  }
  const stats = plan.executionStats;
  console.log(`query plan of one batch: ${stages.join(' <- ')}; keys examined ${stats.totalKeysExamined}, docs examined ${stats.totalDocsExamined}, returned ${stats.nReturned}`);
} else {
  console.log('query plan: not available on the stand-in (no explain); set MONGO_URL to a real MongoDB');
}

const connection = redisUrl ? new Redis(redisUrl, { enableOfflineQueue: false, maxRetriesPerRequest: 1 }) : undefined;
connection?.on('error', () => {});
if (connection) await new Promise((resolve) => connection.once('ready', resolve));
const prefix = `bench${randomUUID().slice(0, 8)}`;
const queuePublisher = connection ? new QueueEventPublisher(db, { connection, prefix }, logger) : undefined;
const publisher: OverdueScanDeps['publisher'] = queuePublisher ?? { publishAndClear: async () => Promise.reject(new Error('no Redis')) };

// The stand-in keeps the whole collection in this process's memory, so read the growth over the baseline.
global.gc?.();
const baseline = process.memoryUsage();
const peak = { rss: baseline.rss, heapUsed: baseline.heapUsed };
const sampler = setInterval(() => {
  const usage = process.memoryUsage();
  peak.rss = Math.max(peak.rss, usage.rss);
  peak.heapUsed = Math.max(peak.heapUsed, usage.heapUsed);
}, 10);
const scanStart = performance.now();
const result = await scanOverdueTasks({ tasks, publisher, logger }, new Date());
const scanMs = performance.now() - scanStart;
clearInterval(sampler);

const firedInDb = await tasks.collection.countDocuments({ overdue_fired_for: { $ne: null } });
console.log(`scan: ${(scanMs / 1000).toFixed(2)} s, fired ${result.fired} (in MongoDB: ${firedInDb}) in ${result.batches} batches, unpublished ${result.unpublished}`);
console.log(`memory: peak RSS ${MB(peak.rss)} (+${MB(peak.rss - baseline.rss)} over ${MB(baseline.rss)} before the scan), peak heap ${MB(peak.heapUsed)} (+${MB(peak.heapUsed - baseline.heapUsed)})`);

await queuePublisher?.close();
if (connection) for (const name of EVENT_QUEUES) await createQueue(name, { connection, prefix }).obliterate({ force: true });
connection?.disconnect();
await db.dropDatabase();
await client.close();
await standin?.close();
await redisServer?.stop();
