import type { EventEnvelope, WebhookEnvelope } from './envelope.js';

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

export const QUEUE_NAMES: Array<keyof JobPayloads> = [
  'automations',
  'hook-fanout',
  'deliveries',
  'erasures',
  'overdue',
];
export const EVENT_QUEUES = ['automations', 'hook-fanout'] as const satisfies ReadonlyArray<keyof JobPayloads>;
export type EventQueue = (typeof EVENT_QUEUES)[number];

declare module '../shared/queues.js' {
  // The registry's entries are this file's job payloads.
  // eslint-disable-next-line @typescript-eslint/no-empty-object-type
  interface QueueRegistry extends JobPayloads {}
}

/** Job name of an event added again (relay of unqueued events, reconciler): its consumers check MongoDB first. */
export const REPUBLISHED_JOB = 'republished';

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

/** A delivery MongoDB says is waiting for an attempt, as the job that makes it. */
export interface DueDelivery {
  jobId: string;
  data: DeliveryJob;
  dueAt: Date;
}
