import { LRUCache } from 'lru-cache';
import { RateLimitedError } from '../shared/errors.js';
import { rateLimitRejections } from '../shared/metrics.js';
import type { ChangeAnnouncer } from '../shared/change-feeds.js';
import type { SlidingWindowLimiter } from '../shared/sliding-window.js';

const BLOCK_ANNOUNCEMENT = 'auth-blocked';

/**
 * Slows down key and token guessing (DECISIONS.md sections 3, 12.4 and 13.4): API keys on `/v1/ext/`,
 * ADMIN_TOKEN on the admin API and the queue board share one count per address. Failures are counted
 * in a shared sliding window. Once an address is over the limit, every request from it is refused
 * before its key is looked at (no database lookup, and a correct key does not tell a guesser it was
 * right) until its window frees up. The process that sees the limit crossed tells the others over the
 * change feed, so none of them looks up a key for that address either. Successful requests cost
 * nothing here.
 */
export class FailedAuthThrottle {
  private readonly blockedUntil = new LRUCache<string, number>({ max: 50_000 });

  constructor(
    private readonly failures: SlidingWindowLimiter,
    private readonly announcer?: ChangeAnnouncer,
  ) {
    announcer?.onChange((change) => {
      if (!change?.startsWith(`${BLOCK_ANNOUNCEMENT}:`)) return;
      const [, until, ...address] = change.split(':'); // IPv6 addresses have colons of their own
      if (until && address.length > 0) this.block(address.join(':'), Number(until));
    });
  }

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
    const until = now + decision.resetSeconds * 1000;
    this.block(address, until);
    void this.announcer?.announce(`${BLOCK_ANNOUNCEMENT}:${until}:${address}`); // never throws
    return decision.resetSeconds;
  }

  private block(address: string, until: number): void {
    if (Number.isFinite(until) && until > (this.blockedUntil.get(address) ?? 0)) this.blockedUntil.set(address, until);
  }
}

/** The 429 an address over the failed-auth limit gets, counted in rate_limit_rejections_total. */
export function failedAuthRefusal(waitSeconds: number): RateLimitedError {
  rateLimitRejections.inc({ reason: 'failed_auth' });
  return new RateLimitedError(waitSeconds, 'Too many failed authentication attempts');
}
