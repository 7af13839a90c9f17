import { LRUCache } from 'lru-cache';
import type { SlidingWindowLimiter } from '../ratelimit/sliding-window.js';

/**
 * Slows down key guessing (DECISIONS.md section 3): failures per client address are counted in a
 * shared sliding window; once over the limit the address is refused locally, without a lookup,
 * until its window frees up. Successful requests cost nothing here.
 */
export class FailedAuthThrottle {
  private readonly blockedUntil = new LRUCache<string, number>({ max: 50_000 });

  constructor(private readonly failures: SlidingWindowLimiter) {}

  /** Seconds to wait when the address is currently blocked, else undefined. */
  blockedFor(address: string, now = Date.now()): number | undefined {
    const until = this.blockedUntil.get(address);
    if (until === undefined || until <= now) return undefined;
    return Math.max(1, Math.ceil((until - now) / 1000));
  }

  /** Records a failure; returns seconds to wait when this failure crossed the limit. */
  async recordFailure(address: string, now = Date.now()): Promise<number | undefined> {
    const decision = await this.failures.consume(address);
    if (decision.allowed) return undefined;
    this.blockedUntil.set(address, now + decision.resetSeconds * 1000);
    return decision.resetSeconds;
  }
}
