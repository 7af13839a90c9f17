import { spawn, spawnSync, type ChildProcess } from 'node:child_process';

export { compiledTree, REPO_ROOT } from '../../scripts/compiled-tree.js';

/** tini (Docker's `--init` / compose's `init: true`) when installed, so signals reach node as in a container. */
export const TINI = spawnSync('tini', ['--version']).status === 0 ? 'tini' : undefined;

export interface RunningProcess {
  child: ChildProcess;
  /** Every stdout and stderr line so far. */
  lines: string[];
  /** Resolves with the first line matching, or rejects after `timeoutMs`. */
  waitForLine(pattern: RegExp, timeoutMs?: number): Promise<string>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Starts `argv` in `cwd` (under tini when `underInit` and tini is installed), collecting its output lines. */
export function run(argv: string[], cwd: string, env: Record<string, string>, underInit = false): RunningProcess {
  const [command = '', ...args] = underInit && TINI ? [TINI, '--', ...argv] : argv;
  const child = spawn(command, args, { cwd, env: { PATH: process.env.PATH ?? '', ...env }, stdio: 'pipe' });
  const lines: string[] = [];
  const waiters = new Set<() => void>();
  const collect = (chunk: Buffer) => {
    lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
    waiters.forEach((wake) => wake());
  };
  child.stdout.on('data', collect);
  child.stderr.on('data', collect);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  return {
    child,
    lines,
    exited,
    waitForLine(pattern, timeoutMs = 60_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const line = lines.find((candidate) => pattern.test(candidate));
          if (!line) return;
          waiters.delete(check);
          clearTimeout(timer);
          resolve(line);
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`no line matching ${pattern} within ${timeoutMs} ms; output:\n${lines.join('\n')}`));
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
  };
}
