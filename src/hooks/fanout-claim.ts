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
  /** Whether the publisher's own fan-out job of this event (id = event_id) exists. */
  publisherJobExists(eventId: string): Promise<boolean>;
}

/**
 * Whether the fan-out job `jobId` may deliver event `eventId` (FanOutDeps.claim). The publisher's own
 * job (id = event_id) is the only one BullMQ admits for an event: no check. Any other id is the same
 * event added again by other means: it goes out only if the publisher's job does not exist and no
 * other copy claimed it first (SET NX GET, so the claimer itself may run again after a crash).
 */
export async function claimFanOut(deps: FanOutClaimDeps, eventId: string, jobId: string): Promise<boolean> {
  if (jobId === eventId) return true;
  if (await deps.publisherJobExists(eventId)) return false;
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
