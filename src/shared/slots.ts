/**
 * A counting semaphore with a synchronous fast path: taking a free slot makes no promise, which matters
 * where it runs per event of every job (the hooks worker's profile showed p-limit's promises and closures,
 * two limiters per event, in its allocations). Slots pass to waiters in the order they asked.
 */
export class Slots {
  private taken = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(private readonly size: number) {}

  /** Undefined when a slot was free and is now taken; else a promise that resolves once one is. */
  take(): Promise<void> | undefined {
    if (this.taken < this.size) {
      this.taken++;
      return undefined;
    }
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  /** Gives a taken slot back: to the longest waiter, if any. */
  release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.taken--;
  }

  /** Slots taken now (its tests read it). */
  get inUse(): number {
    return this.taken;
  }
}
