import type { EventEnvelope } from '../events/envelope.js';
import type { DeliveryJob } from '../shared/queues.js';
import type { HooksRepository } from './repository.js';

/**
 * Job id of an event's delivery to a hook: derived from both, so a duplicate event (or a re-run
 * fan-out) adds nothing. BullMQ refuses custom ids with exactly one `:`, hence the third part.
 */
export function hookDeliveryJobId(hookId: string, eventId: string, round = 'event'): string {
  return `${hookId}:${eventId}:${round}`;
}

export interface FanOutDeps {
  hooks: HooksRepository;
  enqueueDeliveries(jobs: Array<{ data: DeliveryJob; jobId: string }>): Promise<void>;
}

/** One delivery job per enabled hook of the event's company that subscribed to its type (or `*`). */
export async function fanOutEvent(event: EventEnvelope, deps: FanOutDeps): Promise<number> {
  const hooks = await deps.hooks.enabledFor(event.company_id, event.type);
  if (hooks.length === 0) return 0;
  await deps.enqueueDeliveries(
    hooks.map((hook) => ({ data: { event, target: { kind: 'hook', hook_id: hook._id } }, jobId: hookDeliveryJobId(hook._id, event.event_id) })),
  );
  return hooks.length;
}
