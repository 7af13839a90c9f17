import { spawn, spawnSync } from 'node:child_process';
import { describe, expect, it, inject } from 'vitest';
import { freePort } from '../../src/dev/redis-server.js';
import { uniqueName } from '../helpers/app.js';
import { waitFor } from '../helpers/wait.js';

const root = new URL('../..', import.meta.url).pathname;
const node = (script: string, env: Record<string, string>) =>
  spawn(process.execPath, ['--import', 'tsx', script], {
    cwd: root,
    env: { ...process.env, LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });

describe('process entry points', () => {
  it('invalid configuration stops the process with one line naming the variable', () => {
    const result = spawnSync(process.execPath, ['--import', 'tsx', 'src/server.ts'], {
      cwd: root,
      env: { ...process.env, PORT: 'not-a-port', MONGO_URL: 'mongodb://127.0.0.1:1' },
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(result.status).toBe(1);
    const lines = result.stderr
      .trim()
      .split('\n')
      .filter((line) => !line.includes('ExperimentalWarning'));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^Invalid configuration: PORT: /);
  });

  it('the web process serves, then on SIGTERM stops accepting and exits 0 within 10 s', async () => {
    const port = await freePort();
    const child = node('src/server.ts', {
      PORT: String(port),
      HOST: '127.0.0.1',
      MONGO_URL: inject('mongoUrl'),
      MONGO_DB: uniqueName('proc'),
      REDIS_URL: inject('redisUrl'),
      QUEUE_PREFIX: uniqueName('q'),
      ADMIN_TOKEN: 'process-test-admin-token',
    });
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    try {
      const ready = await waitFor(
        async () => {
          try {
            return (await fetch(`http://127.0.0.1:${port}/readyz`)).status === 200;
          } catch {
            return false;
          }
        },
        20_000,
        100,
      );
      expect(ready).toBe(true);
      const started = Date.now();
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
      expect(Date.now() - started).toBeLessThan(10_000);
      await expect(fetch(`http://127.0.0.1:${port}/healthz`)).rejects.toThrow();
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  }, 40_000);
});
