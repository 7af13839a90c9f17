import {
  FlowProducer,
  Queue,
  Worker,
  type ConnectionOptions,
  type Job,
  type JobsOptions,
  type WorkerOptions,
} from 'bullmq';
import { queueTelemetry } from '../telemetry/state.js';
import type { Logger } from './logger.js';

/**
 * Each queue's name and the payload its jobs carry. Empty here: src/contracts/jobs.ts fills it in by
 * declaration merging, so both ends of every queue are type-checked against the job contracts while
 * this floor imports nothing above it.
 */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type
export interface QueueRegistry {}
// eslint-disable-next-line @typescript-eslint/no-redundant-type-constituents -- keys are strings once the registry is filled in
export type QueueName = keyof QueueRegistry & string;

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
): Queue<QueueRegistry[N], unknown, string> {
  return new Queue<QueueRegistry[N], unknown, string>(name, {
    connection: settings.connection,
    prefix: settings.prefix,
    defaultJobOptions: DEFAULT_JOB_OPTIONS,
    skipVersionCheck: true,
    telemetry: queueTelemetry(),
  });
}

/** A handle on every queue, for adding and inspecting jobs; one set per process, closed with it. */
export type Queues = { [N in QueueName]: Queue<QueueRegistry[N], unknown, string> };

/** Every queue's handle on one connection; an outage surfaces as a failed add, never as a crash. */
export function createQueues(names: readonly QueueName[], settings: QueueSettings): Queues {
  const queues = Object.fromEntries(names.map((name) => [name, createQueue(name, settings)])) as Queues;
  for (const queue of Object.values(queues)) queue.on('error', () => {});
  return queues;
}

export async function closeQueues(queues: Queues): Promise<void> {
  await Promise.all(Object.values(queues).map((queue) => queue.close()));
}

export type Processor<N extends QueueName> = (job: Job<QueueRegistry[N]>) => Promise<unknown>;

export function startWorker<N extends QueueName>(
  name: N,
  processor: Processor<N>,
  settings: QueueSettings,
  options: Partial<WorkerOptions> = {},
): Worker<QueueRegistry[N]> {
  const worker = new Worker<QueueRegistry[N]>(name, processor, {
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

/** Whether the queue still holds the job, waiting, running, done or failed (kept a day once done). */
export async function jobStillQueued(queue: Pick<Queue, 'getJobState'>, jobId: string): Promise<boolean> {
  return (await queue.getJobState(jobId)) !== 'unknown';
}
