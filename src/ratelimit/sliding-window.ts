import { randomUUID } from 'node:crypto';
import type { Logger } from '../shared/logger.js';
import type { RedisClient } from '../shared/redis.js';

export interface RateLimitDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Seconds until the oldest counted request leaves the window (when one more request would be admitted). */
  resetSeconds: number;
  backend: 'redis' | 'memory';
}

export interface SlidingWindowOptions {
  max: number;
  windowSeconds: number;
  /** Redis key namespace, e.g. `prs:rl:` */
  keyPrefix: string;
}

/**
 * Exact sliding window over a sorted set of admission times, in one atomic round trip. The clock is
 * Redis's own (TIME), so web processes with skewed clocks still share one window. A rejected request
 * is not added, so it does not count against the window (DECISIONS.md section 4).
 */
const SLIDING_WINDOW_LUA = `
local key = KEYS[1]
local window_ms = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local member = ARGV[3]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window_ms)
local count = redis.call('ZCARD', key)
local allowed = 0
if count < limit then
  redis.call('ZADD', key, now, member)
  redis.call('PEXPIRE', key, window_ms)
  count = count + 1
  allowed = 1
end
local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
local reset_ms = 0
if oldest[2] then reset_ms = tonumber(oldest[2]) + window_ms - now end
return {allowed, limit - count, reset_ms}
`;

type SlidingWindowRedis = RedisClient & {
  slidingWindow(key: string, windowMs: number, limit: number, member: string): Promise<[number, number, number]>;
};

function toSeconds(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}

/** Per-process fallback with the same algorithm, used only while Redis is unreachable. */
export class MemorySlidingWindow {
  private readonly admissions = new Map<string, number[]>();

  constructor(private readonly options: SlidingWindowOptions) {}

  consume(key: string, now = Date.now()): RateLimitDecision {
    const windowMs = this.options.windowSeconds * 1000;
    const times = (this.admissions.get(key) ?? []).filter((time) => time > now - windowMs);
    const allowed = times.length < this.options.max;
    if (allowed) times.push(now);
    if (times.length === 0) this.admissions.delete(key);
    else this.admissions.set(key, times);
    this.evictIdle(now - windowMs);
    const oldest = times[0];
    const resetMs = oldest === undefined ? 0 : oldest + windowMs - now;
    return {
      allowed,
      limit: this.options.max,
      remaining: this.options.max - times.length,
      resetSeconds: toSeconds(resetMs),
      backend: 'memory',
    };
  }

  /** Keeps memory bounded during a long outage: drop keys whose newest admission left the window. */
  private evictIdle(cutoff: number): void {
    if (this.admissions.size < 10_000) return;
    for (const [key, times] of this.admissions) {
      if ((times.at(-1) ?? cutoff) <= cutoff) this.admissions.delete(key);
    }
  }
}

export class SlidingWindowLimiter {
  private readonly redis: SlidingWindowRedis;
  private readonly memory: MemorySlidingWindow;
  private degraded = false;
  /** Set members must be unique across processes: this process's random tag and a counter. */
  private readonly memberTag = `${randomUUID()}:`;
  private admitted = 0;

  constructor(
    redis: RedisClient,
    private readonly options: SlidingWindowOptions,
    private readonly logger?: Logger,
  ) {
    if (!('slidingWindow' in redis)) {
      redis.defineCommand('slidingWindow', { numberOfKeys: 1, lua: SLIDING_WINDOW_LUA });
    }
    this.redis = redis as SlidingWindowRedis;
    this.memory = new MemorySlidingWindow(options);
  }

  get limit(): number {
    return this.options.max;
  }

  get policy(): string {
    return `${this.options.max};w=${this.options.windowSeconds}`;
  }

  async consume(key: string): Promise<RateLimitDecision> {
    if (this.redis.status === 'ready') {
      try {
        const [allowed, remaining, resetMs] = await this.redis.slidingWindow(
          this.options.keyPrefix + key,
          this.options.windowSeconds * 1000,
          this.options.max,
          this.memberTag + String(this.admitted++),
        );
        this.setDegraded(false);
        return {
          allowed: allowed === 1,
          limit: this.options.max,
          remaining,
          resetSeconds: toSeconds(resetMs),
          backend: 'redis',
        };
      } catch (error) {
        this.setDegraded(true, error);
      }
    } else {
      this.setDegraded(true);
    }
    return this.memory.consume(key);
  }

  private setDegraded(degraded: boolean, error?: unknown): void {
    if (degraded === this.degraded) return;
    this.degraded = degraded;
    if (degraded) {
      this.logger?.warn(
        { err: error, keyPrefix: this.options.keyPrefix },
        'redis unreachable: rate limit falls back to a per-process window',
      );
    } else {
      this.logger?.info(
        { keyPrefix: this.options.keyPrefix },
        'redis reachable again: rate limit shared across processes',
      );
    }
  }
}
