import { randomUUID } from 'node:crypto';
import type { RedisClient } from './redis.js';

const RENEW_IF_OWNER = `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end`;
const RELEASE_IF_OWNER = `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end`;

export interface RedisLock {
  /** Aborted when the lock could not be renewed: the holder stops at its next safe point. */
  lost: AbortSignal;
  release(): Promise<void>;
}

/**
 * A lock across processes for one job at a time (a reconciliation): SET NX with a
 * token, renewed while held; if the holder dies, it expires after `ttlMs`. Null when another holds it.
 */
export async function acquireRedisLock(redis: RedisClient, key: string, ttlMs: number): Promise<RedisLock | null> {
  const token = randomUUID();
  if ((await redis.set(key, token, 'PX', ttlMs, 'NX')) !== 'OK') return null;
  const lost = new AbortController();
  const renewal = setInterval(
    () => {
      redis.eval(RENEW_IF_OWNER, 1, key, token, ttlMs).then(
        (renewed) => renewed === 1 || lost.abort(),
        () => lost.abort(),
      );
    },
    Math.floor(ttlMs / 3),
  );
  return {
    lost: lost.signal,
    async release() {
      clearInterval(renewal);
      await redis.eval(RELEASE_IF_OWNER, 1, key, token).catch(() => {}); // else it simply expires
    },
  };
}
