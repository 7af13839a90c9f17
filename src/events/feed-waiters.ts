import type { ChangeAnnouncer } from '../shared/change-feeds.js';

/** While announcements cannot arrive (Redis away), one shared check of the waiting companies this often. */
const FALLBACK_CHECK_MS = 1_000;

interface Waiter {
  companyId: string;
  /** The company's readable position the waiter has already read up to. */
  known: number;
  wake: () => void;
}

/**
 * Feed readers waiting (`wait=`) for their company's next readable events. The sequencer announces each
 * company whose readable position moved (Redis pub/sub), and that wakes its waiters: nobody polls
 * MongoDB per request. While the announcements are not live, one process-wide check per second reads
 * the readable positions of every waiting company in a single query.
 */
export class FeedWaiters {
  private readonly waiters = new Set<Waiter>();
  private fallback: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private readonly announcer: ChangeAnnouncer | undefined,
    private readonly readableOf: (companyIds: string[]) => Promise<Map<string, number>>,
  ) {
    announcer?.onChange((companyId) => this.wake(companyId));
  }

  /** Resolves when the company may have events above `known`, after `ms`, on abort, or when closing. */
  wait(companyId: string, known: number, ms: number, signal?: AbortSignal): Promise<void> {
    if (this.closed || signal?.aborted) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const waiter: Waiter = {
        companyId,
        known,
        wake: () => {
          clearTimeout(timer);
          signal?.removeEventListener('abort', waiter.wake);
          this.waiters.delete(waiter);
          resolve();
        },
      };
      const timer = setTimeout(waiter.wake, ms);
      signal?.addEventListener('abort', waiter.wake, { once: true });
      this.waiters.add(waiter);
      this.ensureFallback();
    });
  }

  /** Wakes every waiter and lets no request wait again (the server is closing). */
  close(): void {
    this.closed = true;
    this.wake(undefined);
  }

  private wake(companyId: string | undefined): void {
    for (const waiter of [...this.waiters])
      if (companyId === undefined || waiter.companyId === companyId) waiter.wake();
  }

  private ensureFallback(): void {
    if (this.fallback) return;
    this.fallback = setInterval(() => {
      if (this.waiters.size === 0) {
        clearInterval(this.fallback);
        this.fallback = undefined;
        return;
      }
      if (this.announcer?.live) return;
      const companies = [...new Set([...this.waiters].map((waiter) => waiter.companyId))];
      this.readableOf(companies).then(
        (readable) => {
          for (const waiter of [...this.waiters])
            if ((readable.get(waiter.companyId) ?? 0) > waiter.known) waiter.wake();
        },
        () => {}, // MongoDB away too: the waits end at their deadline
      );
    }, FALLBACK_CHECK_MS);
    this.fallback.unref();
  }
}
