import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { connect } from 'node:net';
import { networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/dev/redis-server.js';
import { testConfig, uniqueName } from '../helpers/app.js';
import { stopGracefully } from '../helpers/processes.js';

const stateDir = mkdtempSync(join(tmpdir(), 'dev-state-'));
afterAll(() => rmSync(stateDir, { recursive: true, force: true }));

interface DevRun {
  child: ChildProcess;
  output: () => string;
  port: number;
  token: string;
  key: string;
}

/** `npm run dev` as a newcomer starts it, on the test's MongoDB and Redis, each run on a fresh database. */
async function startDev(): Promise<DevRun> {
  const config = testConfig();
  const port = await freePort();
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/dev.ts'], {
    cwd: new URL('../..', import.meta.url).pathname,
    env: {
      ...process.env,
      HOST: '',
      ADMIN_TOKEN: '',
      PORT: String(port),
      MONGO_URL: config.MONGO_URL!,
      MONGO_DB: uniqueName('dev'),
      REDIS_URL: config.REDIS_URL,
      QUEUE_PREFIX: uniqueName('q'),
      DEV_STATE_DIR: stateDir,
      LOG_LEVEL: 'info',
      NODE_ENV: 'development',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk) => (output += chunk));
  child.stderr.on('data', (chunk) => (output += chunk));
  const printed = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`dev did not start:\n${output}`)), 90_000);
    const check = () => {
      if (/try\s+:/.test(output)) {
        clearTimeout(timer);
        resolve(output);
      }
    };
    child.stdout.on('data', check);
    child.once('exit', (code) => reject(new Error(`dev exited ${code}:\n${output}`)));
  });
  const token = /admin token : (\S+)/.exec(printed)?.[1];
  const key = /demo API key: (\S+)/.exec(printed)?.[1];
  expect(token).toBeDefined();
  expect(key).toMatch(/^prk_/);
  return { child, output: () => output, port, token: token!, key: key! };
}

const refusesConnection = (host: string, port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = connect({ host, port });
    socket.once('connect', () => (socket.destroy(), resolve(false)));
    socket.once('error', () => resolve(true));
  });

const externalAddress = Object.values(networkInterfaces())
  .flat()
  .find((address) => address && address.family === 'IPv4' && !address.internal)?.address;

describe('npm run dev', () => {
  it('binds 127.0.0.1, keeps its admin token and demo key across restarts, and says when it stops', async () => {
    const first = await startDev();
    let second: DevRun | undefined;
    try {
      expect(first.output()).toContain(`on http://127.0.0.1:${first.port}, listening on 127.0.0.1`);
      // The Redis it was given is named as one it did not start.
      expect(first.output()).toMatch(/redis\s+: redis:\/\/\S+ from REDIS_URL \(not started by npm run dev/);
      const answer = await fetch(`http://127.0.0.1:${first.port}/v1/ext/pipelines`, {
        headers: { 'x-api-key': first.key },
      });
      expect(answer.status).toBe(200);
      if (externalAddress) expect(await refusesConnection(externalAddress, first.port)).toBe(true);
      expect(await stopGracefully(first.child)).toBe(0);
      expect(first.output()).toContain('dev server stopped');
      expect(statSync(join(stateDir, 'state.json')).mode & 0o777).toBe(0o600);

      // A second start, on an empty database: the same token and key, and both work.
      second = await startDev();
      expect(second.token).toBe(first.token);
      expect(second.key).toBe(first.key);
      const pipelines = await fetch(`http://127.0.0.1:${second.port}/v1/ext/pipelines`, {
        headers: { 'x-api-key': second.key },
      });
      expect(pipelines.status).toBe(200);
      expect(((await pipelines.json()) as unknown[]).length).toBe(1);
      const companies = await fetch(`http://127.0.0.1:${second.port}/v1/admin/companies`, {
        method: 'POST',
        headers: { authorization: `Bearer ${second.token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'Acme' }),
      });
      expect(companies.status).toBe(201);
      // Piped output is JSON lines, each naming its process once.
      const lines = second
        .output()
        .split('\n')
        .filter((line) => line.startsWith('{'));
      expect(lines.length).toBeGreaterThan(0);
      for (const line of lines) expect(line.match(/"name":/g)?.length, line).toBe(1);
    } finally {
      await stopGracefully(first.child);
      if (second) await stopGracefully(second.child);
    }
  }, 240_000);

  it('without redis-server on PATH and without REDIS_URL, stops at once and says what to install', async () => {
    const run = spawnSync(process.execPath, ['--import', 'tsx', 'src/dev.ts'], {
      cwd: new URL('../..', import.meta.url).pathname,
      env: { ...process.env, PATH: '/nonexistent', REDIS_URL: '', DEV_STATE_DIR: stateDir },
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(run.status, run.stderr).toBe(1);
    expect(run.stderr).toContain('npm run dev: no redis-server on PATH');
    expect(run.stderr).toContain('REDIS_URL=redis://host:port');
  }, 90_000);
});
