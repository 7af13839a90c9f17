import type { CompareSettings } from '../load.js';
import type { BenchOptions } from '../options.js';
import type { Seeded } from '../seed.js';
import type { Stack } from '../stack.js';

export interface BenchContext {
  stack: Stack;
  seeded: Seeded;
  options: BenchOptions;
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

export const json = { 'content-type': 'application/json' };
