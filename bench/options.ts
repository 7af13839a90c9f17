import { mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const SCENARIO_GROUPS = [
  'crud',
  'batch',
  'overhead',
  'trips',
  'conventional',
  'tracing',
  'history',
  'export',
  'webhooks',
  'feed',
  'recovery',
  'memory',
  'overdue',
] as const;
export type ScenarioGroup = (typeof SCENARIO_GROUPS)[number];

export interface BenchOptions {
  quick: boolean;
  /** Measured runs per side; the table shows their median. */
  runs: number;
  warmupSeconds: number;
  runSeconds: number;
  /** autocannon connections, the same for our route and its baseline. */
  connections: number;
  /**
   * --rate: both sides of every request comparison at this many requests per second instead of as fast as
   * they answer. CPU per request is then measured below saturation, where it moves less between runs
   * (the req/s ratio reads 1.0 then). The tracing comparison, always at a fixed rate with both sides loaded at
   * once, takes it as each side's rate; the conventional comparison's CPU part picks its own.
   */
  rate?: number;
  /** Items in the benchmark company (list, get and PATCH scenarios). */
  items: number;
  /** Items of the export scenario's company (`--export-items=N`; 1,000,000, or 100,000 with --quick). */
  exportItems: number;
  /** Events fanned out in the webhook throughput scenario (and given to the bare worker). */
  webhookEvents: number;
  /** Backlogs of each worker in the webhook scenario, taken in turns (--runs, else 5: its figures vary more than the request rows'). */
  webhookRuns: number;
  /** Seconds of paced, not backlogged, webhook traffic for the latency figures. */
  webhookPacedSeconds: number;
  webhookPacedRate: number;
  soakSeconds: number;
  /** Requests per scenario for the Redis round-trip count. */
  redisTripRequests: number;
  /** Only the conventional comparisons whose route contains this text (`--route=tasks`); all when absent. */
  route?: string;
  /**
   * `--profile`: every measured process under --cpu-prof, their top self-time functions printed at the end.
   * `--profile=perf`: with V8's jitdump (--perf-prof) instead, for `perf record -k mono` (bench/perf-diff.ts compares two).
   */
  profile?: 'v8' | 'perf';
  groups: Set<ScenarioGroup>;
  /** Logs of the child processes and CPU profiles go here. */
  outDir: string;
  /** The whole benchmark is stopped (and every child killed) after this long. */
  deadlineSeconds: number;
}

const USAGE = `usage: npm run bench -- [--quick] [--profile[=perf]] [--only=${SCENARIO_GROUPS.join(',')}] [--runs=N] [--duration=S] [--rate=N] [--soak=S] [--route=TEXT] [--export-items=N]`;

export function parseOptions(argv: string[]): BenchOptions {
  const flags = new Map<string, string>();
  for (const arg of argv) {
    if (arg === '--help' || arg === '-h') {
      console.log(USAGE);
      process.exit(0);
    }
    const [, name, value] = /^--([a-z-]+)(?:=(.*))?$/.exec(arg) ?? [];
    if (name === undefined) throw new Error(`unknown argument ${arg}\n${USAGE}`);
    flags.set(name, value ?? 'true');
  }
  const known = new Set(['quick', 'profile', 'only', 'runs', 'duration', 'rate', 'soak', 'route', 'export-items']);
  for (const flag of flags.keys()) if (!known.has(flag)) throw new Error(`unknown option --${flag}\n${USAGE}`);

  const quick = flags.get('quick') === 'true';
  const only = flags
    .get('only')
    ?.split(',')
    .map((name) => name.trim()) ?? [...SCENARIO_GROUPS];
  for (const name of only)
    if (!(SCENARIO_GROUPS as readonly string[]).includes(name))
      throw new Error(`unknown scenario group ${name}\n${USAGE}`);
  // --quick skips the overdue scan: on the stand-in it alone takes about two minutes.
  const groups = new Set(
    (only as ScenarioGroup[]).filter((group) => !(quick && group === 'overdue' && !flags.has('only'))),
  );

  const outDir = join(tmpdir(), `pipeline-bench-${new Date().toISOString().replace(/[:.]/g, '-')}`);
  mkdirSync(outDir, { recursive: true });
  const number = (name: string, fallback: number) => {
    const value = flags.has(name) ? Number(flags.get(name)) : fallback;
    if (!Number.isFinite(value) || value <= 0) throw new Error(`--${name} must be a positive number`);
    return value;
  };

  return {
    quick,
    runs: number('runs', quick ? 1 : 3),
    warmupSeconds: quick ? 1 : 3,
    runSeconds: number('duration', quick ? 3 : 8),
    connections: 10,
    ...(flags.has('rate') ? { rate: number('rate', 0) } : {}),
    ...(flags.has('route') ? { route: flags.get('route') } : {}),
    items: quick ? 2_000 : 10_000,
    exportItems: number('export-items', quick ? 100_000 : 1_000_000),
    webhookEvents: quick ? 2_000 : 20_000,
    webhookRuns: number('runs', quick ? 1 : 5),
    webhookPacedSeconds: quick ? 3 : 15,
    webhookPacedRate: 100,
    soakSeconds: number('soak', quick ? 10 : 60),
    redisTripRequests: quick ? 100 : 500,
    ...profileOption(flags.get('profile')),
    groups,
    outDir,
    // --export-items: seeding and exporting take about 1 s per 4,000 items on the stand-in, more on a busy machine.
    deadlineSeconds:
      (quick ? 260 : 1_800) +
      (flags.has('soak') ? Number(flags.get('soak')) : 0) +
      (flags.has('export-items') ? Math.ceil(Number(flags.get('export-items')) / 2_000) : 0),
  };
}

function profileOption(value: string | undefined): Pick<BenchOptions, 'profile'> {
  if (value === undefined) return {};
  if (value === 'true') return { profile: 'v8' };
  if (value === 'perf') return { profile: 'perf' };
  throw new Error(`--profile takes no value or "perf"\n${USAGE}`);
}
