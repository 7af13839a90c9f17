import { createInterface } from 'node:readline';
import { compiled, type Children } from '../children.js';
import type { Row } from '../report.js';

const TIMEOUT_MS = 6 * 60_000;

/**
 * `npm run bench:overdue` (bench/overdue.ts, owned by the overdue scanner), run as it is in its own
 * process group once our services are stopped, so it has the machine to itself; its scan line is kept.
 */
export async function runOverdueBench(children: Children): Promise<Row[]> {
  console.log('Overdue scan (npm run bench:overdue)');
  const child = children.spawn('bench:overdue', process.execPath, [compiled('bench/overdue.ts')], {
    stdio: ['ignore', 'pipe', 'inherit'],
    detached: true,
  });
  const timer = setTimeout(() => void children.stop(child), TIMEOUT_MS);
  const lines: string[] = [];
  try {
    for await (const line of createInterface({ input: child.stdout! })) {
      lines.push(line);
      if (line.startsWith('scan:') || line.startsWith('memory')) console.log(`  ${line}`);
    }
  } finally {
    clearTimeout(timer);
    await children.stop(child);
  }
  const scan = lines.find((line) => line.startsWith('scan:'));
  const mongo = lines.find((line) => line.startsWith('mongo:'));
  return [
    {
      scenario: 'overdue scan: 100,000 tasks, 10,000 overdue (npm run bench:overdue)',
      value: scan ? scan.replace(/^scan:\s*/, '') : `no scan line (exit ${child.exitCode ?? child.signalCode})`,
      pass: scan ? undefined : false,
      note: `${lines.find((line) => line.startsWith('memory')) ?? ''} Backends: ${mongo?.replace(/^mongo:\s*/, '') ?? 'unknown'}.`,
    },
  ];
}
