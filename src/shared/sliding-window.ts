import { randomUUID } from 'node:crypto';
import { Cluster } from 'ioredis';
import type { Logger } from './logger.js';
import type { RedisClient } from './redis.js';

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
 * Exact sliding window over a sorted set of admission times per key. The clock is Redis's own (TIME),
 * so web processes with skewed clocks still share one window. A rejected request is not added, so it
 * does not count against the window (DECISIONS.md section 4). One call decides a batch of checks
 * (KEYS[i] with member ARGV[2 + i]) in order, atomically: the same key twice in a batch counts twice.
 * Each key's window is trimmed, counted, added to and read once per call, however many checks it has:
 * with one clock reading, its oldest admission is the same for all of them.
 */
const SLIDING_WINDOW_LUA = `
local window_ms = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local counts, admitted, keys = {}, {}, {}
local decisions = {}
for i, key in ipairs(KEYS) do
  local count = counts[key]
  if count == nil then
    redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window_ms)
    count = redis.call('ZCARD', key)
    admitted[key] = {}
    keys[#keys + 1] = key
  end
  local allowed = 0
  if count < limit then
    count = count + 1
    allowed = 1
    local members = admitted[key]
    members[#members + 1] = now
    members[#members + 1] = ARGV[2 + i]
  end
  counts[key] = count
  decisions[3 * i - 2] = allowed
  decisions[3 * i - 1] = limit - count
end
local resets = {}
for _, key in ipairs(keys) do
  if #admitted[key] > 0 then
    redis.call('ZADD', key, unpack(admitted[key]))
    redis.call('PEXPIRE', key, window_ms)
  end
  local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  resets[key] = 0
  if oldest[2] then resets[key] = tonumber(oldest[2]) + window_ms - now end
end
for i, key in ipairs(KEYS) do decisions[3 * i] = resets[key] end
return decisions
`;

type SlidingWindowRedis = RedisClient & {
  /** `slidingWindow(numberOfKeys, ...keys, windowMs, limit, ...members)`: three numbers per key. */
  slidingWindow(...args: Array<string | number>): Promise<number[]>;
};

/** Checks per script call at most: one call holds Redis for its whole batch. */
const MAX_BATCH = 100;

interface PendingCheck {
  key: string;
  member: string;
  resolve(decision: RateLimitDecision): void;
}

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

/**
 * The shared window in Redis. The checks of one event-loop turn go out together, one script call per
 * batch (per key on a cluster), instead of a command each: under load concurrent requests share
 * a call, a write and a reply, and Redis runs the script once for all of them.
 */
export class SlidingWindowLimiter {
  private readonly redis: SlidingWindowRedis;
  private readonly memory: MemorySlidingWindow;
  private degraded = false;
  /** Set members must be unique across processes: this process's random tag and a counter. */
  private readonly memberTag = `${randomUUID()}:`;
  private admitted = 0;
  private pending: PendingCheck[] = [];

  constructor(
    redis: RedisClient,
    private readonly options: SlidingWindowOptions,
    private readonly logger?: Logger,
  ) {
    if (!('slidingWindow' in redis)) {
      redis.defineCommand('slidingWindow', { lua: SLIDING_WINDOW_LUA });
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

  consume(key: string): Promise<RateLimitDecision> {
    if (this.redis.status !== 'ready') {
      this.setDegraded(true);
      return Promise.resolve(this.memory.consume(key));
    }
    return new Promise((resolve) => {
      if (this.pending.length === 0) setImmediate(() => this.flush());
      this.pending.push({ key, member: this.memberTag + String(this.admitted++), resolve });
    });
  }

  /** Sends the checks gathered since the last turn, in batches of keys Redis can run together. */
  private flush(): void {
    const checks = this.pending;
    this.pending = [];
    for (const batch of sameSlotBatches(this.redis, checks)) void this.decide(batch);
  }

  private async decide(batch: PendingCheck[]): Promise<void> {
    const keys = batch.map((check) => this.options.keyPrefix + check.key);
    try {
      const decisions = await this.redis.slidingWindow(
        keys.length,
        ...keys,
        this.options.windowSeconds * 1000,
        this.options.max,
        ...batch.map((check) => check.member),
      );
      this.setDegraded(false);
      batch.forEach((check, i) =>
        check.resolve({
          allowed: decisions[3 * i] === 1,
          limit: this.options.max,
          remaining: decisions[3 * i + 1] ?? 0,
          resetSeconds: toSeconds(decisions[3 * i + 2] ?? 0),
          backend: 'redis',
        }),
      );
    } catch (error) {
      this.setDegraded(true, error);
      for (const check of batch) check.resolve(this.memory.consume(check.key));
    }
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

/**
 * Batches of at most MAX_BATCH checks. On a cluster a script's keys must share a slot, and these keys
 * spread over the shards on purpose (shared/redis.ts keyNamespace): there a batch holds one key's checks.
 */
function sameSlotBatches(redis: RedisClient, checks: PendingCheck[]): PendingCheck[][] {
  const batches: PendingCheck[][] = [];
  const filling = new Map<string, PendingCheck[]>();
  for (const check of checks) {
    const group = redis instanceof Cluster ? check.key : ''; // one prefix per limiter: same key, same slot
    let batch = filling.get(group);
    if (!batch || batch.length === MAX_BATCH) {
      filling.set(group, (batch = []));
      batches.push(batch);
    }
    batch.push(check);
  }
  return batches;
}
