// Top self-time functions of a V8 .cpuprofile (from `node --cpu-prof`), e.g. the web process's
// profile written by `npm run bench -- --profile`. Standalone: `npx tsx bench/profile.ts FILE [TOP]`.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const ROOT = fileURLToPath(new URL('..', import.meta.url));

function where(node: ProfileNode): string {
  // Paths relative to the repository, also for the compiled tree the benchmark runs (dist/bench/).
  const url = node.callFrame.url
    .replace(/^file:\/\//, '')
    .replace(ROOT, '')
    .replace(/^dist\/bench\//, '');
  const name = node.callFrame.functionName || '(anonymous)';
  return url ? `${name} ${url}:${node.callFrame.lineNumber + 1}` : name;
}

/** Self time per function (summed over its call sites), as "percent  ms  function file:line" lines. */
export function topSelfTime(file: string, top = 25): string[] {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const self = new Map<string, number>();
  let total = 0;
  profile.samples.forEach((id, index) => {
    const delta = profile.timeDeltas[index] ?? 0;
    total += delta;
    const key = where(byId.get(id)!);
    self.set(key, (self.get(key) ?? 0) + delta);
  });
  const packages = new Map<string, number>();
  for (const [key, micros] of self) {
    const dependency = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(key)?.[1];
    const group =
      dependency ??
      (key.includes(' src/') || key.includes(' workers/')
        ? '(our code)'
        : key.startsWith('(')
          ? (key.split(' ')[0] ?? key)
          : '(node internals)');
    packages.set(group, (packages.get(group) ?? 0) + micros);
  }
  // Inclusive time of our own functions (src/, workers/): where the time goes below each of them.
  const parents = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parents.set(child, node.id);
  const inclusive = new Map<string, number>();
  profile.samples.forEach((id, index) => {
    const seen = new Set<string>();
    for (let current: number | undefined = id; current !== undefined; current = parents.get(current)) {
      const key = where(byId.get(current)!);
      if (!/ (src|workers)\//.test(key) || seen.has(key)) continue;
      seen.add(key);
      inclusive.set(key, (inclusive.get(key) ?? 0) + (profile.timeDeltas[index] ?? 0));
    }
  });
  const line = (micros: number, label: string) =>
    `${((micros / total) * 100).toFixed(1).padStart(5)}%  ${(micros / 1000).toFixed(0).padStart(7)} ms  ${label}`;
  return [
    `total sampled ${(total / 1e6).toFixed(1)} s`,
    'by function:',
    ...[...self]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([key, micros]) => line(micros, key)),
    'by package:',
    ...[...packages]
      .sort((a, b) => b[1] - a[1])
      .slice(0, 15)
      .map(([key, micros]) => line(micros, key)),
    'our functions, inclusive of what they call:',
    ...[...inclusive]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([key, micros]) => line(micros, key)),
  ];
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const [file, top] = process.argv.slice(2);
  if (!file) {
    console.error('usage: tsx bench/profile.ts FILE.cpuprofile [TOP]');
    process.exit(2);
  }
  console.log(topSelfTime(file, top ? Number(top) : 25).join('\n'));
}
