import { execFileSync } from 'node:child_process';
import { Queue } from 'bullmq';
import { MongoClient } from 'mongodb';
import { QUEUE_NAMES } from '../../src/contracts/jobs.js';
import { must } from '../../src/shared/must.js';
import { createWorkerRedis, queuePrefixFor } from '../../src/shared/redis.js';
import { CountingReceiver } from './receiver.js';
import { logDir, SoakStack, stopProcess } from './stack.js';
import { newStats, runLoop, type WorkloadTenant } from './workload.js';

export interface SoakOptions {
  durationMs: number;
  companies: number;
  concurrency: number;
  /** 3 web and 3 worker processes on a Redis Cluster (3 masters, a replica each); a master is killed mid-run. */
  cluster?: boolean;
  /**
   * A Redis that persists nothing: restarted with its data lost while workers run, and again while
   * every worker is stopped with a backlog queued (DECISIONS.md section 12.1).
   */
  redisVolatile?: boolean;
  log?: (line: string) => void;
}

export interface SoakReport {
  durationMs: number;
  requests: number;
  byStatus: Record<string, number>;
  serverErrors: number;
  /** The first few 5xx answers, with their problem body. */
  serverErrorSamples: string[];
  connectionErrors: number;
  itemsCreated: number;
  itemsPresent: number;
  tasksCreated: number;
  tasksPresent: number;
  eventsRecorded: number;
  eventsDelivered: number;
  duplicateDeliveries: number;
  queueDepthAfterDrain: number;
  outboxAfterDrain: number;
  /** Events in MongoDB that a consumer has not finished, after the drain. */
  unfinishedAfterDrain: number;
  redisVolatile: boolean;
  rssMiB: Record<string, { min: number; max: number; last: number }>;
  faults: string[];
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function rssMiB(pid: number | undefined): number | undefined {
  if (!pid) return undefined;
  try {
    return Math.round(
      Number(execFileSync('ps', ['-o', 'rss=', '-p', String(pid)], { encoding: 'utf8' }).trim()) / 1024,
    );
  } catch {
    return undefined;
  }
}

async function seedTenants(
  base: string,
  adminToken: string,
  count: number,
  hookUrl: string,
): Promise<WorkloadTenant[]> {
  const admin = async <Created>(path: string, body: unknown): Promise<Created> => {
    const response = await fetch(`${base}/v1/admin${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    if (response.status !== 201) throw new Error(`seeding ${path}: ${response.status} ${await response.text()}`);
    return (await response.json()) as Created;
  };
  const tenants: WorkloadTenant[] = [];
  for (let i = 0; i < count; i++) {
    const company = await admin<{ company_id: string }>('/companies', { name: `Soak ${i}` });
    const user = await admin<{ user_id: string }>(`/companies/${company.company_id}/users`, {
      name: 'Soak',
      email: `soak${i}@example.com`,
    });
    const pipeline = await admin<{ pipeline_id: string; stages: Array<{ stage_id: string }> }>(
      `/companies/${company.company_id}/pipelines`,
      {
        name: 'P',
        stages: [{ name: 'A' }, { name: 'B' }, { name: 'C' }],
      },
    );
    const key = await admin<{ key: string }>(`/companies/${company.company_id}/api-keys`, {
      name: 'soak',
      created_by: user.user_id,
    });
    const hook = await fetch(`${base}/v1/ext/hooks`, {
      method: 'POST',
      headers: { 'x-api-key': key.key, 'content-type': 'application/json' },
      body: JSON.stringify({ target_url: hookUrl, event: '*' }),
    });
    if (hook.status !== 201) throw new Error(`subscribing a hook: ${hook.status} ${await hook.text()}`);
    tenants.push({
      key: key.key,
      pipelineId: pipeline.pipeline_id,
      stageIds: pipeline.stages.map((stage) => stage.stage_id),
    });
  }
  return tenants;
}

/**
 * Two web and two worker processes under a mixed workload across many companies, while a worker is
 * SIGKILLed, Redis restarts and a web process is drained (SIGTERM) and started again.
 */
export async function runSoak(options: SoakOptions): Promise<SoakReport> {
  const log = options.log ?? (() => {});
  const stack = new SoakStack();
  const receiver = new CountingReceiver();
  const faults: string[] = [];
  const rss: SoakReport['rssMiB'] = {};
  let sampler: NodeJS.Timeout | undefined;
  try {
    await receiver.start();
    await stack.startInfrastructure({ cluster: options.cluster, volatileRedis: options.redisVolatile });
    const processCount = options.cluster ? 3 : 2;
    const webs = [];
    for (let index = 1; index <= processCount; index++) webs.push(await stack.startWeb(`web-${index}`));
    let workers = Array.from({ length: processCount }, (_, index) => stack.startWorker(`worker-${index + 1}`));
    const live = new Set(webs);
    const bases = () => [...live].map((web) => `http://127.0.0.1:${web.port}`);
    log(`stack up (mongo ${stack.mongoUrl}); seeding ${options.companies} companies`);
    const tenants = await seedTenants(
      must(bases()[0], 'a web process'),
      stack.adminToken,
      options.companies,
      receiver.url,
    );

    sampler = setInterval(() => {
      for (const managed of [...stack.processes]) {
        const value = rssMiB(managed.child.pid);
        if (value === undefined || managed.child.exitCode !== null) continue;
        const entry = (rss[managed.name] ??= { min: value, max: value, last: value });
        entry.min = Math.min(entry.min, value);
        entry.max = Math.max(entry.max, value);
        entry.last = value;
      }
    }, 2_000);

    const stats = newStats();
    const started = Date.now();
    const progress = setInterval(
      () =>
        log(
          `${Math.round((Date.now() - started) / 1000)}s: ${stats.requests} requests, ${receiver.deliveries.size} events delivered`,
        ),
      2_000,
    );
    const stopAt = started + options.durationMs;
    const loops = Array.from({ length: options.concurrency }, () =>
      runLoop(tenants, bases, stats, () => Date.now() >= stopAt),
    );
    const at = (fraction: number) => sleep(Math.max(0, started + options.durationMs * fraction - Date.now()));

    const mark = (fault: string) => faults.push(`${Math.round((Date.now() - started) / 1000)}s ${fault}`);
    const restartRedis = async (what: string) => {
      await stack.redis.stop();
      mark(`Redis stopped${what}`);
      await sleep(1_500);
      await stack.redis.start();
      mark(options.redisVolatile ? 'Redis started with its data lost' : 'Redis started');
    };
    const faultPlan = (async () => {
      await at(0.25);
      await stopProcess(must(workers[0], 'worker-1'), 'SIGKILL');
      faults.push(`${Math.round((Date.now() - started) / 1000)}s SIGKILL worker-1`);
      await sleep(1_000);
      workers = [stack.startWorker('worker-1b'), ...workers.slice(1)];
      await at(0.45);
      if (stack.cluster) {
        // The master holding the queues' slot: the hardest one to lose.
        const master = await stack.cluster.masterPortFor(queuePrefixFor(stack.redisUrl, stack.prefix));
        await stack.cluster.killNode(master);
        faults.push(`${Math.round((Date.now() - started) / 1000)}s SIGKILL Redis master :${master}`);
        await stack.cluster.waitUntilHealthy(30_000);
        faults.push(`${Math.round((Date.now() - started) / 1000)}s cluster healthy again (replica promoted)`);
      } else {
        await restartRedis('');
      }
      if (options.redisVolatile && !stack.cluster) {
        // Worker-stopped variant: a backlog is queued, Redis loses it, the workers come back.
        await at(0.55);
        await Promise.all(workers.map((worker) => stopProcess(worker, 'SIGTERM')));
        mark('every worker stopped (backlog queues up)');
        await at(0.65);
        await restartRedis(' with the backlog queued');
        await sleep(1_000);
        workers = workers.map((_, index) => stack.startWorker(`worker-${index + 1}c`));
        mark('workers back');
      }
      await at(options.redisVolatile ? 0.75 : 0.65);
      const web2 = must(webs[1], 'web-2');
      live.delete(web2); // drained from rotation first, as a load balancer does before SIGTERM
      await stopProcess(web2, 'SIGTERM');
      faults.push(`${Math.round((Date.now() - started) / 1000)}s SIGTERM web-2 (exit ${web2.child.exitCode})`);
      live.add(await stack.startWeb('web-2b', web2.port));
      faults.push(`${Math.round((Date.now() - started) / 1000)}s web-2 started again`);
    })();
    await Promise.all([...loops, faultPlan]);
    clearInterval(progress);
    log(`load done: ${stats.requests} requests; draining`);

    // Drain: every recorded event delivered, queues and outbox empty (bounded wait).
    const client = await MongoClient.connect(stack.mongoUrl);
    const db = client.db(stack.dbName);
    const queueConnection = createWorkerRedis(stack.redisUrl);
    queueConnection.on('error', () => {}); // a killed node is reported; the client moves on
    const queues = QUEUE_NAMES.map(
      (name) => new Queue(name, { connection: queueConnection, prefix: queuePrefixFor(stack.redisUrl, stack.prefix) }),
    );
    const depth = async () => {
      let total = 0;
      for (const queue of queues) {
        const counts = await queue.getJobCounts('waiting', 'active', 'delayed', 'prioritized');
        total += Object.values(counts).reduce((sum, count) => sum + count, 0);
      }
      return total;
    };
    const outbox = async () =>
      (await db.collection('items').countDocuments({ outbox_pending: true })) +
      (await db.collection('tasks').countDocuments({ outbox_pending: true }));
    const unfinished = () => db.collection('events').countDocuments({ pending: { $ne: [] } });
    const drainDeadline = Date.now() + 90_000;
    while (
      Date.now() < drainDeadline &&
      (receiver.deliveries.size < stats.eventsExpected ||
        (await depth()) > 0 ||
        (await outbox()) > 0 ||
        (await unfinished()) > 0)
    )
      await sleep(250);

    const report: SoakReport = {
      durationMs: options.durationMs,
      requests: stats.requests,
      byStatus: Object.fromEntries(
        [...stats.statuses].sort(([a], [b]) => a - b).map(([status, count]) => [String(status), count]),
      ),
      serverErrors: [...stats.statuses].filter(([status]) => status >= 500).reduce((sum, [, count]) => sum + count, 0),
      serverErrorSamples: stats.serverErrorSamples,
      connectionErrors: stats.connectionErrors,
      itemsCreated: stats.itemsCreated.size,
      itemsPresent: await db.collection('items').countDocuments({ _id: { $in: [...stats.itemsCreated] as never[] } }),
      tasksCreated: stats.tasksCreated.size,
      tasksPresent: await db.collection('tasks').countDocuments({ _id: { $in: [...stats.tasksCreated] as never[] } }),
      eventsRecorded: stats.eventsExpected,
      eventsDelivered: receiver.deliveries.size,
      duplicateDeliveries: receiver.duplicates(),
      queueDepthAfterDrain: await depth(),
      outboxAfterDrain: await outbox(),
      unfinishedAfterDrain: await unfinished(),
      redisVolatile: options.redisVolatile ?? false,
      rssMiB: rss,
      faults,
    };
    await Promise.all(queues.map((queue) => queue.close()));
    queueConnection.disconnect();
    await client.close();
    return report;
  } finally {
    clearInterval(sampler);
    await stack.stopAll();
    await receiver.close();
  }
}

export function formatReport(report: SoakReport): string {
  const lines = [
    `| figure | value | target |`,
    `|---|---|---|`,
    `| duration | ${Math.round(report.durationMs / 1000)} s | |`,
    `| requests | ${report.requests} (${Object.entries(report.byStatus)
      .map(([status, count]) => `${status}: ${count}`)
      .join(', ')}) | |`,
    `| 5xx responses | ${report.serverErrors} | 0 |`,
    `| refused connections (retried on the other web) | ${report.connectionErrors} | |`,
    `| items created / present | ${report.itemsCreated} / ${report.itemsPresent} | equal |`,
    `| tasks created / present | ${report.tasksCreated} / ${report.tasksPresent} | equal |`,
    `| Redis | ${report.redisVolatile ? 'persists nothing (restarts lose its data)' : 'append-only file'} | |`,
    `| events recorded / delivered at least once | ${report.eventsRecorded} / ${report.eventsDelivered} | equal |`,
    `| events lost | ${Math.max(0, report.eventsRecorded - report.eventsDelivered)} | 0 |`,
    `| events delivered more than once | ${report.duplicateDeliveries} | small (at-least-once) |`,
    `| queue depth after drain | ${report.queueDepthAfterDrain} | 0 |`,
    `| outbox documents after drain | ${report.outboxAfterDrain} | 0 |`,
    `| events a consumer has not finished, after drain | ${report.unfinishedAfterDrain} | 0 |`,
    ...Object.entries(report.rssMiB).map(
      ([name, rss]) => `| RSS ${name} (MiB) | min ${rss.min}, max ${rss.max}, last ${rss.last} | flat |`,
    ),
  ];
  const serverErrors = report.serverErrorSamples.map((sample) => `5xx: ${sample}`);
  return [...lines, '', `faults: ${report.faults.join('; ')}`, ...serverErrors, `process logs: ${logDir}`].join('\n');
}
