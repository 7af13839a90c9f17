import { connect, createServer } from 'node:net';
import { MongoClient } from 'mongodb';
import { afterAll, beforeAll, describe, expect, it, inject } from 'vitest';
import { TEST_ADMIN_TOKEN, uniqueName } from '../helpers/app.js';
import { compiledTree, run, type RunningProcess } from '../helpers/compiled.js';
import type { AddressInfo, Server } from 'node:net';

const WEB = ['node', 'dist/src/server.js'];
const WORKER = ['node', 'dist/workers/main.js'];

/** A port nothing listens on (taken and released at once). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** A port held by another listener for the whole test file. */
async function busyPort(): Promise<{ port: number; server: Server }> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '0.0.0.0', resolve));
  return { port: (server.address() as AddressInfo).port, server };
}

let dir: string;
const started: RunningProcess[] = [];
const held: Server[] = [];
beforeAll(async () => {
  dir = await compiledTree();
});
afterAll(async () => {
  for (const process of started) if (process.child.exitCode === null) process.child.kill('SIGKILL');
  for (const server of held) server.close();
});

function start(argv: string[], env: Record<string, string>): RunningProcess {
  const process = run(argv, dir, {
    NODE_ENV: 'production',
    MONGO_URL: inject('mongoUrl'),
    MONGO_DB: uniqueName('t'),
    REDIS_URL: inject('redisUrl'),
    QUEUE_PREFIX: uniqueName('q'),
    ADMIN_TOKEN: TEST_ADMIN_TOKEN,
    HOST: '127.0.0.1',
    PORT: '0',
    LOG_LEVEL: 'info',
    ...env,
  });
  started.push(process);
  return process;
}

/** Output of a process that must fail: exit 1, every line JSON, no stack frame anywhere, the last line says why. */
async function expectOneLineFailure(process: RunningProcess, reason: RegExp) {
  const exit = await process.exited;
  expect(exit.code, process.lines.join('\n')).toBe(1);
  const entries = process.lines.map((line) => JSON.parse(line) as { level: number; msg: string; err?: unknown });
  expect(process.lines.join('\n')).not.toMatch(/\n\s+at |stack/);
  const last = entries.at(-1)!;
  expect(last.level).toBe(60); // fatal
  expect(last.msg).toMatch(/^cannot start: /);
  expect(last.msg).toMatch(reason);
  expect(last.err).toBeUndefined();
  return entries;
}

describe('start-up failures are short and readable', () => {
  it('web: MongoDB unreachable → one line per attempt with backoff, then one line and exit 1', async () => {
    const port = await closedPort();
    const web = start(WEB, { MONGO_URL: `mongodb://127.0.0.1:${port}`, STARTUP_TIMEOUT_MS: '6000' });
    const entries = await expectOneLineFailure(web, /MongoDB unreachable: gave up after \d+ attempts in \d+ s/);
    const retries = entries.filter((entry) => entry.msg === 'MongoDB unreachable at start; retrying');
    expect(retries.length).toBeGreaterThanOrEqual(2);
    expect(entries).toHaveLength(retries.length + 1); // nothing else printed
    const pauses = retries.map((entry) => (entry as unknown as { retry_in_ms: number }).retry_in_ms);
    expect(pauses[1]).toBeGreaterThan(pauses[0]!); // backoff grows
    process.stdout.write(`web, MongoDB unreachable:\n${web.lines.join('\n')}\n`);
  }, 60_000);

  it('web: MongoDB that comes up during the retries → the process starts', async () => {
    const port = await closedPort();
    const target = new URL(inject('mongoUrl'));
    const web = start(WEB, { MONGO_URL: `mongodb://127.0.0.1:${port}/?directConnection=true` });
    await web.waitForLine(/MongoDB unreachable at start; retrying/);
    // Now MongoDB "comes up" on that port: a TCP relay to the test's MongoDB.
    const relay = createServer((socket) => {
      const upstream = connect(Number(target.port), target.hostname);
      socket.pipe(upstream).pipe(socket);
      socket.on('error', () => upstream.destroy());
      upstream.on('error', () => socket.destroy());
    });
    await new Promise<void>((resolve) => relay.listen(port, '127.0.0.1', resolve));
    held.push(relay);
    await web.waitForLine(/"msg":"MongoDB reachable"/);
    await web.waitForLine(/Server listening at/);
    web.child.kill('SIGTERM');
    expect((await web.exited).code).toBe(0);
  }, 90_000);

  it('worker: Redis unreachable → retries, then one line and exit 1', async () => {
    const port = await closedPort();
    const worker = start(WORKER, { REDIS_URL: `redis://127.0.0.1:${port}`, STARTUP_TIMEOUT_MS: '2000' });
    const entries = await expectOneLineFailure(worker, /Redis unreachable: gave up after \d+ attempts .*ECONNREFUSED/);
    expect(entries.filter((entry) => entry.msg === 'Redis unreachable at start; retrying').length).toBeGreaterThan(0);
    process.stdout.write(`worker, Redis unreachable:\n${worker.lines.join('\n')}\n`);
  }, 60_000);

  it('worker: a busy METRICS_PORT → one line and exit 1', async () => {
    const { port, server } = await busyPort();
    held.push(server);
    const worker = start(WORKER, { METRICS_PORT: String(port) });
    const entries = await expectOneLineFailure(worker, new RegExp(`METRICS_PORT ${port} is already in use`));
    expect(entries).toHaveLength(1);
  }, 60_000);

  it('web: a busy PORT → one line and exit 1', async () => {
    const { port, server } = await busyPort();
    held.push(server);
    const web = start(WEB, { PORT: String(port), HOST: '0.0.0.0' });
    await expectOneLineFailure(web, new RegExp(`PORT ${port} is already in use`));
  }, 60_000);

  it('web and worker: a unique index declared otherwise than it exists → one line naming it and exit 1', async () => {
    const database = uniqueName('t');
    const client = await new MongoClient(inject('mongoUrl')).connect();
    try {
      // An older declaration of the unique index, as an existing database would have it.
      await client
        .db(database)
        .collection('idempotency_keys')
        .createIndex({ key_id: 1 }, { name: 'key_scope_unique', unique: true });
      const reason =
        /index idempotency_keys\.key_scope_unique exists with other keys or options than declared .*db\.idempotency_keys\.dropIndex\("key_scope_unique"\)/;
      await expectOneLineFailure(start(WEB, { MONGO_DB: database }), reason);
      await expectOneLineFailure(start(WORKER, { MONGO_DB: database }), reason);
    } finally {
      await client.db(database).dropDatabase();
      await client.close();
    }
  }, 60_000);
});
