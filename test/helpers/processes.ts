import { spawn, type ChildProcess } from 'node:child_process';
import { compiledTree, REPO_ROOT } from '../../scripts/compiled-tree.js';
import type { Config } from '../../src/shared/config.js';

/** A real worker process (`dist/workers/main.js` of the compiled tree) on the test's database, Redis and queue prefix. */
export async function spawnWorker(config: Config, env: Record<string, string>): Promise<ChildProcess> {
  const child = spawn(process.execPath, [`${await compiledTree()}/dist/workers/main.js`], {
    cwd: REPO_ROOT,
    env: {
      ...process.env,
      MONGO_URL: config.MONGO_URL!,
      MONGO_DB: config.MONGO_DB,
      REDIS_URL: config.REDIS_URL,
      QUEUE_PREFIX: config.QUEUE_PREFIX,
      LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'warn',
      NODE_ENV: 'test',
      ...env,
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  return child;
}

export async function killHard(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGKILL');
  await exited;
}

export async function stopGracefully(child: ChildProcess, timeoutMs = 15_000): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  try {
    return await exited;
  } finally {
    clearTimeout(timer);
  }
}
