import type { Logger } from '../shared/logger.js';
import type { ApiKeysRepository } from './api-keys.repository.js';

const FLUSH_INTERVAL_MS = 5_000;

/**
 * `last_used_at` without a database write per request: uses are coalesced in memory and written
 * in one bulk update per interval (at most one write per key per interval per process).
 */
export class LastUsedTracker {
  /** Key id → its company and the latest use. */
  private pending = new Map<string, { companyId: string; usedAt: Date }>();
  /** The write under way: a flush waits for it, so "flushed" means stored, never merely started. */
  private writing: Promise<void> = Promise.resolve();
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly keys: ApiKeysRepository,
    private readonly logger: Logger,
  ) {
    this.timer = setInterval(() => void this.flush(), FLUSH_INTERVAL_MS);
    this.timer.unref();
  }

  touch(companyId: string, keyId: string, at = new Date()): void {
    this.pending.set(keyId, { companyId, usedAt: at });
  }

  /** Writes the uses seen so far; resolves once they (and any write already under way) are stored. */
  flush(): Promise<void> {
    this.writing = this.writing.then(() => this.writePending());
    return this.writing;
  }

  private async writePending(): Promise<void> {
    if (this.pending.size === 0) return;
    const batch = [...this.pending].map(([keyId, use]) => ({ keyId, ...use }));
    this.pending = new Map();
    try {
      await this.keys.recordLastUsed(batch);
    } catch (error) {
      this.logger.warn({ err: error }, 'could not record api key last_used_at');
    }
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
  }
}
