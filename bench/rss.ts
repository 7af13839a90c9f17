import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { must } from '../src/shared/must.js';

const run = promisify(execFile);

/** Resident set size in MB, as `ps -o rss= -p PID` reports it (KiB); undefined once the process is gone. */
export async function rssOf(pid: number): Promise<number | undefined> {
  try {
    const { stdout } = await run('ps', ['-o', 'rss=', '-p', String(pid)]);
    const kib = Number(stdout.trim());
    return Number.isFinite(kib) && kib > 0 ? kib / 1024 : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Memory gauges of a process's /metrics, in MB (those set): the heap left after the latest full GC
 * (judged), and for reading rss.csv the heap V8 holds and the memory outside it (Buffers).
 */
const MEMORY_GAUGES = {
  'heap after GC': 'nodejs_heap_used_after_full_gc_bytes',
  'RSS after GC': 'process_resident_memory_after_full_gc_bytes',
  'heap total': 'nodejs_heap_size_total_bytes',
  external: 'nodejs_external_memory_bytes',
} as const;

export async function memoryGaugesOf(metricsUrl: string): Promise<Array<[string, number]>> {
  try {
    const text = await (await fetch(`${metricsUrl}/metrics`)).text();
    return Object.entries(MEMORY_GAUGES).flatMap(([series, gauge]): Array<[string, number]> => {
      const bytes = Number(new RegExp(`^${gauge} (\\d+(?:\\.\\d+)?)$`, 'm').exec(text)?.[1]);
      return bytes > 0 ? [[series, bytes / 1024 / 1024]] : [];
    });
  } catch {
    return [];
  }
}

/** The series of a process's post-GC heap and post-GC RSS among the sampler's series. */
export const heapSeries = (name: string) => `${name} heap after GC`;
export const rssAfterGcSeries = (name: string) => `${name} RSS after GC`;

/**
 * Samples the RSS of named processes once a second until stopped, and every 5 s the heap their
 * /metrics reports as in use after the latest full collection (series `heapSeries(name)`).
 */
export class RssSampler {
  readonly samples = new Map<string, Array<{ at: number; mb: number }>>();
  private readonly pids = new Map<string, number>();
  private readonly metricsUrls = new Map<string, string>();
  private timers: NodeJS.Timeout[] = [];
  private scrapesPaused = 0;

  watch(name: string, pid: number | undefined, metricsUrl?: string): void {
    if (pid) this.pids.set(name, pid);
    if (metricsUrl) this.metricsUrls.set(name, metricsUrl);
  }

  start(): this {
    this.timers = [setInterval(() => void this.sample(), 1_000), setInterval(() => void this.sampleHeaps(), 5_000)];
    return this;
  }

  private record(name: string, at: number, mb: number): void {
    const list = this.samples.get(name) ?? [];
    list.push({ at, mb });
    this.samples.set(name, list);
  }

  /**
   * Runs `work` with no /metrics scrape: a scrape reads the queue gauges, a few Redis commands of the
   * scraped process that a count of its commands per request must not include.
   */
  async withoutScrapes<T>(work: () => Promise<T>): Promise<T> {
    this.scrapesPaused++;
    try {
      return await work();
    } finally {
      this.scrapesPaused--;
    }
  }

  private async sampleHeaps(): Promise<void> {
    if (this.scrapesPaused > 0) return;
    const at = Date.now();
    for (const [name, url] of this.metricsUrls) {
      for (const [series, mb] of await memoryGaugesOf(url)) this.record(`${name} ${series}`, at, mb);
    }
  }

  private async sample(): Promise<void> {
    const at = Date.now();
    for (const [name, pid] of this.pids) {
      const mb = await rssOf(pid);
      if (mb !== undefined) this.record(name, at, mb);
    }
  }

  stop(): void {
    this.timers.forEach(clearInterval);
  }

  /** Every sample as CSV (seconds since the first sample, process, MB), for a plot of the whole run. */
  writeCsv(file: string): void {
    const all = [...this.samples].flatMap(([name, list]) => list.map((sample) => ({ name, ...sample })));
    const start = Math.min(...all.map((sample) => sample.at));
    const lines = all
      .sort((a, b) => a.at - b.at)
      .map((sample) => `${((sample.at - start) / 1000).toFixed(0)},${sample.name},${sample.mb.toFixed(1)}`);
    writeFileSync(file, ['seconds,process,rss_mb', ...lines].join('\n') + '\n');
  }

  /** Samples of `name` taken in [from, to). */
  between(name: string, from: number, to: number): Array<{ at: number; mb: number }> {
    return (this.samples.get(name) ?? []).filter((sample) => sample.at >= from && sample.at < to);
  }
}

export interface Flatness {
  first: number;
  last: number;
  min: number;
  max: number;
  /**
   * The Theil–Sen trend over the samples' time span: the median of the slopes between every two samples,
   * times the window's length. A leak shows as a steady rise, GC as a saw-tooth around a flat line. The
   * median, not a least-squares line: a few high points at one end of the window (a full GC's RSS before
   * the allocator gave pages back) tilt the least-squares line by several MB while the rest lies flat.
   */
  trendMb: number;
  /** The least-squares line's rise across the window, for comparison with the figures before Theil–Sen. */
  leastSquaresTrendMb: number;
}

export function flatness(samples: Array<{ at: number; mb: number }>): Flatness | undefined {
  if (samples.length === 0) return undefined;
  const values = samples.map((sample) => sample.mb);
  const sorted = [...values].sort((a, b) => a - b);
  const span = must(samples.at(-1), 'a sample').at - must(samples[0], 'a sample').at;
  return {
    first: must(values[0], 'a first sample'),
    last: must(values.at(-1), 'a last sample'),
    min: must(sorted[0], 'a smallest sample'),
    max: must(sorted.at(-1), 'a largest sample'),
    trendMb: theilSenSlope(samples) * span,
    leastSquaresTrendMb: leastSquaresSlope(samples) * span,
  };
}

/** The median of the slopes between every two samples taken at different times (0 when there are none). */
export function theilSenSlope(samples: Array<{ at: number; mb: number }>): number {
  const slopes: number[] = [];
  for (let i = 0; i < samples.length; i++) {
    const a = must(samples[i], 'a sample');
    for (let j = i + 1; j < samples.length; j++) {
      const b = must(samples[j], 'a sample');
      if (b.at !== a.at) slopes.push((b.mb - a.mb) / (b.at - a.at));
    }
  }
  if (slopes.length === 0) return 0;
  const ordered = Float64Array.from(slopes).sort();
  const middle = ordered.length >> 1;
  return ordered.length % 2 === 1
    ? must(ordered[middle], 'a median')
    : (must(ordered[middle - 1], 'a median') + must(ordered[middle], 'a median')) / 2;
}

function leastSquaresSlope(samples: Array<{ at: number; mb: number }>): number {
  const meanAt = samples.reduce((sum, sample) => sum + sample.at, 0) / samples.length;
  const meanMb = samples.reduce((sum, sample) => sum + sample.mb, 0) / samples.length;
  const covariance = samples.reduce((sum, sample) => sum + (sample.at - meanAt) * (sample.mb - meanMb), 0);
  const variance = samples.reduce((sum, sample) => sum + (sample.at - meanAt) ** 2, 0);
  return variance === 0 ? 0 : covariance / variance;
}
