import { EVENT_QUEUES, isEventBatch, type DeliveryJob, type EventJobData } from '../contracts/jobs.js';
import type { EventEnvelope } from '../contracts/envelope.js';
import type { ErasureStores, ErasureTarget } from './collections.js';

/** An erased event as the events collection keeps it: its place, none of its values. */
function blank<E extends Pick<EventEnvelope, 'event_id'>>(event: E): E {
  const { changes: _changes, ...rest } = event as E & { changes?: unknown };
  return { ...rest, data: {}, erased: true } as unknown as E;
}

/** A queue's kept jobs, as far as erasure touches them: one by id, its data read and replaced. */
interface KeptJobs<Data> {
  getJob(jobId: string): Promise<{ data: Data; updateData(data: Data): Promise<void> } | undefined>;
}

/** The queues whose kept jobs hold copies of events. */
export interface QueuedCopies {
  automations: KeptJobs<EventJobData>;
  'hook-fanout': KeptJobs<EventJobData>;
  deliveries: KeptJobs<DeliveryJob>;
}

/**
 * Redis holds copies of events in BullMQ's jobs, kept after they ran (a day when done, a week when failed) so a
 * job id is admitted once: the batch that carried each event, the event added again under its own id, and the
 * `deliveries` jobs of its webhooks. Each such job still in Redis has the erased events blanked in place; the
 * jobs' ids come from MongoDB (the events' `publish_job`, the delivery records' `job_id`), so nothing is scanned.
 */
export async function eraseQueuedCopies(
  repos: Pick<ErasureStores, 'events' | 'deliveries'>,
  queues: QueuedCopies,
  target: ErasureTarget,
): Promise<void> {
  const erased = new Set(target.eventIds);
  const eraseIn = (event: EventEnvelope) => (erased.has(event.event_id) ? blank(event) : event);
  const eventJobIds = await repos.events.jobIdsAbout(target.companyId, target.recordId);
  for (const name of EVENT_QUEUES) {
    const queue = queues[name];
    for (const jobId of eventJobIds) {
      const job = await queue.getJob(jobId);
      if (!job) continue;
      const data = job.data;
      const next: EventJobData = isEventBatch(data) ? { events: data.events.map(eraseIn) } : eraseIn(data);
      await job.updateData(next);
    }
  }
  for (const jobId of await repos.deliveries.jobIdsOf(target.companyId, target.eventIds)) {
    const job = await queues.deliveries.getJob(jobId);
    if (!job || !erased.has(job.data.event.event_id)) continue;
    const data: DeliveryJob = { ...job.data, event: blank(job.data.event) };
    await job.updateData(data);
  }
}
