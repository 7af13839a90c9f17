import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { buildTestApp, TEST_ADMIN_TOKEN, uniqueName, type TestApp } from '../helpers/app.js';
import { compiledTree, REPO_ROOT, run, TINI, type RunningProcess } from '../helpers/compiled.js';
import { createTenant, ext } from '../helpers/fixtures.js';
import { waitFor } from '../helpers/wait.js';
import { Receiver } from '../hooks/receiver.js';

/** close-with-grace's forced exit in server.ts and workers/main.ts; compose's stop_grace_period is above it. */
const GRACE_MS = 10_000;

/** The argv of the Dockerfile's CMD (exec form), as `docker run` would start it. */
function dockerfileCommand(): string[] {
  const cmd = readFileSync(`${REPO_ROOT}/Dockerfile`, 'utf8').match(/^CMD (\[.*\])\s*$/m);
  expect(cmd, 'the Dockerfile CMD is in exec form').not.toBeNull();
  return JSON.parse(cmd![1]!);
}

function composeCommand(service: string): string[] {
  return parse(readFileSync(`${REPO_ROOT}/docker-compose.yml`, 'utf8')).services[service].command;
}

let t: TestApp;
let dir: string;
const started: RunningProcess[] = [];
beforeAll(async () => {
  [t, dir] = await Promise.all([buildTestApp({}, { publisher: true }), compiledTree()]);
});
afterAll(async () => {
  for (const process of started) if (process.child.exitCode === null) process.child.kill('SIGKILL');
  await t?.close();
});

function start(argv: string[], env: Record<string, string>): RunningProcess {
  const process = run(
    argv,
    dir,
    {
      NODE_ENV: 'production', // as the Dockerfile sets it
      MONGO_URL: t.config.MONGO_URL!,
      MONGO_DB: t.config.MONGO_DB,
      REDIS_URL: t.config.REDIS_URL,
      QUEUE_PREFIX: t.config.QUEUE_PREFIX,
      ADMIN_TOKEN: TEST_ADMIN_TOKEN,
      LOG_LEVEL: 'info',
      ...env,
    },
    true,
  );
  started.push(process);
  return process;
}

async function terminate(process: RunningProcess) {
  const signalled = Date.now();
  process.child.kill('SIGTERM'); // to tini when installed, which forwards it as Docker's init does
  const exit = await process.exited;
  return { ...exit, ms: Date.now() - signalled };
}

