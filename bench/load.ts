import autocannon from 'autocannon';
import { must } from '../src/shared/must.js';
import { CoreSwap, pairedRatios } from './cores.js';
import { cpuMeter, formatUsage } from './cpu.js';

/** One side of a comparison: where to send what. Built afresh for every run (rotations, versions). */
export interface LoadTarget {
  url: string;
  method?: 'GET' | 'POST' | 'PATCH';
  headers?: Record<string, string>;
  body?: string;
  /** Per-request paths, bodies and response hooks (autocannon's `requests`). */
  requests?: autocannon.Request[];
  /** Requests per second over all connections; unset means as fast as the server answers. */
  overallRate?: number;
  /** The process answering (as named in the CPU meter), for its CPU time per request. */
  server?: string;
}

export interface Figures {
  /** 2xx responses per second. */
  rps: number;
  p50: number;
  p99: number;
  /** Non-2xx answers and connection errors: a scenario with many is measuring the wrong thing. */
  failures: number;
  requests: number;
  /** Percent of one core used by each process during the (last) run, busiest first. */
  cpu: string;
  /**
   * CPU milliseconds the serving process spent per request: unlike req/s this hardly moves when
   * other work competes for the cores, so it is the steadier measure of our own cost.
   */
  serverCpuMs?: number;
}

export interface Comparison {
  ours: Figures;
  baseline: Figures;
  runs: number;
  /** Each run's CPU per request of ours over the baseline's (the two measured next to each other). */
  cpuRatios: number[];
  /**
   * At once with the sides trading cores within every run (CoreSwap): each pair of runs' geometric mean of
   * cpuRatios, the ratios the comparison is judged on.
   */
  cpuPairRatios?: number[];
  /** Each run's req/s of ours over the baseline's (the two measured next to each other). */
  rpsRatios: number[];
}

export async function fire(target: LoadTarget, seconds: number, connections: number): Promise<Figures> {
  const before = cpuMeter.snapshot();
  const result = await autocannon({
    url: target.url,
    method: target.method ?? 'GET',
    headers: target.headers,
    body: target.body,
    requests: target.requests,
    connections,
    duration: seconds,
    pipelining: 1,
    timeout: 10,
    ...(target.overallRate ? { overallRate: target.overallRate } : {}),
  });
  const usage = cpuMeter.usedSince(before);
  const serverSeconds = target.server ? usage.seconds.get(target.server) : undefined;
  const answered = result['2xx'] + result.non2xx;
  return {
    rps: result['2xx'] / result.duration,
    p50: result.latency.p50,
    p99: result.latency.p99,
    failures: result.non2xx + result.errors,
    requests: result['2xx'] + result.non2xx,
    cpu: formatUsage(usage),
    serverCpuMs: serverSeconds === undefined || answered === 0 ? undefined : (serverSeconds * 1000) / answered,
  };
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  const upper = must(sorted[middle], 'a value (runs >= 1)');
  return sorted.length % 2 ? upper : ((sorted[middle - 1] ?? upper) + upper) / 2;
}

function medianFigures(runs: Figures[]): Figures {
  return {
    rps: median(runs.map((run) => run.rps)),
    p50: median(runs.map((run) => run.p50)),
    p99: median(runs.map((run) => run.p99)),
    failures: runs.reduce((sum, run) => sum + run.failures, 0),
    requests: runs.reduce((sum, run) => sum + run.requests, 0),
    cpu: must(runs.at(-1), 'a run').cpu,
    serverCpuMs: runs.some((run) => run.serverCpuMs === undefined)
      ? undefined
      : median(runs.map((run) => run.serverCpuMs!)),
  };
}

export interface CompareSettings {
  runs: number;
  warmupSeconds: number;
  runSeconds: number;
  connections: number;
  /** Both sides at this many requests per second (--rate), unless a target sets its own. */
  overallRate?: number;
  /**
   * Both sides loaded at the same time (each at its fixed rate) instead of in turns: the machine's slow and
   * fast spells, which moved one process's CPU per request by 15% between two turns a minute apart, then
   * fall on both alike. Only for comparisons of CPU per request at a fixed rate. Where both targets name their
   * server, each side has a core of its own, the two traded every CORE_SWAP_PERIOD_MS (CoreSwap), and the runs
   * are made even.
   */
  together?: boolean;
}

