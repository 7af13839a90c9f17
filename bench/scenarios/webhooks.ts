import { Queue } from 'bullmq';
import { buildEvent, type EventEnvelope } from '../../src/contracts/envelope.js';
import { EVENT_BATCH_JOB, eventBatchJobId, type EventJobData } from '../../src/contracts/jobs.js';
import { toTaskResponse } from '../../src/contracts/tasks.js';
import { OUTBOX_MOVE_INTERVAL_MS } from '../../src/events/queue-publisher.js';
import { newId } from '../../src/shared/ids.js';
import { must } from '../../src/shared/must.js';
import { createQueue, DEFAULT_JOB_OPTIONS } from '../../src/shared/queues.js';
import { waitForLine } from '../children.js';
import { cpuMeter, formatUsage, type CpuSnapshot } from '../cpu.js';
import { fire } from '../load.js';
import { BenchReceiver } from '../receiver.js';
import { int, ms, type Row } from '../report.js';
import { createTenants, type Tenant } from '../seed.js';
import { HOOK_CONCURRENCY, profileArgs } from '../stack.js';
import { json, type BenchContext } from './context.js';
import { commandCounts, difference } from './mongo-trips.js';

const BARE_QUEUE = 'bare-deliveries';
/** Our worker's CPU per delivery at most this many times the bare worker's. */
const MAX_CPU_RATIO = 1.2;
const MAX_P99_MS = 200;
const ADD_CHUNK = 500;
/**
 * Events per fan-out job for ours: what one move of the API's publisher carries at 1,000 writes/s
 * (one move per OUTBOX_MOVE_INTERVAL_MS, 25 ms). The bare worker gets one job per event.
 */
const WRITES_PER_SECOND = 1_000;
const EVENTS_PER_MOVE = (WRITES_PER_SECOND * OUTBOX_MOVE_INTERVAL_MS) / 1_000;
/** Longer than the worker's record-coalescing window (WORKER_RECORD_INTERVAL_MS): its last writes of a backlog are done by then. */
const RECORDS_SETTLE_MS = 250;
/** Companies (one hook each) the backlog's events are spread over. */
const RECEIVERS = 16;

/** A task.created envelope exactly as the API records one (occurred_at = now). */
export function taskCreatedEvent(tenant: Tenant, index: number): EventEnvelope {
  const now = new Date();
  const task = toTaskResponse({
    _id: newId('task'),
    company_id: tenant.companyId,
    title: `Follow up ${index}`,
    due_at: new Date(now.getTime() + 86_400_000),
    assigned_to: tenant.userId,
    description: null,
    priority: 'none',
    task_type: 'to_do',
    item_id: null,
    duration_minutes: null,
    reminder_minutes: null,
    notes: null,
    is_completed: false,
    created_by: tenant.userId,
    completed_at: null,
    created_at: now,
    updated_at: now,
    revision: 1,
    overdue_fired_for: null,
  });
  return buildEvent('task.created', tenant.companyId, task, { actor: { type: 'system' }, occurredAt: now });
}

/** Queue of either worker: ours takes the publisher's batches, the bare one single events. */
type EventQueue = Queue<EventJobData, unknown, string>;

/**
 * Adds `count` fresh events in bulk: to the bare queue one job per event; to ours in batches of
 * EVENTS_PER_MOVE, as the publisher adds them (batch job id, EVENT_BATCH_JOB).
 */
async function addEvents(queue: EventQueue, tenants: Tenant[], count: number, batched: boolean): Promise<void> {
  for (let offset = 0; offset < count; offset += ADD_CHUNK) {
    const events = Array.from({ length: Math.min(ADD_CHUNK, count - offset) }, (_, i) =>
      taskCreatedEvent(must(tenants[(offset + i) % tenants.length], 'a tenant'), offset + i),
    );
    if (!batched) {
      await queue.addBulk(events.map((event) => ({ name: event.type, data: event, opts: { jobId: event.event_id } })));
      continue;
    }
    const batches: EventEnvelope[][] = [];
    for (let at = 0; at < events.length; at += EVENTS_PER_MOVE) batches.push(events.slice(at, at + EVENTS_PER_MOVE));
    await queue.addBulk(
      batches.map((batch) => ({
        name: EVENT_BATCH_JOB,
        data: { events: batch },
        opts: { jobId: eventBatchJobId(batch) },
      })),
    );
  }
}

