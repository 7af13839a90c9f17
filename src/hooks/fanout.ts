import type { EventEnvelope } from '../contracts/envelope.js';
import type { DeliveryJob } from '../contracts/jobs.js';
import type { HookDoc, HooksRepository } from './repository.js';

/**
 * Job id of an event's delivery to a hook: derived from both, so a duplicate event (or a re-run
 * fan-out) adds nothing. BullMQ refuses custom ids with exactly one `:`, hence the third part.
 */
export function hookDeliveryJobId(hookId: string, eventId: string, round = 'event'): string {
  return `${hookId}:${eventId}:${round}`;
}

export interface FanOutDeps {
  /** The repository, or the worker's cache of it. */
  hooks: Pick<HooksRepository, 'enabledFor'>;
  /**
   * True when this fan-out job may deliver the event: the publisher's job (id = event_id, unique in
   * the queue; also when it runs again after a crash), or the first copy under any other job id
   * while the publisher's job does not exist. Other copies are refused.
   */
  claim(event: EventEnvelope): Promise<boolean>;
  /** Makes the first attempt of one delivery (the hook as just read is passed along). */
  deliver(hook: HookDoc, job: DeliveryJob, jobId: string): Promise<void>;
}

/**
 * Delivers the event to every enabled hook of its company subscribed to its type (or `*`) whose
 * filter it passes, all at once, inside the fan-out job: no second job per delivery on the common
 * path. Only deliveries that need a retry become jobs of their own. A re-run fan-out sends again (at least once).
 */
export async function fanOutEvent(event: EventEnvelope, deps: FanOutDeps): Promise<number> {
  if (!(await deps.claim(event))) return 0;
  const hooks = await deps.hooks.enabledFor(event);
  await Promise.all(
    hooks.map((hook) =>
      deps.deliver(
        hook,
        { event, target: { kind: 'hook', hook_id: hook._id } },
        hookDeliveryJobId(hook._id, event.event_id),
      ),
    ),
  );
  return hooks.length;
}
