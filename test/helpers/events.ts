import { isEventBatch, type EventJobData } from '../../src/contracts/jobs.js';
import { taskSchema } from '../../src/contracts/tasks.js';
import type { EventEnvelope } from '../../src/contracts/envelope.js';

/**
 * A task in API shape (the reference's example) with the given fields: what an event built by a test
 * carries as `data`, so that its webhook matches the task payload schema like the service's own.
 */
export function taskData(fields: Record<string, unknown> = {}): Record<string, unknown> {
  return { ...(taskSchema.meta()?.example as Record<string, unknown>), ...fields };
}

/** The events a job of an event queue carries: a move's batch, or one event. */
export function eventsOfJob(data: EventJobData): EventEnvelope[] {
  return isEventBatch(data) ? data.events : [data];
}

/** The keys of an event envelope as the feed and webhooks carry it (no `changes` on a create), sorted. */
export const ENVELOPE_KEYS = ['actor', 'company_id', 'data', 'event_id', 'occurred_at', 'sequence', 'type'];
