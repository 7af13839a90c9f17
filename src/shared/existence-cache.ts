import { LRUCache } from 'lru-cache';
import { EXACT_TTL } from './lru.js';

/** Entries per cache, so ids made up by a caller cannot grow it without bound. */
const MAX_ENTRIES = 10_000;

/**
 * Remembers, per process and for `ttlMs`, that a record exists, so reference checks (a task's
 * assignee and item) need no read while the answer is fresh. Only "exists" is remembered: a record
 * created a moment ago is found at once. A record that stops existing (an archived item) is forgotten
 * at once by the process that archived it (`forget`) and by the others within `ttlMs`: that bounds
 * how long another process may still accept a reference to it. Keys should include the company.
 */
export class ExistenceCache {
  private readonly known: LRUCache<string, true>;
  /** Bumped by every forget: a read that started before one does not put its answer back. */
  private epoch = 0;

  constructor(ttlMs: number) {
    this.known = new LRUCache<string, true>({ max: MAX_ENTRIES, ttl: ttlMs, ...EXACT_TTL });
  }

  async exists(key: string, load: () => Promise<boolean>): Promise<boolean> {
    if (this.known.get(key)) return true;
    const epoch = this.epoch;
    const found = await load();
    if (found && epoch === this.epoch) this.known.set(key, true);
    return found;
  }

  forget(key: string): void {
    this.epoch++;
    this.known.delete(key);
  }
}
