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
 * Warm-up of a comparison whose sides are loaded at once, taken together: a traced process has more code to
 * compile, and its sampled path runs for one request in twenty. (Warmed up in turns, the traced side's first
 * run read 1.27-1.41x and its later ones 1.03-1.20x; warmed up together, the first runs were like the others.)
 */
const JOINT_WARMUP_SECONDS = 10;

/** Both sides loaded at once, each at `rate` req/s: for CPU per request below saturation (bench/load.ts `together`). */
export function atOnceSettings(options: BenchOptions, rate: number): CompareSettings {
  return {
    ...compareSettings(options),
    overallRate: rate,
    together: true,
    warmupSeconds: options.quick ? options.warmupSeconds : Math.max(options.warmupSeconds, JOINT_WARMUP_SECONDS),
  };
}

export const json = { 'content-type': 'application/json' };
