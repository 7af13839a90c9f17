/**
 * Runs calls as batch operations, one batch at a time: a call made while no batch is running goes
 * out at once (on the next turn of the event loop, with whatever else arrived in the same turn), and
 * calls made while one is running share the next batch. Low latency when quiet, one round trip for
 * many calls under load. Every caller's promise settles with its batch, so nothing is reported done
 * before it is written.
 */
export class Coalescer<T> {
  private pending: Array<{ item: T; resolve: () => void; reject: (error: unknown) => void }> = [];
  private scheduled = false;
  private running?: Promise<void>;
  /** When the last batch started (ms since the epoch): the next waits until minIntervalMs after it. */
  private lastStart = 0;
  private readonly minIntervalMs: number;

  /**
   * With `minIntervalMs`, a batch starts no sooner than that long after the previous one started:
   * under load, calls gather for that long and share one batch (fewer round trips per call), while
   * a call after a quiet moment still goes out at once.
   */
  constructor(
    private readonly runBatch: (items: T[]) => Promise<void>,
    options: { minIntervalMs?: number } = {},
  ) {
    this.minIntervalMs = options.minIntervalMs ?? 0;
  }

  add(item: T): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.pending.push({ item, resolve, reject });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled || this.running) return;
    this.scheduled = true;
    const run = () => {
      this.scheduled = false;
      this.flush();
    };
    const wait = this.lastStart + this.minIntervalMs - Date.now();
    if (wait > 0) setTimeout(run, wait);
    else setImmediate(run);
  }

  private flush(): void {
    const batch = this.pending;
    this.pending = [];
    if (batch.length === 0) return;
    this.lastStart = Date.now();
    this.running = this.runBatch(batch.map((entry) => entry.item))
      .then(
        () => batch.forEach((entry) => entry.resolve()),
        (error: unknown) => batch.forEach((entry) => entry.reject(error)),
      )
      .finally(() => {
        this.running = undefined;
        if (this.pending.length > 0) this.schedule();
      });
  }

  /** Waits until everything added so far has been written (or has failed). */
  async close(): Promise<void> {
    while (this.running || this.scheduled || this.pending.length > 0) {
      if (this.running) await this.running.catch(() => {});
      else await new Promise((resolve) => setImmediate(resolve));
    }
  }
}

/**
 * Under load, how long the records of a worker's finished jobs (consumer progress, delivery attempts) wait
 * to share one bulk write with those of other jobs: with 50 jobs in flight, without it the writes go out
 * in twos and make one MongoDB round trip per delivered webhook, a socket write and read that cost more CPU
 * than the rest of the delivery. Each write has a cost of its own in the driver (server selection, the
 * command, its reply) whatever it carries, so a longer window means fewer writes per delivery; 25 ms is
 * still short beside a webhook's own round trip. A record after a quiet moment goes out at once; none waits
 * longer than this, and only the job's completion waits (the webhook is out, its slot free: runEvent).
 */
export const WORKER_RECORD_INTERVAL_MS = 25;
