import { readFileSync } from 'node:fs';

const TICKS_PER_SECOND = 100; // USER_HZ on Linux

/** CPU seconds (user + system) a process has used so far, from /proc/PID/stat; undefined once it is gone. */
function cpuSecondsOf(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the parenthesised command name: state is field 3, utime 14, stime 15.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND;
  } catch {
    return undefined;
  }
}

/** CPU seconds (user + system) this process has used so far. */
function ownCpuSeconds(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1e6;
}

/** CPU seconds all processes of the machine have used (busy time of every core, from /proc/stat). */
function machineBusySeconds(): number | undefined {
  try {
    const [, user = 0, nice = 0, system = 0, , , irq = 0, softirq = 0, steal = 0] = readFileSync('/proc/stat', 'utf8')
      .split('\n', 1)
      .join('')
      .trim()
      .split(/\s+/)
      .map(Number);
    return (user + nice + system + irq + softirq + steal) / TICKS_PER_SECOND;
  } catch {
    return undefined;
  }
}

/** CPU seconds per watched process (by pid) at one moment, and the machine's busy seconds. */
export type CpuSnapshot = { at: number; seconds: Map<number, number>; machine?: number };

/**
 * How busy each process was during a run, in percent of one core: on a 2-core machine this tells
 * which process is the bottleneck of a scenario (our web process, or the database it waits on).
 */
export class CpuMeter {
  /** Every process watched so far: one name may have several (a scenario's web process started again). */
  private readonly watched = new Map<number, string>();
  /** Each process's CPU seconds at its latest reading: what it used counts after it has exited too. */
  private readonly lastSeen = new Map<number, number>();

  watch(name: string, pid: number | undefined): void {
    if (pid) this.watched.set(pid, name);
  }

  /** The pid last watched under `name` (a process started again has a new one). */
  pidOf(name: string): number | undefined {
    let found: number | undefined;
    for (const [pid, watchedName] of this.watched) if (watchedName === name) found = pid;
    return found;
  }

  snapshot(): CpuSnapshot {
    const seconds = new Map<number, number>();
    for (const pid of this.watched.keys()) {
      const used = pid === process.pid ? ownCpuSeconds() : (cpuSecondsOf(pid) ?? this.lastSeen.get(pid));
      if (used === undefined) continue;
      this.lastSeen.set(pid, used);
      seconds.set(pid, used);
    }
    return { at: performance.now(), seconds, machine: machineBusySeconds() };
  }

  /**
   * CPU seconds each process used since `before` (all of it for one started since), by name, plus `others`:
   * everything else on the machine (when that is high, the figures are not to be trusted).
   */
  usedSince(before: CpuSnapshot): CpuUsage {
    const now = this.snapshot();
    const used = new Map<string, number>();
    for (const [pid, name] of this.watched) {
      const seconds = now.seconds.get(pid);
      if (seconds !== undefined) used.set(name, (used.get(name) ?? 0) + seconds - (before.seconds.get(pid) ?? 0));
    }
    if (now.machine !== undefined && before.machine !== undefined) {
      const ours = [...used.values()].reduce((sum, seconds) => sum + seconds, 0);
      used.set('others', Math.max(0, now.machine - before.machine - ours));
    }
    return { seconds: used, elapsed: (now.at - before.at) / 1000 };
  }

  /** Percent of one core per process since `before`, busiest first, e.g. "web 97%, mongo 64%, others 12%". */
  since(before: CpuSnapshot): string {
    return formatUsage(this.usedSince(before));
  }
}

export interface CpuUsage {
  seconds: Map<string, number>;
  elapsed: number;
}

export function formatUsage(usage: CpuUsage): string {
  return [...usage.seconds]
    .map(([name, seconds]) => [name, (seconds / usage.elapsed) * 100] as const)
    .filter(([, percent]) => percent >= 1)
    .sort((a, b) => b[1] - a[1])
    .map(([name, percent]) => `${name} ${percent.toFixed(0)}%`)
    .join(', ');
}

export const cpuMeter = new CpuMeter();
