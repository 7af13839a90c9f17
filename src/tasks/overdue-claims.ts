import { acquireRedisLock, type RedisLock } from '../shared/redis-lock.js';
import type { RedisClient } from '../shared/redis.js';

// Outlives any clock skew between worker processes, so a process whose tick fires late finds it taken.
const TICK_CLAIM_TTL_MS = 60_000;

/** Every process's node-cron fires the same tick time; the first SET NX of that tick's key wins it. */
export async function claimOverdueTick(redis: RedisClient, prefix: string, tick: Date): Promise<boolean> {
  const key = `${prefix}:overdue:tick:${Math.floor(tick.getTime() / 1000)}`;
  return (await redis.set(key, String(process.pid), 'PX', TICK_CLAIM_TTL_MS, 'NX')) === 'OK';
}

export type ScanLock = RedisLock;

/**
 * Held for the duration of a scan, across processes, so a tick that overlaps a slow scan does not
 * start a second one. Renewed while held; if the holder dies, it expires after `ttlMs`.
 */
export function acquireScanLock(redis: RedisClient, prefix: string, ttlMs: number): Promise<ScanLock | null> {
  return acquireRedisLock(redis, `${prefix}:overdue:running`, ttlMs);
}
