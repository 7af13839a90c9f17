import { execFile, execFileSync } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { promisify } from 'node:util';

const execFileAsync = promisify(execFile);

/**
 * The two sides of an at-once comparison, each pinned to a core of its own, swapped between the two every run and
 * traded back and forth within it (alternate).
 * A shared machine's vCPUs are not alike for long: one core can run a fixed loop 10% slower than the other for
 * half a minute, and a process the scheduler keeps on the slower core pays that much more per request than its
 * twin for as long. Swapped every run, each pair of runs puts each side on each core once, and the pair's
 * geometric mean cancels the difference.
 */
export class CoreSwap {
  private constructor(private readonly pids: [number, number]) {}

  /** Both pids, when there are two cores to give them and taskset (util-linux) to do it; else undefined. */
  static of(ours: number | undefined, baseline: number | undefined): CoreSwap | undefined {
    if (!ours || !baseline || availableParallelism() < 2) return undefined;
    try {
      execFileSync('taskset', ['--version'], { stdio: 'ignore' });
    } catch {
      return undefined;
    }
    return new CoreSwap([ours, baseline]);
  }

  /** Ours on core `placement` (0 or 1) and the baseline on the other. */
  private async place(placement: number): Promise<void> {
    const [ours, baseline] = this.pids;
    await Promise.all([pin(ours, String(placement)), pin(baseline, String(1 - placement))]);
  }

  /**
   * Ours on core 0 for even runs and on core 1 for odd ones, then the two swapped every `periodMs` until the
   * returned function is called, so within one run each side spends about as long on each core. (Without an even
   * number of swaps a run ends with one side a period longer on one core; the pair of runs, started the other way
   * round, evens that out.) A swap still under way skips a tick.
   */
  async alternate(run: number, periodMs: number): Promise<() => Promise<void>> {
    let placement = run % 2;
    await this.place(placement);
    let pending: Promise<void> | undefined;
    const timer = setInterval(() => {
      if (pending) return;
      placement = 1 - placement;
      pending = this.place(placement).then(() => (pending = undefined));
    }, periodMs);
    return async () => {
      clearInterval(timer);
      await pending;
    };
  }

  /** Both back on every core. */
  async release(): Promise<void> {
    await Promise.all(this.pids.map((pid) => pin(pid, `0-${availableParallelism() - 1}`)));
  }
}

/**
 * Every thread of `pid` on `cpuList`; threads started later inherit it from the thread that starts them. Without
 * blocking the event loop the load generator runs on.
 */
async function pin(pid: number, cpuList: string): Promise<void> {
  try {
    await execFileAsync('taskset', ['--all-tasks', '--cpu-list', '--pid', cpuList, String(pid)]);
  } catch {
    // the process has exited: nothing left to place
  }
}

/** Geometric means of consecutive runs' ratios (runs 1-2, 3-4, ...): each side once on each core. */
export function pairedRatios(ratios: number[]): number[] {
  const pairs: number[] = [];
  for (let index = 1; index < ratios.length; index += 2) pairs.push(Math.sqrt(ratios[index - 1]! * ratios[index]!));
  return pairs;
}
