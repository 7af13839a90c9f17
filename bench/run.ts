// `npm run bench [-- --quick] [-- --profile[=perf]] [-- --only=crud,batch,overhead,trips,conventional,tracing,history,export,webhooks,feed,recovery,memory,overdue]`
// Starts its own web, worker and baseline processes against MONGO_URL (else the stand-in in a child
// process) and a private redis-server, seeds, runs each scenario against its bare baseline and prints
// one markdown table. Every child process is stopped at the end, on failure, on Ctrl-C and at the deadline.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { EVENT_QUEUES } from '../src/contracts/jobs.js';
import { createQueue } from '../src/shared/queues.js';
import { Children } from './children.js';
import { cpuMeter } from './cpu.js';
import { parseOptions, type BenchOptions } from './options.js';
import { topSelfTime } from './profile.js';
import { BenchReceiver } from './receiver.js';
import { renderTable, type Row } from './report.js';
import { RssSampler } from './rss.js';
import { runBatchScenario } from './scenarios/batch.js';
import { runConventionalScenarios } from './scenarios/conventional.js';
import { runCrudScenarios } from './scenarios/crud.js';
import { runFeedLagScenario } from './scenarios/feed.js';
import { runExportScenario, runHistoryScenarios } from './scenarios/history.js';
import { runMemorySoak } from './scenarios/memory.js';
import { runMongoTripScenarios } from './scenarios/mongo-trips.js';
import { runOverdueBench } from './scenarios/overdue.js';
import { runOverheadScenarios } from './scenarios/overhead.js';
import { runRecoveryScenarios } from './scenarios/recovery.js';
import { runTracingScenario } from './scenarios/tracing.js';
import { runWebhookScenarios } from './scenarios/webhooks.js';
import { SEEDED_ITEM_SOURCE, seed } from './seed.js';
import { startStack, type Stack } from './stack.js';

const options = parseOptions(process.argv.slice(2));
const children = new Children();

let stopping = false;
async function abort(reason: string, code: number): Promise<never> {
  if (!stopping) {
    stopping = true;
    process.stderr.write(`\nbench: ${reason}; stopping every child process\n`);
    await children.cleanup();
  }
  process.exit(code);
}
process.once('SIGINT', () => void abort('interrupted', 130));
process.once('SIGTERM', () => void abort('terminated', 143));
// An error thrown outside main's await (an emitter's 'error' with no listener) would exit past the deferred
// releases: the private redis-server, not a child the exit handler below can kill, was left running once.
process.once('uncaughtException', (error) => {
  console.error(error);
  void abort('crashed', 1);
});
process.on('exit', () => children.killAllNow());
const deadline = setTimeout(
  () => void abort(`deadline of ${options.deadlineSeconds} s reached`, 1),
  options.deadlineSeconds * 1000,
);

/**
 * Events, tasks and items of the scenarios before (tens of thousands of each), dropped from the queues and deleted
 * from MongoDB before each comparison group and the worker scenarios. Left in `events` as unfinished, the
 * worker's first reconciliation would put every one back on the queues, among the later scenarios' events; left in
 * the stand-in, they are documents its single thread keeps collecting garbage over, so later rows would measure its
 * pauses and the order of the scenarios rather than the servers. Nothing later reads them.
 */
async function dropEarlierScenarioRecords(stack: Stack): Promise<void> {
  for (const name of EVENT_QUEUES) {
    const queue = createQueue(name, { connection: stack.redis, prefix: stack.queuePrefix });
    await queue.obliterate({ force: true });
    await queue.close();
  }
  await stack.db.collection('events').deleteMany({});
  await stack.db.collection('tasks').deleteMany({});
  // The items the CRUD and batch rows created (some 250,000); the seeded ones stay.
  await stack.db.collection('items').deleteMany({ source: { $ne: SEEDED_ITEM_SOURCE } });
}

/** Top self-time functions of each profiled process's main thread (thread id 0 in the file name). */
function printProfiles(outDir: string): void {
  for (const name of [
    'web',
    'baseline',
    'conventional',
    'web-info',
    'web-untraced',
    'web-traced',
    'web-sampled',
    'worker',
    'bare-worker',
    'mongo',
  ]) {
    const dir = join(outDir, name);
    if (!existsSync(dir)) continue;
    for (const file of readdirSync(dir).filter((entry) => /\.\d+\.0\.\d+\.cpuprofile$/.test(entry))) {
      console.log(`\nCPU profile of the ${name} process (${join(dir, file)}):`);
      console.log(topSelfTime(join(dir, file), 30).join('\n'));
    }
  }
}