interface Throughput {
  perSecond: number;
  p50: number;
  p99: number;
  complete: boolean;
  cpu: string;
  /** CPU milliseconds the delivering process spent per delivered event. */
  cpuMsPerDelivery?: number;
}

/** A backlog of `count` events: deliveries per second from the first add to the last arrival. */
async function backlog(
  receiver: BenchReceiver,
  queue: EventQueue,
  tenants: Tenant[],
  count: number,
  deliverer: 'worker' | 'bare-worker',
  from: { cpu: CpuSnapshot; started: number } = { cpu: cpuMeter.snapshot(), started: Date.now() },
): Promise<Throughput> {
  receiver.reset();
  await addEvents(queue, tenants, count, deliverer === 'worker');
  const complete = await receiver.waitFor(count, Math.max(60_000, count * 5));
  const seconds = ((complete ? receiver.lastArrival : Date.now()) - from.started) / 1000;
  const usage = cpuMeter.usedSince(from.cpu);
  const delivererSeconds = usage.seconds.get(deliverer);
  return {
    perSecond: receiver.received / seconds,
    p50: receiver.percentile(50),
    p99: receiver.percentile(99),
    complete,
    cpu: formatUsage(usage),
    cpuMsPerDelivery:
      delivererSeconds === undefined || receiver.received === 0
        ? undefined
        : (delivererSeconds * 1000) / receiver.received,
  };
}

/**
 * Both workers given their backlog at the same moment, each with its own receiver: their CPU per
 * delivery measured through the same spell of the machine (taken in turns, a slow spell of a few
 * seconds falls on one side and can double the ratio or halve it).
 */
async function backlogsAtOnce(
  receivers: { ours: BenchReceiver; bare: BenchReceiver },
  queues: { ours: EventQueue; bare: EventQueue },
  tenants: Tenant[],
  count: number,
): Promise<Pair> {
  const from = { cpu: cpuMeter.snapshot(), started: Date.now() };
  const [ours, bare] = await Promise.all([
    backlog(receivers.ours, queues.ours, tenants, count, 'worker', from),
    backlog(receivers.bare, queues.bare, tenants, count, 'bare-worker', from),
  ]);
  return { ours, bare, cpuRatio: cpuRatioOf(ours, bare) };
}

const cpuText = (value: number | undefined) => (value === undefined ? '?' : value.toFixed(2));

interface Latency {
  events: number;
  p50: number;
  p99: number;
  complete: boolean;
}

async function settle(receiver: BenchReceiver, expected: number): Promise<Latency> {
  const complete = await receiver.waitFor(expected, 30_000);
  return { events: receiver.received, p50: receiver.percentile(50), p99: receiver.percentile(99), complete };
}

/** Ours, end to end and not backlogged: tasks created through the API at a steady rate. */
async function pacedThroughApi(context: BenchContext, receiver: BenchReceiver): Promise<Latency> {
  const { stack, seeded, options } = context;
  receiver.reset();
  const body = JSON.stringify({ title: 'Paced task', due_at: '2031-01-15T09:30:00Z' });
  const created = await fire(
    {
      url: stack.web.url,
      method: 'POST',
      headers: { 'x-api-key': seeded.hooks.key, ...json },
      body,
      requests: [{ method: 'POST', path: '/v1/ext/tasks', body }],
      overallRate: options.webhookPacedRate,
    },
    options.webhookPacedSeconds,
    4,
  );
  return settle(receiver, created.requests - created.failures);
}

