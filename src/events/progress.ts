import { isEventBatch, REPUBLISHED_JOB, type EventJobData } from '../contracts/jobs.js';
import { WORKER_RECORD_INTERVAL_MS, Coalescer } from '../shared/coalesce.js';
import { Slots } from '../shared/slots.js';
import { inEventTrace } from '../telemetry/events.js';
import { tracingStarted } from '../telemetry/state.js';
import type { EventEnvelope } from '../contracts/envelope.js';
import type { EventConsumer, EventsRepository } from './repository.js';
import type { Job } from 'bullmq';

/**
 * Events that may wait for their records per slot of the consumer: while MongoDB stalls, sends go on (a
 * delivery needs no MongoDB), and every event sent but not recorded is sent again when its job is retried.
 * This bounds that at eight times the concurrency (400 webhooks with the default 50). An event waits for two
 * writes one after the other (its attempt's, then its progress: runAndRecord), up to 2 x 25 ms, so the slots,
 * not the records, stay the limit (8 x 50 events per ~55 ms, some 7,000 a second).
 */
const RECORDS_WAITING_PER_SLOT = 8;

/** Where a consumer's events are run: how many at once (across all its jobs), and how to tell a job still queued. */
export interface ConsumerProgressOptions {
  /** Events of this consumer in flight at once in this process, whichever jobs carry them (the worker's concurrency). */
  concurrency: number;
  /** Whether the queue still holds the job (a batch a copy of one of its events would duplicate). */
  jobExists(jobId: string): Promise<boolean>;
  minIntervalMs?: number;
}

/** What a consumer does with one event; writes handed to `alongside` complete with its progress record. */
export type EventProcessor<R> = (
  event: EventEnvelope,
  job: Job<EventJobData>,
  alongside: (write: Promise<void>) => void,
) => Promise<R>;

/**
 * Runs a consumer's events, one job's or a batch's, and records in MongoDB which events it has finished
 * (one bulk write for the events finished together), so that what is unfinished survives the loss of
 * everything Redis held.
 */
export class ConsumerProgress {
  private readonly finished: Coalescer<EventEnvelope>;
  /** Events being processed (the consumer's concurrency). */
  private readonly running: Slots;
  /** Events processed or waiting for their records (RECORDS_WAITING_PER_SLOT per slot): see runEvent. */
  private readonly unrecorded: Slots;

  constructor(
    private readonly consumer: EventConsumer,
    private readonly eventStore: EventsRepository,
    private readonly options: ConsumerProgressOptions,
  ) {
    this.finished = new Coalescer((events) => eventStore.recordFinished(events.map((event) => ({ event, consumer }))), {
      minIntervalMs: options.minIntervalMs ?? WORKER_RECORD_INTERVAL_MS,
    });
    this.running = new Slots(options.concurrency);
    this.unrecorded = new Slots(options.concurrency * RECORDS_WAITING_PER_SLOT);
  }

  /**
   * Wraps a consumer's per-event processor into the queue's. A batch runs its events side by side
   * (within the consumer's concurrency); run again (a retry, or after a crash) it runs only those not
   * yet finished. A republished copy of an event does nothing when the consumer finished it or when
   * the batch it was published in is still queued (that batch runs it). Each finished event, or one
   * whose job has used its last attempt, is recorded before BullMQ hears of the job (after the writes it
   * made alongside), so a completed job always has its records. When some events of a batch fail, the job
   * fails (and is retried) with the others recorded as finished.
   */
  track<R>(process: EventProcessor<R>): (job: Job<EventJobData>) => Promise<R | R[] | { already_finished: true }> {
    return async (job) => {
      const data = job.data;
      if (!isEventBatch(data)) {
        if (job.name === REPUBLISHED_JOB && (await this.handledElsewhere(data))) return { already_finished: true };
        return this.runEvent(data, job, process);
      }
      let events = data.events;
      if (job.attemptsStarted > 1) {
        const unfinished = await this.eventStore.unfinishedAmong(this.consumer, events);
        events = events.filter((event) => unfinished.has(event.event_id));
      }
      const traced = tracingStarted();
      const outcomes = await Promise.allSettled(
        events.map((event) =>
          this.runEvent(event, job, traced ? (...args) => inEventTrace(event, () => process(...args)) : process),
        ),
      );
      const failure = outcomes.find((outcome) => outcome.status === 'rejected');
      if (failure) throw failure.reason;
      return outcomes.map((outcome) => (outcome as PromiseFulfilledResult<R>).value);
    };
  }

  /** A copy is redundant when the event is finished, or when the batch that carries it is still queued. */
  private async handledElsewhere(event: EventEnvelope): Promise<boolean> {
    const { finished, publishJob } = await this.eventStore.progressOf(this.consumer, event);
    return finished || (publishJob !== undefined && (await this.options.jobExists(publishJob)));
  }

  /**
   * Runs the event in one of the consumer's slots, then waits for its records outside it: the slot bounds the
   * work in flight (webhooks being sent), not the bookkeeping after it. Held through the records' write too, the
   * slots would cap the hooks worker at HOOK_CONCURRENCY / (delivery + WORKER_RECORD_INTERVAL_MS) deliveries a
   * second, whatever the machine had to spare. How many events may wait for their records is bounded too
   * (RECORDS_WAITING_PER_SLOT).
   */
  private async runEvent<R>(event: EventEnvelope, job: Job<EventJobData>, process: EventProcessor<R>): Promise<R> {
    // Most events find both slots free: no promise is made for either (see Slots).
    const waitingToRecord = this.unrecorded.take();
    if (waitingToRecord) await waitingToRecord;
    try {
      return await this.runAndRecord(event, job, process);
    } finally {
      this.unrecorded.release();
    }
  }

  private async runAndRecord<R>(event: EventEnvelope, job: Job<EventJobData>, process: EventProcessor<R>): Promise<R> {
    const writes: Promise<void>[] = [];
    const alongside = (write: Promise<void>) => {
      write.catch(() => {}); // awaited below; a failure before then is not an unhandled rejection
      writes.push(write);
    };
    try {
      const waitingToRun = this.running.take();
      if (waitingToRun) await waitingToRun;
      let result: R;
      try {
        result = await process(event, job, alongside);
      } finally {
        this.running.release();
      }
      // Finished only once what it wrote is stored: a failed attempt's retry is scheduled in its record, and a
      // finished event is not run again. Marked alongside, an attempt whose write failed left the retry in
      // Redis alone (the job's retry skips a finished event), to be lost with it.
      // Usually one write (the attempt's record): awaited as it is, without a Promise.all around it.
      if (writes.length === 1) await writes[0];
      else if (writes.length > 1) await Promise.all(writes);
      await this.finished.add(event);
      return result;
    } catch (error) {
      // Given up: the failure stays visible (failed job, automation run); the event is no longer unfinished.
      if (job.attemptsMade + 1 >= (job.opts.attempts ?? 1)) await this.finished.add(event).catch(() => {});
      throw error;
    }
  }

  close(): Promise<void> {
    return this.finished.close();
  }
}