function describe(stack: Stack, opts: BenchOptions): string {
  return [
    `mode ${opts.quick ? '--quick' : 'full'}; ${opts.runs} run(s) of ${opts.runSeconds} s per side after ${opts.warmupSeconds} s warm-up; ${opts.connections} connections${opts.rate ? `, both sides at ${opts.rate} req/s (--rate)` : ''}`,
    `MongoDB: ${stack.mongo.kind === 'stand-in' ? 'the in-memory stand-in (child process) — figures measure the stand-in; the ratios are what matter' : 'MONGO_URL'}; Redis: private redis-server`,
    `machine: ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, node ${process.version}; logs and profiles in ${opts.outDir}`,
  ].join('\n');
}

async function main(): Promise<void> {
  const started = Date.now();
  const groups = options.groups;
  console.log(
    `npm run bench${options.quick ? ' -- --quick' : ''}: starting the stand-in, Redis, web and baseline processes`,
  );
  const stack = await startStack(options, children);
  console.log(describe(stack, options));
  const sampler = new RssSampler().start();
  sampler.watch('web', stack.web.child.pid, stack.web.url);

  const seedStart = Date.now();
  const seeded = await seed(stack, options.items);
  console.log(
    `seeded 2 companies through the admin API and ${options.items.toLocaleString('en-US')} items by bulk insert in ${((Date.now() - seedStart) / 1000).toFixed(1)} s`,
  );
  const context = { stack, seeded, options, sampler };
  const measuring = cpuMeter.snapshot();
  const loadBefore = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');

  const rows: Row[] = [];
  const elapsed = () => `(${((Date.now() - started) / 1000).toFixed(0)} s)`;
  if (groups.has('crud')) rows.push(...(await runCrudScenarios(context)));
  if (groups.has('batch')) rows.push(...(await runBatchScenario(context)));
  if (groups.has('overhead')) rows.push(...(await runOverheadScenarios(context)));
  if (groups.has('trips')) rows.push(...(await runMongoTripScenarios(context)));
  for (const [group, run] of [
    ['conventional', runConventionalScenarios],
    ['tracing', runTracingScenario],
    ['history', runHistoryScenarios],
    ['export', runExportScenario],
  ] as const) {
    if (!groups.has(group)) continue;
    await dropEarlierScenarioRecords(stack);
    rows.push(...(await run(context)));
  }
  console.log(`request scenarios done ${elapsed()}`);
  if (groups.has('webhooks') || groups.has('memory') || groups.has('feed') || groups.has('recovery')) {
    // The worker starts only now: on this 2-core machine it would otherwise compete with the web
    // process during the request scenarios (in production it runs on its own machine).
    await dropEarlierScenarioRecords(stack);
    const worker = await stack.startWorker();
    sampler.watch('worker', worker.pid, stack.workerMetrics?.url);
    const receiver = await BenchReceiver.start();
    children.defer(() => receiver.close());
    // The soak goes first: it judges the steady state at a steady load. After the 20,000-event
    // backlog the worker gives back the heap that burst grew at some moment during the soak (V8's
    // memory reducer), a drop of a third that reads as "not flat" although nothing leaks.
    const soak = groups.has('memory') ? await runMemorySoak(context, sampler) : [];
    // Without the memory sampler's /metrics scrapes (every 5 s, judged in the soak only): each reads the
    // worker's process and queue gauges, CPU that would count against our deliveries where the bare worker,
    // which serves no metrics, pays nothing.
    if (groups.has('webhooks')) {
      rows.push(...(await sampler.withoutScrapes(() => runWebhookScenarios(context, receiver))));
    }
    rows.push(...soak);
    if (groups.has('feed')) rows.push(...(await runFeedLagScenario(context)));
    if (groups.has('recovery')) rows.push(...(await runRecoveryScenarios(context)));
    console.log(`worker scenarios done ${elapsed()}`);
  }
  sampler.stop();
  sampler.writeCsv(join(options.outDir, 'rss.csv'));
  const usage =
    `CPU during the scenarios (% of one core, ${cpus().length} cores): ${cpuMeter.since(measuring)}; load average before: ${loadBefore}` +
    ' — "others" is everything not started by the benchmark; when it is high the figures are unreliable';
  await stack.close();

  if (options.profile === 'v8') printProfiles(options.outDir);
  if (groups.has('overdue')) rows.push(...(await runOverdueBench(children)));

  console.log(
    `\n## npm run bench${options.quick ? ' -- --quick' : ''} (${new Date().toISOString().slice(0, 16)}Z, ${((Date.now() - started) / 1000).toFixed(0)} s)\n`,
  );
  console.log(`${describe(stack, options)}\n${usage}`.replace(/^/gm, '> ') + '\n');
  console.log(renderTable(rows, options.runs));
}

try {
  await main();
  clearTimeout(deadline);
  await children.cleanup();
  process.exit(0);
} catch (error) {
  console.error(error);
  await abort('failed', 1);
}
