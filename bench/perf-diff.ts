// Where one process spends more CPU than another, from two `perf record -k mono -e cpu-clock -g -p PID -o FILE`
// recordings of the same window (processes started by `npm run bench -- --profile=perf`, which writes V8's jitdump:
// JavaScript frames are named by `perf inject --jit`, run here first). Standalone: `npx tsx bench/perf-diff.ts
// OURS.data BASELINE.data [TOP]`. Both serve the same requests in the window (the tracing comparison's two sides
// loaded at once), so sample counts compare as CPU per request.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** One sample's frames, leaf first; JavaScript frames without perf's `JS:*` / `JS:~` prefixes. */
type Stack = string[];

/**
 * The recording with its JavaScript frames named from the jitdump (FILE.jit beside it, made once). The jitdump
 * records when each piece of code lived where, so a sample never takes the name of code that lived at its address
 * earlier, as it could with `--perf-basic-prof`'s map.
 */
function injected(file: string): string {
  const named = `${file}.jit`;
  if (!existsSync(named)) execFileSync('perf', ['inject', '--jit', '-i', file, '-o', named], { stdio: 'ignore' });
  return named;
}

function stacksOf(file: string): Stack[] {
  const script = execFileSync('perf', ['script', '-i', injected(file), '-F', 'ip,sym'], {
    encoding: 'utf8',
    maxBuffer: 1 << 30,
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  return script
    .split(/\n\s*\n/)
    .map((sample) =>
      sample
        .split('\n')
        .map((line) => line.trim().replace(/^[0-9a-f]+\s*/, ''))
        .filter(Boolean)
        .map((frame) => frame.replace(/^JS:[*~^]?/, '')),
    )
    .filter((stack) => stack.length > 0);
}

/** A frame of JavaScript (ours, a package's or Node's), not a V8 builtin, C++ or kernel frame. */
function isJavaScript(frame: string): boolean {
  return frame.includes('file://') || frame.includes('/node_modules/') || /\bnode:[a-z]/.test(frame); // not node::
}

const innermostJavaScript = (stack: Stack): string | undefined => stack.find(isJavaScript);

const EXPORT = /otlp-exporter|otlp-transformer|BatchSpanProcessor|_flushOneBatch/;
const TELEMETRY = /@opentelemetry|import-in-the-middle|bullmq-otel|\/src\/telemetry\/|node:internal\/async_hooks/;

/**
 * What a sample is spent on: the span export (anywhere in the stack), else the package (or file of ours, or
 * Node module) of its innermost JavaScript frame, with telemetry's own code under one name; samples without
 * JavaScript are GC or native (I/O, the event loop, V8's compiler threads).
 */
function categoryOf(stack: Stack): string {
  if (stack.some((frame) => EXPORT.test(frame))) return 'telemetry: span export';
  const leaf = innermostJavaScript(stack);
  if (leaf === undefined) {
    return stack.some((frame) => /Scaveng|Marking|Sweep|GarbageCollect|Heap::/.test(frame)) ? '(GC)' : '(native)';
  }
  if (TELEMETRY.test(leaf)) return 'telemetry: own code';
  return (
    /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(leaf)?.[1] ??
    /(node:[\w/]+)/.exec(leaf)?.[1] ??
    /\/((?:src|workers)\/[\w-]+)/.exec(leaf)?.[1] ??
    leaf
  );
}

function count(stacks: Stack[], key: (stack: Stack) => string | undefined): Map<string, number> {
  const counts = new Map<string, number>();
  for (const stack of stacks) {
    const name = key(stack);
    if (name !== undefined) counts.set(name, (counts.get(name) ?? 0) + 1);
  }
  return counts;
}

/** "+more  ours  baseline  name" lines, largest difference first, for both tables. */
export function perfDiff(oursFile: string, baselineFile: string, top = 25): string[] {
  const ours = stacksOf(oursFile);
  const baseline = stacksOf(baselineFile);
  const table = (key: (stack: Stack) => string | undefined, limit: number) => {
    const a = count(ours, key);
    const b = count(baseline, key);
    return [...new Set([...a.keys(), ...b.keys()])]
      .map((name) => ({ name, ours: a.get(name) ?? 0, baseline: b.get(name) ?? 0 }))
      .sort((x, y) => y.ours - y.baseline - (x.ours - x.baseline))
      .filter((row, index, rows) => index < limit || index >= rows.length - 5)
      .map((row) => {
        const more = row.ours - row.baseline;
        return `${(more > 0 ? `+${more}` : String(more)).padStart(6)} ${String(row.ours).padStart(6)} ${String(row.baseline).padStart(6)}  ${row.name.slice(0, 140)}`;
      });
  };
  return [
    `samples: ours ${ours.length}, baseline ${baseline.length} (${(ours.length / baseline.length).toFixed(3)}x)`,
    '  more   ours  base   by category (innermost JavaScript frame; the export wherever it appears):',
    ...table(categoryOf, top),
    '  more   ours  base   by JavaScript function (self, with the builtins and natives it calls):',
    ...table(innermostJavaScript, top),
  ];
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const [ours, baseline, top] = process.argv.slice(2);
  if (!ours || !baseline) {
    console.error('usage: tsx bench/perf-diff.ts OURS.perf.data BASELINE.perf.data [TOP]');
    process.exit(2);
  }
  console.log(perfDiff(ours, baseline, top ? Number(top) : 25).join('\n'));
}