/**
 * How often the two sides of an at-once comparison trade cores within a run (CoreSwap.alternate): swapped only
 * between runs, one core slower for a whole run tilts that run's ratio; traded every half second within it,
 * each side spends as long on each core, and an A/A pair's runs spread less.
 */
const CORE_SWAP_PERIOD_MS = 500;

/**
 * Both sides are warmed up, then measured in alternation (ours, baseline, ours, ...), so drift in
 * the shared backends over the minutes of a run affects both alike. Medians over the runs.
 */
export async function compare(
  label: string,
  ours: () => Promise<LoadTarget> | LoadTarget,
  baseline: () => Promise<LoadTarget> | LoadTarget,
  settings: CompareSettings,
): Promise<Comparison> {
  process.stdout.write(`  ${label}: warm-up`);
  const paced = async (side: () => Promise<LoadTarget> | LoadTarget) => {
    const target = await side();
    return settings.overallRate && !target.overallRate ? { ...target, overallRate: settings.overallRate } : target;
  };
  let cores: CoreSwap | undefined;
  /** Loads both sides for `seconds`: at once (on cores of their own for `run`), or ours then the baseline. */
  const fireBoth = async (seconds: number, run = 0): Promise<[Figures, Figures]> => {
    if (!settings.together) {
      const oursFigures = await fire(await paced(ours), seconds, settings.connections);
      return [oursFigures, await fire(await paced(baseline), seconds, settings.connections)];
    }
    const [oursTarget, baselineTarget] = await Promise.all([paced(ours), paced(baseline)]);
    cores ??= CoreSwap.of(
      oursTarget.server ? cpuMeter.pidOf(oursTarget.server) : undefined,
      baselineTarget.server ? cpuMeter.pidOf(baselineTarget.server) : undefined,
    );
    const stopSwapping = await cores?.alternate(run, CORE_SWAP_PERIOD_MS);
    try {
      return await Promise.all([
        fire(oursTarget, seconds, settings.connections),
        fire(baselineTarget, seconds, settings.connections),
      ]);
    } finally {
      await stopSwapping?.();
    }
  };
  const oursRuns: Figures[] = [];
  const baselineRuns: Figures[] = [];
  const cpuRatios: number[] = [];
  const rpsRatios: number[] = [];
  let oursLast: Figures | undefined;
  let baselineLast: Figures | undefined;
  let runs = settings.runs;
  try {
    await fireBoth(settings.warmupSeconds);
    if (cores && runs % 2) runs++; // each side as many runs on each core
    for (let run = 0; run < runs; run++) {
      [oursLast, baselineLast] = await fireBoth(settings.runSeconds, run);
      oursRuns.push(oursLast);
      baselineRuns.push(baselineLast);
      const runRatio =
        oursLast.serverCpuMs !== undefined && baselineLast.serverCpuMs
          ? oursLast.serverCpuMs / baselineLast.serverCpuMs
          : undefined;
      if (runRatio !== undefined) cpuRatios.push(runRatio);
      if (baselineLast.rps > 0) rpsRatios.push(oursLast.rps / baselineLast.rps);
      process.stdout.write(
        `, run ${run + 1}: ${oursLast.rps.toFixed(0)} vs ${baselineLast.rps.toFixed(0)} req/s${runRatio === undefined ? '' : ` (CPU ${runRatio.toFixed(2)}×)`}`,
      );
    }
  } finally {
    await cores?.release();
  }
  process.stdout.write(
    `\n    CPU ours: ${oursLast?.cpu}; baseline: ${baselineLast?.cpu}${cores ? `; the two trading cores 0 and 1 every ${CORE_SWAP_PERIOD_MS} ms` : ''}\n`,
  );
  return {
    ours: medianFigures(oursRuns),
    baseline: medianFigures(baselineRuns),
    runs,
    cpuRatios,
    ...(cores && cpuRatios.length === runs ? { cpuPairRatios: pairedRatios(cpuRatios) } : {}),
    rpsRatios,
  };
}
