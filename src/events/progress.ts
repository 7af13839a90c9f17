import { Coalescer } from '../shared/coalesce.js';
import { REPUBLISHED_JOB } from '../shared/queues.js';
import type { EventEnvelope } from './envelope.js';
import type { EventConsumer, EventsRepository } from './repository.js';
import type { Job } from 'bullmq';

/**
 * Under load, how long the records of a worker's finished jobs (consumer progress, delivery attempts) wait
 * to share one bulk write with those of other jobs: with 50 jobs in flight, without it the writes went out
 * in twos and made one MongoDB round trip per delivered webhook, a socket write and read that cost more CPU
 * than the rest of the delivery. At 1,500 jobs/s, 15 records per write. A record after a quiet moment
 * goes out at once; none waits longer than this, and only the job's completion waits (the webhook is out).
 */
export const WORKER_RECORD_INTERVAL_MS = 10;

/**
 * Records in MongoDB which events a consumer has finished (one bulk write for the jobs finished
 * together), so that what is unfinished survives the loss of everything Redis held.
 */
export class ConsumerProgress {
  private readonly finished: Coalescer<EventEnvelope>;

  constructor(
    private readonly consumer: EventConsumer,
    private readonly eventStore: EventsRepository,
    options: { minIntervalMs?: number } = { minIntervalMs: WORKER_RECORD_INTERVAL_MS },
  ) {
    this.finished = new Coalescer(
      (events) => eventStore.recordFinished(events.map((event) => ({ event, consumer }))),
      options,
    );
  }

  /**
   * Wraps a consumer's processor: a republished copy of an event this consumer already finished does
   * nothing; a finished job (or one that has used its last attempt) is recorded before BullMQ hears
   * of it, so a completed job always has its record. Writes the processor hands to `alongside` (a
   * delivery's attempt record) are awaited together with that record rather than before it: the job
   * waits for one batch write, not two in a row, and still completes only once all are written.
   */
  track<R>(
    process: (job: Job<EventEnvelope>, alongside: (write: Promise<void>) => void) => Promise<R>,
  ): (job: Job<EventEnvelope>) => Promise<R | { already_finished: true }> {
    return async (job) => {
      if (job.name === REPUBLISHED_JOB && (await this.eventStore.isFinished(this.consumer, job.data)))
        return { already_finished: true };
      const writes: Promise<void>[] = [];
      const alongside = (write: Promise<void>) => {
        write.catch(() => {}); // awaited below; a failure before then is not an unhandled rejection
        writes.push(write);
      };
      try {
        const result = await process(job, alongside);
        await Promise.all([...writes, this.finished.add(job.data)]);
        return result;
      } catch (error) {
        // Given up: the failure stays visible (failed job, automation run); the event is no longer unfinished.
        if (job.attemptsMade + 1 >= (job.opts.attempts ?? 1)) await this.finished.add(job.data).catch(() => {});
        throw error;
      }
    };
  }

  close(): Promise<void> {
    return this.finished.close();
  }
}
