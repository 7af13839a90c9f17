import { createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { uniqueName } from '../helpers/app.js';
import { compiledTree, run, type RunningProcess } from '../helpers/compiled.js';
import type { AddressInfo } from 'node:net';

const WORKER = ['node', 'dist/workers/main.js'];

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

let dir: string;
const started: RunningProcess[] = [];
beforeAll(async () => {
  dir = await compiledTree();
});
afterAll(() => {
  for (const process of started) if (process.child.exitCode === null) process.child.kill('SIGKILL');
});

async function startWorker(env: Record<string, string>) {
  const metricsPort = await freePort();
  const worker = run(WORKER, dir, {
    NODE_ENV: 'production',
    MONGO_URL: inject('mongoUrl'),
    MONGO_DB: uniqueName('t'),
    REDIS_URL: inject('redisUrl'),
    QUEUE_PREFIX: uniqueName('q'),
    ADMIN_TOKEN: 'unused-by-workers-0123456789abcdefghij',
    LOG_LEVEL: 'info',
    METRICS_PORT: String(metricsPort),
    ...env,
  });
  started.push(worker);
  const get = async (path: string) => {
    const response = await fetch(`http://127.0.0.1:${metricsPort}${path}`);
    const text = await response.text();
    return { status: response.status, text, json: () => JSON.parse(text) };
  };
  return { worker, get };
}

describe('worker health on METRICS_PORT', () => {
  it('a running worker is live and ready, with MongoDB, Redis and every role reported', async () => {
    const { worker, get } = await startWorker({});
    await worker.waitForLine(/worker process ready/);
    const ready = await get('/readyz');
    expect(ready.status, ready.text).toBe(200);
    expect(ready.json()).toEqual({
      mongo: 'ok',
      redis: 'ok',
      roles: { automations: 'running', hooks: 'running', overdue: 'running', relay: 'running', erasures: 'running' },
    });
    const live = await get('/healthz');
    expect(live.status).toBe(200);
    expect(live.json()).toMatchObject({ status: 'ok' });
    const metrics = await get('/metrics');
    expect(metrics.status).toBe(200);
    expect(metrics.text).toContain('webhook_deliveries_total');
    expect((await get('/nothing')).status).toBe(404);
    worker.child.kill('SIGTERM');
    expect((await worker.exited).code).toBe(0);
  }, 90_000);

  it('while MongoDB is awaited at start: live, not ready (mongo down, roles starting); SIGTERM exits cleanly', async () => {
    const closed = await freePort();
    const { worker, get } = await startWorker({ MONGO_URL: `mongodb://127.0.0.1:${closed}`, WORKERS: 'hooks,relay' });
    await worker.waitForLine(/MongoDB unreachable at start; retrying/);
    const ready = await get('/readyz');
    expect(ready.status).toBe(503);
    expect(ready.json()).toEqual({ mongo: 'down', redis: 'ok', roles: { hooks: 'starting', relay: 'starting' } });
    expect((await get('/healthz')).status).toBe(200);
    worker.child.kill('SIGTERM');
    expect(await worker.exited).toMatchObject({ code: 0 });
    expect(worker.lines.some((line) => line.includes('"msg":"shutting down"'))).toBe(true);
  }, 90_000);
});
