import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { expectProblem } from '../helpers/fixtures.js';
import { responseProblems } from './fuzz/checks.js';
import { foreignSnapshot, fuzzRoute, fuzzTargets, summaryTable, type RouteStats } from './fuzz/runner.js';
import { seedFuzzWorld, type FuzzWorld } from './fuzz/world.js';

// Bounded here; `npm run fuzz` runs the long version. A failure names the seed and case to replay.
const RUNS_PER_ROUTE = Number(process.env.FUZZ_TEST_RUNS ?? 40);
const SEED = Number(process.env.FUZZ_SEED ?? 20_261_122);
const CONCURRENCY = 4;

let t: TestApp;
let world: FuzzWorld;
let foreignBefore: string;
const results: RouteStats[] = [];

beforeAll(async () => {
  t = await buildTestApp({ RATE_LIMIT_MAX: '1000000000' });
  world = await seedFuzzWorld(t.app);
  foreignBefore = await foreignSnapshot(t.db, world.foreign.companyId);
});
afterAll(async () => {
  if (process.env.FUZZ_VERBOSE) process.stdout.write(`${summaryTable(results)}\n`);
  await t?.close();
});

describe('fuzzed requests to every external and admin route', () => {
  it('covers every route of both APIs', () => {
    const routes = fuzzTargets(t.app).map((target) => `${target.method} ${target.url}`);
    expect(routes).toEqual(
      expect.arrayContaining([
        'GET /v1/ext/items',
        'PATCH /v1/ext/tasks/:task_id',
        'DELETE /v1/ext/hooks/:hook_id',
        'POST /v1/admin/companies',
      ]),
    );
    expect(routes.filter((route) => route.includes('/v1/ext/')).length).toBeGreaterThanOrEqual(11);
    expect(routes.some((route) => /docs|metrics|openapi|queues/.test(route))).toBe(false);
  });

  it('never answer 5xx, always answer 4xx as problem+json, and never leak internals or another company', async () => {
    // A few routes at a time (their requests wait on MongoDB, not on this process), deletes after the rest.
    const targets = fuzzTargets(t.app);
    for (const batch of [
      targets.filter((target) => target.method !== 'DELETE'),
      targets.filter((target) => target.method === 'DELETE'),
    ]) {
      for (let index = 0; index < batch.length; index += CONCURRENCY) {
        const slice = batch.slice(index, index + CONCURRENCY);
        results.push(
          ...(await Promise.all(
            slice.map((target) => fuzzRoute(t.app, world, target, { numRuns: RUNS_PER_ROUTE, seed: SEED })),
          )),
        );
      }
    }
    const failures = results.flatMap((entry) => entry.failures);
    expect(failures.slice(0, 5), `seed ${SEED}, ${failures.length} failing cases`).toEqual([]);
    const statuses = new Set(results.flatMap((entry) => Object.keys(entry.statuses).map(Number)));
    // The generator reaches the success paths too, not only the validation errors.
    expect([...statuses]).toEqual(expect.arrayContaining([200, 201, 400, 401, 404]));
  }, 120_000);

  it('polluted no prototype with the __proto__, constructor and prototype keys it sent', () => {
    const probe = {} as Record<string, unknown>;
    expect([probe.polluted, probe.isAdmin, (Object.prototype as Record<string, unknown>).polluted]).toEqual([
      undefined,
      undefined,
      undefined,
    ]);
  });

  it('left the foreign company untouched', async () => {
    expect(await foreignSnapshot(t.db, world.foreign.companyId)).toBe(foreignBefore);
    expect(
      (await t.app.inject({ method: 'GET', url: '/v1/ext/items', headers: { 'x-api-key': world.foreign.key } }))
        .statusCode,
    ).toBe(200);
  });
});

describe('defects the fuzzer found', () => {
  it("answers a malformed URL and an over-long id with problem+json, not Fastify's own JSON", async () => {
    const badUrl = await t.app.inject({
      method: 'GET',
      url: '/v1/ext/items/%ff',
      headers: { 'x-api-key': world.own.key },
    });
    expectProblem(badUrl, 400, 'bad_request');
    expect(badUrl.headers['x-request-id']).toEqual(expect.any(String));
    const longId = await t.app.inject({
      method: 'GET',
      url: `/v1/ext/items/${'x'.repeat(10_000)}`,
      headers: { 'x-api-key': world.own.key },
    });
    expectProblem(longId, 404, 'not_found');
  });
});

describe('the response checks themselves', () => {
  const context = { api: 'ext' as const, method: 'GET', route: '/v1/ext/items', foreignMarkers: ['cmp_foreign'] };
  const problem = { type: 'x', title: 'x', status: 400, code: 'x', request_id: 'r' };
  const respond = (statusCode: number, body: unknown, contentType = 'application/json') => ({
    statusCode,
    headers: { 'content-type': contentType },
    body: JSON.stringify(body),
  });

  it('flag each kind of bad response', () => {
    expect(responseProblems(respond(200, [{ item_id: 'a' }]), context)).toEqual([]);
    expect(responseProblems(respond(400, problem, 'application/problem+json'), context)).toEqual([]);
    expect(responseProblems(respond(500, { ...problem, status: 500 }, 'application/problem+json'), context)).toEqual([
      'server error 500',
    ]);
    expect(responseProblems(respond(400, problem), context)).toEqual(['400 with content-type "application/json"']);
    expect(responseProblems(respond(404, { title: 'x' }, 'application/problem+json'), context)[0]).toMatch(
      /lacks type, status, code, request_id/,
    );
    expect(responseProblems(respond(200, [{ nested: { _id: 1 } }]), context)).toEqual([
      'internal field "_id" in the body',
    ]);
    expect(responseProblems(respond(200, { company_id: 'c' }), context)).toEqual([
      'internal field "company_id" in the body',
    ]);
    expect(responseProblems(respond(200, { company_id: 'c' }), { ...context, api: 'admin' })).toEqual([]);
    expect(responseProblems(respond(200, { secret: 'whsec_abc' }), context)).toEqual(['a webhook secret in the body']);
    expect(
      responseProblems(respond(201, { secret: 'whsec_abc' }), { ...context, method: 'POST', route: '/v1/ext/hooks' }),
    ).toEqual([]);
    expect(
      responseProblems(
        respond(400, { ...problem, detail: 'at handler (/app/src/x.ts:12:3)' }, 'application/problem+json'),
        context,
      ),
    ).toEqual(['a stack trace in the body']);
    expect(
      responseProblems(
        respond(400, { ...problem, detail: 'E11000 duplicate key' }, 'application/problem+json'),
        context,
      ),
    ).toEqual(['a database driver message in the body']);
    expect(responseProblems(respond(200, [{ item_id: 'cmp_foreign' }]), context)).toEqual([
      "another company's data in the body: cmp_foreign",
    ]);
  });
});