/** The bare worker, not backlogged: one job added at a time at the same rate. */
async function pacedIntoQueue(context: BenchContext, receiver: BenchReceiver, queue: EventQueue): Promise<Latency> {
  const { options, seeded } = context;
  receiver.reset();
  const total = options.webhookPacedRate * options.webhookPacedSeconds;
  const started = Date.now();
  for (let index = 0; index < total; index++) {
    const wait = started + (index * 1000) / options.webhookPacedRate - Date.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    const event = taskCreatedEvent(seeded.hooks, index);
    await queue.add(event.type, event, { jobId: event.event_id });
  }
  return settle(receiver, total);
}

/**
 * The scenario measures its own events only: anything still queued (the soak's last events, or work a
 * reconciliation put back) would be delivered among them and lower the figure. Waits for that to drain,
 * and fails rather than measure behind a backlog that does not drain.
 */
async function untilDrained(queue: EventQueue): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const queued = await queue.getJobCountByTypes('waiting', 'active', 'delayed', 'prioritized', 'waiting-children');
    if (queued === 0) return;
    if (Date.now() > deadline)
      throw new Error(
        `hook-fanout still holds ${queued} jobs before the webhook scenario: it would measure behind them`,
      );
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

async function subscribe(context: BenchContext, tenant: Tenant, targetUrl: string): Promise<void> {
  const response = await fetch(`${context.stack.web.url}/v1/ext/hooks`, {
    method: 'POST',
    headers: { 'x-api-key': tenant.key, ...json },
    body: JSON.stringify({ target_url: targetUrl, event: 'task.created' }),
  });
  if (response.status !== 201) throw new Error(`subscribing the hook: ${response.status} ${await response.text()}`);
}

/** One run: each worker's backlog alone (throughput), then both at once (the CPU ratio judged). */
interface Run {
  ours: Throughput;
  bare: Throughput;
  together: Pair;
}

interface Pair {
  ours: Throughput;
  bare: Throughput;
  cpuRatio?: number;
}

/** The element with the median value of `by` (the lower middle one of an even count). */
function medianBy<T>(values: T[], by: (value: T) => number | undefined): T {
  const sorted = [...values].sort((a, b) => (by(a) ?? Infinity) - (by(b) ?? Infinity));
  return must(sorted[Math.floor((sorted.length - 1) / 2)], 'a measured run');
}

function cpuRatioOf(ours: Throughput, bare: Throughput): number | undefined {
  return ours.cpuMsPerDelivery !== undefined && bare.cpuMsPerDelivery !== undefined && bare.cpuMsPerDelivery > 0
    ? ours.cpuMsPerDelivery / bare.cpuMsPerDelivery
    : undefined;
}

/**
 * Ours: events go straight onto `hook-fanout` (as the publisher puts them), so the web process is not
 * the bottleneck; the worker fans each out to the hook and delivers it. Each of `options.webhookRuns`
 * runs gives each worker a backlog alone (throughput: the median run's) and then both a backlog at
 * once (CPU per delivery: the median of the runs' ratios). Taken in turns the CPU ratio of one run
 * moves by a factor of two with the machine's spells; loaded at once, both see the same spell.
 * Latency is measured separately at a steady rate through POST /v1/ext/tasks, end to end.
 */
