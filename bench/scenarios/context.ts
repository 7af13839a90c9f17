import type { CompareSettings } from '../load.js';
import type { BenchOptions } from '../options.js';
import type { RssSampler } from '../rss.js';
import type { Seeded } from '../seed.js';
import type { Stack } from '../stack.js';

export interface BenchContext {
  stack: Stack;
  seeded: Seeded;
  options: BenchOptions;
  /** Samples the web process's memory all along (scraping its /metrics every 5 s). */
  sampler: RssSampler;
}

export function compareSettings(options: BenchOptions): CompareSettings {
  return {
    runs: options.runs,
    warmupSeconds: options.warmupSeconds,
    runSeconds: options.runSeconds,
    connections: options.connections,
    ...(options.rate ? { overallRate: options.rate } : {}),
  };
}

/**
 * A throughput comparison in turns, judged on its ratio: the same seconds per side as compareSettings, cut into
 * four times as many runs (at least 2 s each), so each run's two sides are measured seconds apart, not a quarter
 * of a minute. A shared machine's speed can drift by half within a minute; in long turns a slow spell falls on
 * one side of a pair, in short ones on both.
 */
export function inTurnsSettings(options: BenchOptions): CompareSettings {
  const slices = options.quick ? 1 : 4;
  return {
    ...compareSettings(options),
    runs: options.runs * slices,
    runSeconds: Math.max(2, Math.round(options.runSeconds / slices)),
  };
}

/**
 * CPU per request is compared apart from throughput: both sides loaded at once at this share of the lower of
 * their throughputs (so neither saturates and a slow spell of the machine falls on both), after a joint warm-up.
 * At saturation in turns, one run's CPU ratio moves by a third with the machine's spells.
 */
const CPU_LOAD_SHARE = 0.3;

/** The rate (req/s, a multiple of 100, at least 100) at which each side is loaded for the CPU comparison. */
export function cpuComparisonRate(lowerRps: number): number {
  return Math.max(100, Math.round((lowerRps * CPU_LOAD_SHARE) / 100) * 100);
}

/**
 * Warm-up of a comparison whose sides are loaded at once, taken together: a traced process has more code to
 * compile, and its sampled path runs for one request in twenty; warmed up in turns, its first run would
 * still measure compilation.
 */
const JOINT_WARMUP_SECONDS = 10;

/** Both sides loaded at once, each at `rate` req/s: for CPU per request below saturation (bench/load.ts `together`). */
export function atOnceSettings(options: BenchOptions, rate: number, minRuns = options.runs): CompareSettings {
  return {
    ...compareSettings(options),
    // At least minRuns runs (unless --quick): one run's ratio moves by ±0.1 on this machine.
    runs: options.quick ? options.runs : Math.max(options.runs, minRuns),
    overallRate: rate,
    together: true,
    warmupSeconds: options.quick ? options.warmupSeconds : Math.max(options.warmupSeconds, JOINT_WARMUP_SECONDS),
  };
}

export const json = { 'content-type': 'application/json' };
