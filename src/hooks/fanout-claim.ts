import type { EventRef } from '../contracts/envelope.js';
import type { RedisClient } from '../shared/redis.js';

/**
 * How long the claim of an event added under a job id of its own is kept (the publisher's jobs never
 * need one). An hour bounds the keys Redis holds.
 */
export const FANOUT_CLAIM_SECONDS = 3600;

export interface FanOutClaimDeps {
  redis: RedisClient;
  /** QUEUE_PREFIX: claims live beside the queues. */
  prefix: string;
  /** Whether a publisher's own fan-out job of this event exists: its move's batch, or the relay's (id = event_id). */
  publisherJobExists(event: EventRef): Promise<boolean>;
}

/**
 * Whether the fan-out job `jobId`, a job of one event, may deliver `event` (FanOutDeps.claim; a move's
 * batch needs no claim: it is the publisher's job of its events). The job with id = event_id is the
 * only one BullMQ admits under that id: no check (its consumer has checked the event's batch is gone).
 * Any other id is the same event added again by other means: it goes out only if no publisher's job
 * exists and no other copy claimed it first (SET NX GET, so the claimer itself may run again after a crash).
 */
export async function claimFanOut(deps: FanOutClaimDeps, event: EventRef, jobId: string): Promise<boolean> {
  const eventId = event.event_id;
  if (jobId === eventId) return true;
  if (await deps.publisherJobExists(event)) return false;
  const claimedBy = await deps.redis.set(
    `${deps.prefix}:fanout-claim:${eventId}`,
    jobId,
    'EX',
    FANOUT_CLAIM_SECONDS,
    'NX',
    'GET',
  );
  return claimedBy === null || claimedBy === jobId;
}
