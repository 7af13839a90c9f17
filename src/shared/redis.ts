import { Redis, type RedisOptions } from 'ioredis';

/**
 * The request path must never wait on an unreachable Redis (DECISIONS.md section 4): commands fail
 * at once while disconnected, and the client keeps reconnecting in the background.
 */
export function createRequestPathRedis(url: string, options: RedisOptions = {}): Redis {
  return new Redis(url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    connectTimeout: 2_000,
    commandTimeout: 1_000,
    retryStrategy: (attempt) => Math.min(attempt * 200, 2_000),
    lazyConnect: false,
    ...options,
  });
}

/** BullMQ workers need blocking commands that outlive maxRetriesPerRequest (BullMQ's production guide). */
export function createWorkerRedis(url: string, options: RedisOptions = {}): Redis {
  return new Redis(url, {
    maxRetriesPerRequest: null,
    retryStrategy: (attempt) => Math.min(attempt * 200, 2_000),
    ...options,
  });
}

/** Whether Redis answers: at once when connected, else it gets `timeoutMs` to finish (re)connecting. */
export async function isRedisReady(redis: Redis, timeoutMs = 500): Promise<boolean> {
  if (redis.status === 'ready') return true;
  return new Promise((resolve) => {
    const onReady = () => {
      clearTimeout(timer);
      resolve(true);
    };
    const timer = setTimeout(() => {
      redis.off('ready', onReady);
      resolve(false);
    }, timeoutMs);
    redis.once('ready', onReady);
  });
}