export async function runWebhookScenarios(context: BenchContext, receiver: BenchReceiver): Promise<Row[]> {
  const { stack, seeded, options } = context;
  const settings = { connection: stack.redis, prefix: stack.queuePrefix };
  // Long enough for both workers to reach their steady state: after a few thousand events ours, with more code
  // for V8 to compile, still runs its first measured backlogs well above its later CPU per delivery.
  const warmup = options.quick ? 100 : 2 * options.webhookEvents;
  console.log('Webhook delivery');
  // The backlog's events belong to RECEIVERS companies, each with its hook: a worker process serves many
  // receivers, and each hook has at most HOOK_MAX_IN_FLIGHT_PER_HOOK (4) requests in flight (fairness), so
  // one hook alone would measure that limit and its receiver's latency rather than the worker.
  const tenants = [seeded.hooks, ...(await createTenants(context.stack, 'Bench Receiver', RECEIVERS - 1))];
  for (const tenant of tenants) await subscribe(context, tenant, receiver.url('/ours'));
  const fanout = createQueue('hook-fanout', settings);
  await untilDrained(fanout);

  // The bare worker posts to a receiver of its own, so both can be counted while they run at once.
  const bareReceiver = await BenchReceiver.start();
  stack.children.defer(() => bareReceiver.close());
  const receivers = { ours: receiver, bare: bareReceiver };
  const bareQueue = new Queue<EventJobData, unknown, string>(BARE_QUEUE, {
    ...settings,
    defaultJobOptions: DEFAULT_JOB_OPTIONS,
  });
  const queues = { ours: fanout, bare: bareQueue };
  const bareWorker = stack.children.spawnNode(
    'bare-webhook-worker',
    'bench/bare-webhook-worker.ts',
    {
      REDIS_URL: stack.redisUrl,
      QUEUE_PREFIX: stack.queuePrefix,
      QUEUE_NAME: BARE_QUEUE,
      CONCURRENCY: String(HOOK_CONCURRENCY),
      TARGET_URL: bareReceiver.url('/bare'),
    },
    { stdout: 'pipe', nodeArgs: profileArgs(options, 'bare-worker') },
  );
  cpuMeter.watch('bare-worker', bareWorker.pid);
  const runs: Run[] = [];
  let oursPaced!: Latency;
  let barePaced!: Latency;
  let perDelivery = '';
  let duplicates = 0;
  try {
    await waitForLine(bareWorker, 'ready', 30_000);
    await backlog(receiver, fanout, tenants, warmup, 'worker');
    await backlog(bareReceiver, bareQueue, tenants, warmup, 'bare-worker');
    const metrics = must(stack.workerMetrics, 'the worker runs');
    const commands = new Map<string, number>();
    let delivered = 0;
    for (let run = 0; run < options.webhookRuns; run++) {
      // What the previous run's backlog left to write (its last records and progress) is not this run's.
      await untilDrained(fanout);
      await new Promise((resolve) => setTimeout(resolve, RECORDS_SETTLE_MS));
      const commandsBefore = await commandCounts(metrics);
      const ours = await backlog(receiver, fanout, tenants, options.webhookEvents, 'worker');
      for (const [name, count] of difference(await commandCounts(metrics), commandsBefore))
        commands.set(name, (commands.get(name) ?? 0) + count);
      delivered += receiver.received;
      duplicates += receiver.duplicates;
      const bare = await backlog(bareReceiver, bareQueue, tenants, options.webhookEvents, 'bare-worker');
      const together = await backlogsAtOnce(receivers, queues, tenants, options.webhookEvents);
      duplicates += receiver.duplicates;
      runs.push({ ours, bare, together });
      console.log(
        `  run ${run + 1}: alone ours ${int(ours.perSecond)}/s, bare ${int(bare.perSecond)}/s (CPU/delivery ${cpuText(ours.cpuMsPerDelivery)} vs ${cpuText(bare.cpuMsPerDelivery)} ms, ${cpuText(cpuRatioOf(ours, bare))}×); ` +
          `at once ${cpuText(together.ours.cpuMsPerDelivery)} vs ${cpuText(together.bare.cpuMsPerDelivery)} ms (${cpuText(together.cpuRatio)}×); CPU at once: ${together.ours.cpu}`,
      );
    }
    perDelivery = [...commands]
      .sort((a, b) => b[1] - a[1])
      .map(([name, count]) => `${name} ${(count / Math.max(1, delivered)).toFixed(3)}`)
      .join(', ');
    console.log(`  ours: MongoDB commands per delivery: ${perDelivery || 'none'}`);
    oursPaced = await pacedThroughApi(context, receiver);
    console.log(`  ours paced: p50 ${ms(oursPaced.p50)}, p99 ${ms(oursPaced.p99)}`);
    barePaced = await pacedIntoQueue(context, bareReceiver, bareQueue);
  } finally {
    await stack.children.stop(bareWorker);
    await bareQueue.obliterate({ force: true }).catch(() => {});
    await bareQueue.close();
    await fanout.close();
  }

  const { ours } = medianBy(runs, (run) => run.ours.perSecond);
  const { bare } = medianBy(runs, (run) => run.bare.perSecond);
  const together = medianBy(runs, (run) => run.together.cpuRatio).together;
  const cpuRatio = together.cpuRatio;
  const ratio = ours.perSecond / bare.perSecond;
  const ratios = runs.map((run) => `${cpuText(run.together.cpuRatio)}×`).join(', ');
  const aloneRatios = runs.map((run) => `${cpuText(cpuRatioOf(run.ours, run.bare))}×`).join(', ');
  const incomplete = (figures: { complete: boolean }) => (figures.complete ? '' : ' (INCOMPLETE: timed out)');
  return [
    {
      scenario: `webhook delivery, ${int(options.webhookEvents)} events backlogged, 1 worker process`,
      value: `${int(ours.perSecond)} deliveries/s${incomplete(ours)} (CPU at once ${cpuText(together.ours.cpuMsPerDelivery)} vs ${cpuText(together.bare.cpuMsPerDelivery)} ms/delivery, ${cpuText(cpuRatio)}×; runs ${ratios})`,
      p50: ms(ours.p50),
      p99: ms(ours.p99),
      baseline: `${int(bare.perSecond)} deliveries/s${incomplete(bare)} (p50 ${ms(bare.p50)}, p99 ${ms(bare.p99)})`,
      ratio,
      target: `CPU/delivery ≤ ${MAX_CPU_RATIO}× bare (deliveries/s: information)`,
      pass:
        runs.every((run) => [run.ours, run.bare, run.together.ours, run.together.bare].every((one) => one.complete)) &&
        cpuRatio !== undefined &&
        cpuRatio <= MAX_CPU_RATIO,
      note:
        `Events added straight to the hook-fanout queue (as the API's publisher adds them), ${int(ADD_CHUNK)} per addBulk, spread over ${RECEIVERS} companies with one hook each (a hook has at most HOOK_MAX_IN_FLIGHT_PER_HOOK requests in flight); rate = events / (first add → last arrival). ` +
        `Ours: one fan-out job per ${EVENTS_PER_MOVE} events, a move's batch at 1,000 writes/s (hooks from the process cache, Standard Webhooks signature, POST, delivery record in MongoDB (the envelope left out once delivered), one bulk write for the attempts made together). ` +
        `Bare: one BullMQ job per event, POST only, to a receiver of its own. ${options.webhookRuns} run(s), each a backlog of each worker alone (deliveries/s and latencies: the median run's; latencies include the time queued behind the backlog) and then a backlog of each at once: CPU per delivery is judged at once, both workers through the same spell of the machine, on the median of the runs' ratios (${ratios}; alone, in turns: ${aloneRatios}). Duplicate deliveries of ours seen: ${duplicates}. ` +
        `MongoDB commands (round trips) of our worker per delivery (MONGO_COMMAND_METRICS): ${perDelivery || 'none'}. ` +
        `CPU (% of one core) during ours alone: ${ours.cpu}; during the bare worker alone: ${bare.cpu}; at once: ${together.ours.cpu}.`,
    },
    {
      scenario: `webhook latency, event occurred_at → receiver, ${options.webhookPacedRate} events/s (not backlogged)`,
      value: `${int(oursPaced.events)} events${incomplete(oursPaced)}`,
      p50: ms(oursPaced.p50),
      p99: ms(oursPaced.p99),
      baseline: `bare: p50 ${ms(barePaced.p50)}, p99 ${ms(barePaced.p99)}${incomplete(barePaced)}`,
      target: `p99 < ${MAX_P99_MS} ms`,
      pass: oursPaced.complete && oursPaced.p99 < MAX_P99_MS,
      note:
        `Ours end to end: POST /v1/ext/tasks (event recorded with the task, occurred_at set by the API) → fast-path publish → fan-out → delivery. ` +
        `Bare: a job added to its queue with occurred_at = now → POST.`,
    },
  ];
}
