import {
  FlowProducer,
  Queue,
  Worker,
  type ConnectionOptions,
  type Job,
  type JobsOptions,
  type WorkerOptions,
} from 'bullmq';
import { jobTraceMetadata } from '../telemetry/events.js';
import { queueTelemetry } from '../telemetry/state.js';
import type { EventEnvelope, WebhookEnvelope } from '../events/envelope.js';
import type { Logger } from './logger.js';

/** A webhook to send: for a REST hook subscription or an automation's `webhook` action. */
export interface DeliveryJob {
  event: WebhookEnvelope;
  target: { kind: 'hook'; hook_id: string } | { kind: 'automation'; automation_id: string; url: string };
  /** Attempts made before this job existed (the fan-out's first one), so the numbering carries on. */
  attempts_before?: number;
  /** Runs of this job that found its hook at its in-flight limit and waited instead of attempting (not attempts). */
  deferrals?: number;
}

/**
 * The events of one move out of the outbox (the web process's after-response move): one job per
 * event queue carries them all, so a move costs Redis two job adds however many events it holds.
 */
export interface EventBatch {
  events: EventEnvelope[];
}

/** An event queue's job: a move's batch (EVENT_BATCH_JOB), or one event (added again, or by the relay). */
export type EventJobData = EventBatch | EventEnvelope;

export function isEventBatch(data: EventJobData): data is EventBatch {
  return Array.isArray((data as Partial<EventBatch>).events);
}

/** The one registry of queue names and the payload each carries; both ends are type-checked against it. */
export interface JobPayloads {
  /** Every event, for the automation worker (it acts on task events). */
  automations: EventJobData;
  /** Every event, fanned out by the hooks worker to the company's matching hooks. */
  'hook-fanout': EventJobData;
  /** One signed POST to one target. */
  deliveries: DeliveryJob;
  /** One erasure of one record (src/erasure/job.ts); its status record is in MongoDB. */
  erasures: ErasureJob;
  /** One overdue scan for one cron tick (src/tasks/overdue.ts); its job id names the tick. */
  overdue: OverdueTickJob;
}

export interface ErasureJob {
  erasure_id: string;
  company_id: string;
}

export interface OverdueTickJob {
  /** The cron tick's time, ISO 8601. */
  tick: string;
}

export type QueueName = keyof JobPayloads;
export const QUEUE_NAMES: QueueName[] = ['automations', 'hook-fanout', 'deliveries', 'erasures', 'overdue'];
export const EVENT_QUEUES = ['automations', 'hook-fanout'] as const satisfies readonly QueueName[];
export type EventQueue = (typeof EVENT_QUEUES)[number];

/** Completed jobs are kept a day, so a re-published event_id is still recognised and not run twice. */
export const DEFAULT_JOB_OPTIONS: JobsOptions = {
  attempts: 5,
  backoff: { type: 'exponential', delay: 1_000 },
  removeOnComplete: { age: 24 * 3600, count: 200_000 },
  removeOnFail: { age: 7 * 24 * 3600 },
};

export interface QueueSettings {
  connection: ConnectionOptions;
  prefix: string;
  /** BullMQ lockDuration; a crashed worker's jobs are taken over after about this long. */
  lockMs?: number;
  /** Workers log each job's outcome here (job id, queue, attempt). */
  logger?: Logger;
}

/**
 * A queue handle for adding and inspecting jobs. It skips BullMQ's Redis version check (an INFO at
 * start): on the web process's request-path connection, with its 1 s command timeout, that check
 * could time out on a busy machine and surface as an unhandled rejection, and the workers' own
 * connections run the check anyway.
 */
export function createQueue<N extends QueueName>(
  name: N,
  settings: QueueSettings,
): Queue<JobPayloads[N], unknown, string> {
  return new Queue<JobPayloads[N], unknown, string>(name, {
    connection: settings.connection,
    prefix: settings.prefix,
    defaultJobOptions: DEFAULT_JOB_OPTIONS,
    skipVersionCheck: true,
    telemetry: queueTelemetry(),
  });
}

/** A handle on every queue, for adding and inspecting jobs; one set per process, closed with it. */
export type Queues = { [N in QueueName]: Queue<JobPayloads[N], unknown, string> };

/** Every queue's handle on one connection; an outage surfaces as a failed add, never as a crash. */
export function createQueues(settings: QueueSettings): Queues {
  const queues: Queues = {
    automations: createQueue('automations', settings),
    'hook-fanout': createQueue('hook-fanout', settings),
    deliveries: createQueue('deliveries', settings),
    erasures: createQueue('erasures', settings),
    overdue: createQueue('overdue', settings),
  };
  for (const queue of Object.values(queues)) queue.on('error', () => {});
  return queues;
}

export async function closeQueues(queues: Queues): Promise<void> {
  await Promise.all(Object.values(queues).map((queue) => queue.close()));
}

export type Processor<N extends QueueName> = (job: Job<JobPayloads[N]>) => Promise<unknown>;

