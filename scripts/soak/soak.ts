import { execFileSync } from 'node:child_process';
import { Queue } from 'bullmq';
import { MongoClient } from 'mongodb';
import { QUEUE_NAMES } from '../../src/shared/queues.js';
import { CountingReceiver } from './receiver.js';
import { logDir, SoakStack, stopProcess } from './stack.js';
import { newStats, runLoop, type WorkloadTenant } from './workload.js';

export interface SoakOptions {
  durationMs: number;
  companies: number;
  concurrency: number;
  log?: (line: string) => void;
}

export interface SoakReport {
  durationMs: number;
  requests: number;
  byStatus: Record<string, number>;
  serverErrors: number;
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
  rssMiB: Record<string, { min: number; max: number; last: number }>;
  faults: string[];
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function rssMiB(pid: number | undefined): number | undefined {
  if (!pid) return undefined;
  try {
    return Math.round(Number(execFileSync('ps', ['-o', 'rss=', '-p', String(pid)], { encoding: 'utf8' }).trim()) / 1024);
  } catch {
    return undefined;
  }
}

async function seedTenants(base: string, adminToken: string, count: number, hookUrl: string): Promise<WorkloadTenant[]> {
  const admin = async (path: string, body: unknown): Promise<any> => {
    const response = await fetch(`${base}/v1/admin${path}`, {
      method: 'POST', headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' }, body: JSON.stringify(body),
    });
    if (response.status !== 201) throw new Error(`seeding ${path}: ${response.status} ${await response.text()}`);
    return response.json();
  };
  const tenants: WorkloadTenant[] = [];
  for (let i = 0; i < count; i++) {
    const company = await admin('/companies', { name: `Soak ${i}` });
    const user = await admin(`/companies/${company.company_id}/users`, { name: 'Soak', email: `soak${i}@example.com` });
    const pipeline = await admin(`/companies/${company.company_id}/pipelines`, { name: 'P', stages: [{ name: 'A' }, { name: 'B' }, { name: 'C' }] });
    const key = await admin(`/companies/${company.company_id}/api-keys`, { name: 'soak', created_by: user.user_id });
    const hook = await fetch(`${base}/v1/ext/hooks`, {
      method: 'POST', headers: { 'x-api-key': key.key, 'content-type': 'application/json' }, body: JSON.stringify({ target_url: hookUrl, event: '*' }),
    });
    if (hook.status !== 201) throw new Error(`subscribing a hook: ${hook.status} ${await hook.text()}`);
    tenants.push({ key: key.key, pipelineId: pipeline.pipeline_id, stageIds: pipeline.stages.map((stage: { stage_id: string }) => stage.stage_id) });
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
    await stack.startInfrastructure();
    const webs = [await stack.startWeb('web-1'), await stack.startWeb('web-2')];
    let workers = [stack.startWorker('worker-1'), stack.startWorker('worker-2')];
    const live = new Set(webs);
    const bases = () => [...live].map((web) => `http://127.0.0.1:${web.port}`);
    log(`stack up (mongo ${stack.mongoUrl}); seeding ${options.companies} companies`);
    const tenants = await seedTenants(bases()[0], stack.adminToken, options.companies, receiver.url);

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
    const progress = setInterval(() => log(`${Math.round((Date.now() - started) / 1000)}s: ${stats.requests} requests, ${receiver.deliveries.size} events delivered`), 2_000);
    const stopAt = started + options.durationMs;
    const loops = Array.from({ length: options.concurrency }, () => runLoop(tenants, bases, stats, () => Date.now() >= stopAt));
    const at = (fraction: number) => sleep(Math.max(0, started + options.durationMs * fraction - Date.now()));

    const faultPlan = (async () => {
      await at(0.25);
      await stopProcess(workers[0], 'SIGKILL');
      faults.push(`${Math.round((Date.now() - started) / 1000)}s SIGKILL worker-1`);
      await sleep(1_000);
      workers = [stack.startWorker('worker-1b'), workers[1]];
      await at(0.45);
      await stack.redis.stop();
      faults.push(`${Math.round((Date.now() - started) / 1000)}s Redis stopped`);
      await sleep(1_500);
      await stack.redis.start();
      faults.push(`${Math.round((Date.now() - started) / 1000)}s Redis started`);
      await at(0.65);
      const web2 = webs[1];
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
    const queues = QUEUE_NAMES.map((name) => new Queue(name, { connection: { url: stack.redis.url }, prefix: stack.prefix }));
    const depth = async () => {
      let total = 0;
      for (const queue of queues) {
        const counts = await queue.getJobCounts('waiting', 'active', 'delayed', 'prioritized');
        total += Object.values(counts).reduce((sum, count) => sum + count, 0);
      }
      return total;
    };
    const outbox = async () => (await db.collection('items').countDocuments({ outbox_pending: true })) + (await db.collection('tasks').countDocuments({ outbox_pending: true }));
    const drainDeadline = Date.now() + 60_000;
    while (Date.now() < drainDeadline && (receiver.deliveries.size < stats.eventsExpected || (await depth()) > 0 || (await outbox()) > 0)) await sleep(250);

    const report: SoakReport = {
      durationMs: options.durationMs,
      requests: stats.requests,
      byStatus: Object.fromEntries([...stats.statuses].sort(([a], [b]) => a - b).map(([status, count]) => [String(status), count])),
      serverErrors: [...stats.statuses].filter(([status]) => status >= 500).reduce((sum, [, count]) => sum + count, 0),
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
      rssMiB: rss,
      faults,
    };
    await Promise.all(queues.map((queue) => queue.close()));
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
    `| requests | ${report.requests} (${Object.entries(report.byStatus).map(([status, count]) => `${status}: ${count}`).join(', ')}) | |`,
    `| 5xx responses | ${report.serverErrors} | 0 |`,
    `| refused connections (retried on the other web) | ${report.connectionErrors} | |`,
    `| items created / present | ${report.itemsCreated} / ${report.itemsPresent} | equal |`,
    `| tasks created / present | ${report.tasksCreated} / ${report.tasksPresent} | equal |`,
    `| events recorded / delivered at least once | ${report.eventsRecorded} / ${report.eventsDelivered} | equal |`,
    `| events delivered more than once | ${report.duplicateDeliveries} | small (at-least-once) |`,
    `| queue depth after drain | ${report.queueDepthAfterDrain} | 0 |`,
    `| outbox documents after drain | ${report.outboxAfterDrain} | 0 |`,
    ...Object.entries(report.rssMiB).map(([name, rss]) => `| RSS ${name} (MiB) | min ${rss.min}, max ${rss.max}, last ${rss.last} | flat |`),
  ];
  return [...lines, '', `faults: ${report.faults.join('; ')}`, `process logs: ${logDir}`].join('\n');
}
