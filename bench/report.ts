import { median, type Comparison, type Figures } from './load.js';

/**
 * One line of the table. A row with a `target` is judged (PASS or FAIL); a row without one is information
 * ("info"), except that a run which broke (failed requests, events or rows lost) prints FAIL either way: its
 * figures measure something else.
 */
export interface Row {
  scenario: string;
  value: string;
  p50?: string;
  p99?: string;
  baseline?: string;
  ratio?: number;
  target?: string;
  /** Whether the target is met; false also marks a broken run of an information row. */
  pass?: boolean;
  /** Printed under the table, numbered. */
  note?: string;
}

export const int = (value: number) => Math.round(value).toLocaleString('en-US');
export const ms = (value: number) => (value >= 100 ? `${Math.round(value)} ms` : `${value.toFixed(1)} ms`);
/** A serving process's CPU per request, or n/a when it was not measured. */
export const cpuMs = (value: number | undefined) => (value === undefined ? 'n/a' : `${value.toFixed(3)} ms`);
/**
 * Ours / baseline CPU per request, when both were measured: the median of the runs' ratios (each run's
 * two sides measured next to each other, so a slow spell of the machine moves both), not the ratio of
 * the two medians, which pairs figures taken minutes apart. Sides swapped between cores every run: the
 * median of the pairs' ratios (bench/cores.ts).
 */
export const cpuRatio = (comparison: Pick<Comparison, 'ours' | 'baseline' | 'runs' | 'cpuRatios' | 'cpuPairRatios'>) =>
  comparison.cpuPairRatios
    ? median(comparison.cpuPairRatios)
    : comparison.cpuRatios.length === comparison.runs
      ? median(comparison.cpuRatios)
      : comparison.ours.serverCpuMs !== undefined && comparison.baseline.serverCpuMs !== undefined
        ? comparison.ours.serverCpuMs / comparison.baseline.serverCpuMs
        : undefined;

const times = (ratio: number) => `${ratio.toFixed(2)}×`;

/**
 * The runs' ours / baseline CPU ratios, as "1.02×, 0.98×, …", or by pair of runs when the sides swapped cores:
 * "1.00× (1.06× / 0.95×), …", the pair's geometric mean with its two runs.
 */
export const cpuRatiosText = (comparison: Pick<Comparison, 'cpuRatios' | 'cpuPairRatios'>) =>
  comparison.cpuPairRatios
    ? comparison.cpuPairRatios
        .map(
          (pair, index) =>
            `${times(pair)} (${times(comparison.cpuRatios[2 * index]!)} / ${times(comparison.cpuRatios[2 * index + 1]!)})`,
        )
        .join(', ')
    : comparison.cpuRatios.map(times).join(', ');

function failures(figures: Figures): string {
  return figures.failures > 0
    ? ` (${int(figures.failures)} non-2xx/errors of ${int(figures.requests + figures.failures)})`
    : '';
}

function cpuPerRequest(comparison: Comparison): string {
  const { ours, baseline } = comparison;
  if (ours.serverCpuMs === undefined || baseline.serverCpuMs === undefined) return '';
  return `CPU of the serving process per request: ours ${ours.serverCpuMs.toFixed(3)} ms, baseline ${baseline.serverCpuMs.toFixed(3)} ms (medians; ours / baseline by run: ${cpuRatiosText(comparison)}). `;
}

/**
 * Ours / baseline throughput: the median of the runs' ratios, as for CPU (cpuRatio), each run's two sides
 * measured one right after the other; the ratio of the two medians pairs one side's run with the other's
 * of another minute, when the machine may have been faster or slower.
 */
export const rpsRatio = (comparison: Pick<Comparison, 'ours' | 'baseline' | 'runs' | 'rpsRatios'>) =>
  comparison.rpsRatios.length === comparison.runs
    ? median(comparison.rpsRatios)
    : comparison.ours.rps / comparison.baseline.rps;

/** The runs' ours / baseline req/s ratios, as "1.02×, 0.98×, …". */
const rpsRatiosText = (comparison: Pick<Comparison, 'rpsRatios'>) =>
  comparison.rpsRatios.map((ratio) => `${ratio.toFixed(2)}×`).join(', ');

/**
 * A request scenario against a baseline: judged on its throughput ratio when `minRatio` is given, else
 * information (a run with failed requests is FAIL either way).
 */
export function comparisonRow(
  scenario: string,
  comparison: Comparison,
  minRatio: number | undefined,
  note?: string,
): Row {
  const ratio = rpsRatio(comparison);
  const failed = comparison.ours.failures + comparison.baseline.failures;
  return {
    scenario,
    value: `${int(comparison.ours.rps)}${failures(comparison.ours)}`,
    p50: ms(comparison.ours.p50),
    p99: ms(comparison.ours.p99),
    baseline: `${int(comparison.baseline.rps)}${failures(comparison.baseline)} (p50 ${ms(comparison.baseline.p50)}, p99 ${ms(comparison.baseline.p99)})`,
    ratio,
    ...(minRatio === undefined
      ? { pass: failed === 0 ? undefined : false }
      : // Failed requests make the figures meaningless: never a pass then.
        { target: `ratio ≥ ${minRatio}`, pass: ratio >= minRatio && failed === 0 }),
    note: `${note ? `${note} ` : ''}Throughput ours / baseline by run: ${rpsRatiosText(comparison)} (ratio of the medians ${(comparison.ours.rps / comparison.baseline.rps).toFixed(2)}). ${cpuPerRequest(comparison)}CPU (% of one core) during ours: ${comparison.ours.cpu}; during the baseline: ${comparison.baseline.cpu}.`,
  };
}

/** PASS, FAIL, or info for a row without a target (FAIL still, when its run broke). */
export function resultOf(row: Pick<Row, 'target' | 'pass'>): 'PASS' | 'FAIL' | 'info' {
  if (row.pass === false) return 'FAIL';
  return row.target === undefined || row.pass === undefined ? 'info' : 'PASS';
}

export function renderTable(rows: Row[], runs: number): string {
  const header = [
    'scenario',
    `ours (req/s, median of ${runs})`,
    'p50',
    'p99',
    'baseline req/s',
    'ratio',
    'target',
    'result',
  ];
  const notes: string[] = [];
  const lines = rows.map((row) => {
    let scenario = row.scenario;
    if (row.note) {
      notes.push(row.note);
      scenario += ` [${notes.length}]`;
    }
    return [
      scenario,
      row.value,
      row.p50 ?? '',
      row.p99 ?? '',
      row.baseline ?? '',
      row.ratio === undefined ? '' : row.ratio.toFixed(2),
      row.target ?? '',
      resultOf(row),
    ];
  });
  const escape = (cell: string) => cell.replace(/\|/g, '\\|');
  const table = [header, header.map(() => '---'), ...lines].map((cells) => `| ${cells.map(escape).join(' | ')} |`);
  return [...table, '', ...notes.map((note, index) => `[${index + 1}] ${note}`)].join('\n');
}