export function startWorker<N extends QueueName>(
  name: N,
  processor: Processor<N>,
  settings: QueueSettings,
  options: Partial<WorkerOptions> = {},
): Worker<JobPayloads[N]> {
  const worker = new Worker<JobPayloads[N]>(name, processor, {
    connection: settings.connection,
    prefix: settings.prefix,
    concurrency: 10,
    lockDuration: settings.lockMs ?? 30_000,
    stalledInterval: Math.max(500, Math.floor((settings.lockMs ?? 30_000) / 2)),
    // Every processor is idempotent (effects once per event or delivery), so a job whose worker died is
    // safe to run again; BullMQ's default of 1 fails a job for good when a crash and an outage come close together.
    maxStalledCount: 5,
    // Each job runs in a `process` span continuing the trace its producer put in the job (when tracing).
    telemetry: queueTelemetry(),
    ...options,
  });
  const logger = settings.logger;
  if (logger) {
    worker.on('completed', (job) =>
      logger.debug({ queue: name, job_id: job.id, attempt: job.attemptsMade, outcome: 'completed' }, 'job'),
    );
    worker.on('failed', (job, error) =>
      logger.warn({ queue: name, job_id: job?.id, attempt: job?.attemptsMade, outcome: 'failed', err: error }, 'job'),
    );
    worker.on('stalled', (jobId) => logger.warn({ queue: name, job_id: jobId, outcome: 'stalled' }, 'job'));
    // An outage makes every reconnect attempt fail; one line per 30 s is enough to see it.
    let lastErrorLog = 0;
    worker.on('error', (error) => {
      if (Date.now() - lastErrorLog < 30_000) return;
      lastErrorLog = Date.now();
      logger.warn({ queue: name, err: error }, 'worker connection error');
    });
  }
  return worker;
}

/**
 * Adds events to every event queue, all in one atomic round trip (BullMQ's pattern for bulk adds
 * across queues: a FlowProducer of jobs without children).
 */
export function createEventProducer(settings: QueueSettings): FlowProducer {
  // No version check, for the same reason as createQueue: it runs on the web's request-path connection.
  return new FlowProducer({
    connection: settings.connection,
    prefix: settings.prefix,
    skipVersionCheck: true,
    telemetry: queueTelemetry(),
  });
}

/** Job name of an event added again (relay of unqueued events, reconciler): its consumers check MongoDB first. */
export const REPUBLISHED_JOB = 'republished';

/** Whether the queue still holds the job, waiting, running, done or failed (kept a day once done). */
export async function jobStillQueued(queue: Pick<Queue, 'getJobState'>, jobId: string): Promise<boolean> {
  return (await queue.getJobState(jobId)) !== 'unknown';
}

/** Job name of a move's batch (EventBatch). */
export const EVENT_BATCH_JOB = 'events';

/** One batch job: its id (the same in each event queue) and its events. */
export interface PlannedBatch {
  jobId: string;
  events: EventEnvelope[];
}

/**
 * A batch job holds at most this many bytes of events (JSON); a larger move goes out as several batch
 * jobs, in the same round trip. Keeps each job a size Redis and a worker handle at ease (item events
 * may carry up to 1 MiB of item each).
 */
export const EVENT_BATCH_MAX_BYTES = 1024 * 1024;

/**
 * Splits a move's events into batch jobs of at most EVENT_BATCH_MAX_BYTES (at least one event each),
 * each with its job id: `batch-<its first event_id>`, which no other batch has (the web process moves
 * each event it recorded once). Recorded with the events (`publish_job`), so a later copy of one of
 * them can tell whether its batch is still queued.
 */
export function planEventBatches(events: EventEnvelope[], sizeOf: (event: EventEnvelope) => number): PlannedBatch[] {
  const batches: PlannedBatch[] = [];
  let current: EventEnvelope[] = [];
  let bytes = 0;
  for (const event of events) {
    const size = sizeOf(event);
    if (current.length > 0 && bytes + size > EVENT_BATCH_MAX_BYTES) {
      batches.push({ jobId: eventBatchJobId(current), events: current });
      current = [];
      bytes = 0;
    }
    current.push(event);
    bytes += size;
  }
  if (current.length > 0) batches.push({ jobId: eventBatchJobId(current), events: current });
  return batches;
}

/** The job id of a batch: `batch-<its first event_id>`. */
export function eventBatchJobId(events: readonly EventEnvelope[]): string {
  return `batch-${events[0]!.event_id}`;
}

/**
 * Adds a move's batches to every event queue (one job per batch and queue), in one atomic round trip.
 * Each job continues the trace of its first event that has one (the publish span's, when it is in
 * that trace); its consumers run every other event in that event's own trace.
 */
export async function publishEventBatches(producer: FlowProducer, batches: PlannedBatch[]): Promise<void> {
  await producer.addBulk(
    batches.flatMap(({ jobId, events }) => {
      const traced = events.find((event) => event.traceparent);
      const metadata = traced ? jobTraceMetadata(traced) : undefined;
      return EVENT_QUEUES.map((queueName) => ({
        name: EVENT_BATCH_JOB,
        queueName,
        data: { events },
        opts: { ...DEFAULT_JOB_OPTIONS, jobId, ...(metadata ? { telemetry: { metadata } } : {}) },
      }));
    }),
  );
}

/**
 * Adds each event to the queues of the consumers still to run it, with jobId = event_id, so a
 * re-publish of an event BullMQ still holds is a no-op.
 */
export async function publishEvents(
  producer: FlowProducer,
  events: Array<{ event: EventEnvelope; consumers: readonly EventQueue[] }>,
  options: { republished?: boolean } = {},
): Promise<void> {
  await producer.addBulk(
    events.flatMap(({ event, consumers }) =>
      // A FlowProducer does not apply a queue's defaults; each job carries them.
      consumers.map((queueName) => {
        // Each job continues its own event's trace, whichever traces the batch mixes.
        const metadata = jobTraceMetadata(event);
        return {
          name: options.republished ? REPUBLISHED_JOB : event.type,
          queueName,
          data: event,
          opts: { ...DEFAULT_JOB_OPTIONS, jobId: event.event_id, ...(metadata ? { telemetry: { metadata } } : {}) },
        };
      }),
    ),
  );
}
