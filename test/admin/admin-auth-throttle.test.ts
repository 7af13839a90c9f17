import { spawnSync } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/shared/config.js';
import { buildTestApp, TEST_ADMIN_TOKEN, type TestApp } from '../helpers/app.js';
import { expectProblem } from '../helpers/fixtures.js';
import type { LightMyRequestResponse } from 'fastify';

/**
 * Issue 59 finding 3: the admin token could be guessed. 100 wrong bearer tokens on the admin API and 30
 * wrong logins on /admin/queues all answered 401, and production accepted ADMIN_TOKEN=a. Each test
 * builds its own app: its own queue prefix is its own failed-auth window (20 failures a minute).
 */
const LIMIT = 20;

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

let apps: TestApp[] = [];
afterEach(async () => {
  await Promise.all(apps.map((app) => app.close()));
  apps = [];
});
async function freshApp(): Promise<TestApp> {
  const app = await buildTestApp();
  apps.push(app);
  return app;
}

const adminCall = (t: TestApp, authorization?: string) =>
  t.app.inject({
    method: 'GET',
    url: '/v1/admin/companies/cmp_000000000000000000000000/api-keys',
    headers: authorization === undefined ? {} : { authorization },
  });
const boardCall = (t: TestApp, authorization?: string) =>
  t.app.inject({ method: 'GET', url: '/admin/queues', headers: authorization === undefined ? {} : { authorization } });
const basic = (password: string) => `Basic ${Buffer.from(`ops:${password}`).toString('base64')}`;

function expectThrottled(response: LightMyRequestResponse) {
  expectProblem(response, 429, 'rate_limited');
  expect(Number(response.headers['retry-after'])).toBeGreaterThan(0);
}

describe('the failed-auth throttle covers the admin API', () => {
  it('answers 429 to an address that keeps guessing the admin token, to every call, the right token included', async () => {
    const t = await freshApp();
    const statuses: number[] = [];
    for (let i = 0; i < LIMIT + 5; i++) statuses.push((await adminCall(t, `Bearer guess-${i}`)).statusCode);
    expect(statuses.slice(0, LIMIT)).toEqual(Array(LIMIT).fill(401));
    expect(statuses.slice(LIMIT)).toEqual(Array(5).fill(429));
    expectThrottled(await adminCall(t, 'Bearer one-more-guess'));
    // The right token is refused before it is compared: a guesser cannot tell a hit from a miss.
    expectThrottled(await adminCall(t, `Bearer ${TEST_ADMIN_TOKEN}`));
    expectThrottled(await adminCall(t));
  });

  it('does not count calls without an Authorization header, nor successful ones', async () => {
    const t = await freshApp();
    for (let i = 0; i < LIMIT + 10; i++) expectProblem(await adminCall(t), 401, 'unauthorized');
    for (let i = 0; i < LIMIT + 10; i++)
      expectProblem(await adminCall(t, `Bearer ${TEST_ADMIN_TOKEN}`), 404, 'not_found');
    expectProblem(await adminCall(t, 'Bearer a-wrong-one'), 401, 'unauthorized');
  });

  it('is in the admin OpenAPI document: 429 rate_limited with Retry-After on every admin operation', async () => {
    const t = await freshApp();
    const document = (await t.app.inject({ method: 'GET', url: '/v1/admin/openapi.json' })).json();
    let operations = 0;
    for (const byMethod of Object.values<Record<string, Json>>(document.paths))
      for (const operation of Object.values(byMethod)) {
        const tooMany = operation.responses['429'];
        expect(tooMany.content['application/problem+json'].examples.rate_limited.value.code).toBe('rate_limited');
        expect(tooMany.headers['Retry-After']).toEqual({ $ref: '#/components/headers/RetryAfter' });
        operations++;
      }
    expect(operations).toBeGreaterThan(10);
    expect(document.components.headers.RetryAfter).toBeDefined();
  });
});

describe('the failed-auth throttle covers the queue board', () => {
  it('answers 429 (text, Retry-After) to an address that keeps guessing the board login, before comparing it', async () => {
    const t = await freshApp();
    const statuses: number[] = [];
    for (let i = 0; i < LIMIT + 10; i++) statuses.push((await boardCall(t, basic(`guess-${i}`))).statusCode);
    expect(statuses.slice(0, LIMIT)).toEqual(Array(LIMIT).fill(401));
    expect(statuses.slice(LIMIT)).toEqual(Array(10).fill(429));
    const right = await boardCall(t, basic(TEST_ADMIN_TOKEN));
    expect(right.statusCode).toBe(429);
    expect(right.headers['content-type']).toMatch(/^text\/plain/);
    expect(Number(right.headers['retry-after'])).toBeGreaterThan(0);
    // One count per address: the admin API refuses it too.
    expectThrottled(await adminCall(t, `Bearer ${TEST_ADMIN_TOKEN}`));
  });

  it("a browser's first visit without credentials is asked to log in and does not count", async () => {
    const t = await freshApp();
    for (let i = 0; i < LIMIT + 5; i++) {
      const first = await boardCall(t);
      expect(first.statusCode).toBe(401);
      expect(first.headers['www-authenticate']).toBe('Basic realm="queues"');
    }
    expect((await boardCall(t, basic(TEST_ADMIN_TOKEN))).statusCode).toBe(200);
  });
});

describe('ADMIN_TOKEN in production', () => {
  const production = (token: string) => ({ NODE_ENV: 'production', ADMIN_TOKEN: token });
  const refusal = 'Invalid configuration: ADMIN_TOKEN: expected at least 32 characters when NODE_ENV=production';

  it('is refused under 32 characters, as METRICS_TOKEN is judged; development and tests keep any token', () => {
    for (const token of ['a', 'x'.repeat(31), TEST_ADMIN_TOKEN.slice(0, 31)])
      expect(() => loadConfig(production(token))).toThrow(refusal);
    expect(loadConfig(production('x'.repeat(32))).ADMIN_TOKEN).toHaveLength(32);
    expect(loadConfig({ NODE_ENV: 'development', ADMIN_TOKEN: 'a' }).ADMIN_TOKEN).toBe('a');
    expect(loadConfig({ NODE_ENV: 'test', ADMIN_TOKEN: 'a' }).ADMIN_TOKEN).toBe('a');
  });

  it('a production web process with ADMIN_TOKEN=a stops at start with that one line and exit 1', () => {
    const result = spawnSync(process.execPath, ['--import', 'tsx', 'src/server.ts'], {
      cwd: new URL('../..', import.meta.url).pathname,
      // Without the check it would go on to MongoDB: none there, and no retrying, so it ends either way.
      env: { ...process.env, ...production('a'), MONGO_URL: 'mongodb://127.0.0.1:1', STARTUP_TIMEOUT_MS: '0' },
      encoding: 'utf8',
      timeout: 20_000,
      killSignal: 'SIGKILL',
    });
    expect(result.status).toBe(1);
    const lines = result.stderr
      .trim()
      .split('\n')
      .filter((line) => !line.includes('ExperimentalWarning'));
    expect(lines).toEqual([refusal]);
  });
});