describe(`SIGTERM as a container delivers it (${TINI ? 'tini' : 'no tini installed: the test process'} as PID 1's stand-in)`, () => {
  it('the web CMD finishes a request in flight, then exits 0 within the grace period', async () => {
    const argv = dockerfileCommand();
    expect(argv[0]).toBe('node'); // no npm or shell between the init and node
    const web = start(argv, { HOST: '127.0.0.1', PORT: '0', MONGO_DB: uniqueName('t') });
    const listening = await web.waitForLine(/Server listening at http:\/\/127\.0\.0\.1:\d+/);
    const port = Number(/127\.0\.0\.1:(\d+)/.exec(listening)![1]);

    // A request whose headers the server has (it answered 100 Continue) and whose body is still to come.
    const body = JSON.stringify({ name: 'Drained Inc' });
    const inFlight = request({
      host: '127.0.0.1',
      port,
      method: 'POST',
      path: '/v1/admin/companies',
      headers: {
        authorization: `Bearer ${TEST_ADMIN_TOKEN}`,
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(body),
        expect: '100-continue',
      },
    });
    const answered = new Promise<{ status: number; connection?: string; body: string }>((resolve, reject) => {
      inFlight.on('response', (response) => {
        let text = '';
        response.on('data', (chunk) => (text += chunk));
        response.on('end', () =>
          resolve({ status: response.statusCode!, connection: response.headers.connection, body: text }),
        );
      });
      inFlight.on('error', reject);
    });
    await new Promise((resolve) => inFlight.once('continue', resolve));

    const stopping = terminate(web);
    await web.waitForLine(/"msg":"shutting down"/);
    inFlight.end(body);
    const response = await answered;
    expect(response.status, response.body).toBe(201);
    expect(response.connection).toBe('close');
    expect(JSON.parse(response.body).name).toBe('Drained Inc');

    const exit = await stopping;
    expect(exit).toMatchObject({ code: 0, signal: null });
    expect(exit.ms).toBeLessThan(GRACE_MS);
    process.stdout.write(
      `web (${[TINI, TINI && '--', ...argv].filter(Boolean).join(' ')}): exit ${exit.code} ${exit.ms} ms after SIGTERM\n` +
        `${web.lines.filter((line) => /shutting down|Server listening|closing/.test(line)).join('\n')}\n`,
    );
  }, 120_000);

  it('serves a request whose headers were still arriving when SIGTERM came (no 503 for work that reached it)', async () => {
    const web = start(dockerfileCommand(), { HOST: '127.0.0.1', PORT: '0', MONGO_DB: uniqueName('t') });
    const listening = await web.waitForLine(/Server listening at http:\/\/127\.0\.0\.1:\d+/);
    const port = Number(/127\.0\.0\.1:(\d+)/.exec(listening)![1]);

    // The connection is busy (a request has begun), so closing keeps it; the request is routed only
    // once its headers are complete, after the process began to close: the race a keep-alive client's
    // next request runs with a SIGTERM.
    const body = JSON.stringify({ name: 'Late Headers Inc' });
    const socket = connect(port, '127.0.0.1');
    let raw = '';
    socket.on('data', (chunk) => (raw += chunk.toString('utf8')));
    const closed = new Promise((resolve) => socket.once('close', resolve));
    await new Promise((resolve) => socket.once('connect', resolve));
    socket.write('POST /v1/admin/companies HTTP/1.1\r\nHost: 127.0.0.1\r\n');

    const stopping = terminate(web);
    await web.waitForLine(/"msg":"shutting down"/);
    await new Promise((resolve) => setTimeout(resolve, 300)); // well into the close
    socket.write(
      `Authorization: Bearer ${TEST_ADMIN_TOKEN}\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
    await closed; // the server closes the connection after its answer
    const [head = '', responseBody = ''] = raw.split('\r\n\r\n');
    expect(head.split('\r\n')[0], raw).toBe('HTTP/1.1 201 Created');
    expect(head.toLowerCase()).toContain('connection: close');
    expect(JSON.parse(responseBody).name).toBe('Late Headers Inc');
    expect(await stopping).toMatchObject({ code: 0, signal: null });
  }, 120_000);

  it('the compose worker command lets a webhook in flight finish, records it once, then exits 0', async () => {
    const argv = composeCommand('worker');
    expect(argv[0]).toBe('node');
    const receiver = await Receiver.start(() => ({ status: 200, delayMs: 1_500 }));
    try {
      const worker = start(argv, { WORKERS: 'hooks', HOOK_ALLOW_PRIVATE_TARGETS: 'true' });
      await worker.waitForLine(/worker process ready/);
      const tenant = await createTenant(t.app);
      const hook = await ext(t.app, tenant.key, 'POST', '/hooks', {
        target_url: receiver.url(),
        event: 'task.created',
      });
      expect(hook.statusCode, hook.body).toBe(201);
      const task = await ext(t.app, tenant.key, 'POST', '/tasks', {
        title: 'Drain me',
        due_at: '2030-01-01T10:00:00Z',
      });
      expect(task.statusCode, task.body).toBe(201);

      expect(await waitFor(() => receiver.requests.length === 1, 60_000)).toBe(true);
      const exit = await terminate(worker); // the receiver answers 1.5 s later
      expect(worker.lines.some((line) => line.includes('"msg":"shutting down"'))).toBe(true);
      expect(exit).toMatchObject({ code: 0, signal: null });
      expect(exit.ms).toBeLessThan(GRACE_MS);
      expect(exit.ms).toBeGreaterThan(500); // it waited for the receiver
      expect(receiver.requests).toHaveLength(1);

      const deliveries = await ext(t.app, tenant.key, 'GET', `/hooks/${hook.json().hook_id}/deliveries`);
      expect(deliveries.json()).toMatchObject([{ event_type: 'task.created', succeeded: true, status_code: 200 }]);
      process.stdout.write(
        `worker (${[TINI, TINI && '--', ...argv].filter(Boolean).join(' ')}): exit ${exit.code} ${exit.ms} ms after SIGTERM\n` +
          `${worker.lines.filter((line) => /shutting down|worker process ready/.test(line)).join('\n')}\n`,
      );
    } finally {
      await receiver.close();
    }
  }, 120_000);
});
