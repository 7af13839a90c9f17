import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { expectProblem, ext } from '../helpers/fixtures.js';
import { foreignSnapshot } from './fuzz/runner.js';
import { seedFuzzWorld, type FuzzWorld, type SeededTenant } from './fuzz/world.js';

/** OWASP API Security Top 10 (2023) cases that one web process can show; see security-processes.test.ts for the rest. */
let t: TestApp;
let world: FuzzWorld;
let own: SeededTenant;
let foreign: SeededTenant;

beforeAll(async () => {
  t = await buildTestApp({ RATE_LIMIT_MAX: '1000000000' });
  world = await seedFuzzWorld(t.app);
  ({ own, foreign } = world);
});
afterAll(async () => t?.close());

const call = (
  method: 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE',
  url: string,
  body?: unknown,
  headers?: Record<string, string>,
) => ext(t.app, own.key, method, url, body, headers);

/** Every `/v1/ext/` route with path ids, filled with the foreign company's ids. */
function foreignAddressedRequests() {
  const ids: Record<string, string> = {
    item_id: foreign.itemId,
    task_id: foreign.taskId,
    hook_id: foreign.hookId,
    pipeline_id: foreign.pipelineId,
    event_id: foreign.eventId,
  };
  const bodies: Record<string, unknown> = {
    'PATCH /v1/ext/items/:item_id': { name: 'Hijacked' },
    'PATCH /v1/ext/tasks/:task_id': { title: 'Hijacked', is_completed: true },
    'PATCH /v1/ext/hooks/:hook_id': { enabled: false },
    'POST /v1/ext/hooks/:hook_id/recover': { since: new Date(Date.now() - 3_600_000).toISOString() },
  };
  return (
    t.app.routeTable
      // An external_id is a name within the caller's own company (an upsert by it creates there), not an address.
      .filter(
        (route) =>
          route.url.startsWith('/v1/ext/') &&
          route.url.includes(':') &&
          !route.url.includes(':external_id') &&
          route.method !== 'HEAD',
      )
      .map((route) => {
        const method = String(route.method) as 'GET' | 'POST' | 'PATCH' | 'DELETE';
        const url = route.url
          .replace('/v1/ext', '')
          .replace(/:([a-z_]+)/g, (_, name: string) => ids[name] ?? 'unknown');
        return { route: `${method} ${route.url}`, method, url, body: bodies[`${method} ${route.url}`] };
      })
  );
}

describe('API1 broken object level authorization', () => {
  it("answers 404 to every route addressed with another company's ids, and changes none of its records", async () => {
    const before = await foreignSnapshot(t.db, foreign.companyId);
    const requests = foreignAddressedRequests();
    expect(requests.map((request) => request.route)).toEqual(
      expect.arrayContaining([
        'GET /v1/ext/items/:item_id',
        'PATCH /v1/ext/items/:item_id',
        'PATCH /v1/ext/tasks/:task_id',
        'DELETE /v1/ext/hooks/:hook_id',
        'POST /v1/ext/hooks/:hook_id/deliveries/:event_id/redeliver',
        'POST /v1/ext/hooks/:hook_id/recover',
      ]),
    );
    for (const request of requests) {
      const response = await call(request.method, request.url, request.body);
      expect(response.statusCode, request.route).toBe(404);
      expectProblem(response, 404, 'not_found');
    }
    // The caller's own hook with the foreign company's event is no better.
    expectProblem(await call('POST', `/hooks/${own.hookId}/deliveries/${foreign.eventId}/redeliver`), 404, 'not_found');
    // Upserting by the foreign company's external id creates an item of the caller's own.
    await t.db.collection('items').updateOne({ _id: foreign.itemId as never }, { $set: { external_id: 'shared-42' } });
    const snapshot = await foreignSnapshot(t.db, foreign.companyId);
    const upserted = await call('PUT', '/items/by-external-id/shared-42', {
      name: 'Mine',
      pipeline_id: own.pipelineId,
      stage_id: own.stageIds[0],
    });
    expect(upserted.statusCode).toBe(201);
    expect(upserted.json().item_id).not.toBe(foreign.itemId);
    expect(await foreignSnapshot(t.db, foreign.companyId)).toBe(snapshot);
    await t.db.collection('items').updateOne({ _id: foreign.itemId as never }, { $set: { external_id: null } });
    expect(await foreignSnapshot(t.db, foreign.companyId)).toBe(before);
  });

  it("refuses another company's ids as references in bodies (400) and finds nothing of it with them as filters", async () => {
    const before = await foreignSnapshot(t.db, foreign.companyId);
    const refused = [
      call('POST', '/items', { name: 'x', pipeline_id: foreign.pipelineId, stage_id: foreign.stageIds[0] }),
      call('POST', '/items', { name: 'x', pipeline_id: own.pipelineId, stage_id: foreign.stageIds[0] }),
      call('PATCH', `/items/${own.itemId}`, { stage_id: foreign.stageIds[1], status_id: foreign.statusIds[0] }),
      call('POST', '/items/check-duplicates', { pipeline_id: foreign.pipelineId, name: 'x' }),
      call('POST', '/tasks', { title: 'x', due_at: '2026-11-22T09:30:00Z', item_id: foreign.itemId }),
      call('POST', '/tasks', { title: 'x', due_at: '2026-11-22T09:30:00Z', assigned_to: foreign.userId }),
      call('PATCH', `/tasks/${own.taskId}`, { item_id: foreign.itemId, assigned_to: foreign.userId }),
    ];
    for (const response of await Promise.all(refused)) expectProblem(response, 400, 'validation_failed');
    const filters = ['/items?pipeline_id=', '/items?stage_id=', '/tasks?item_id=', '/tasks?assigned_to='];
    const values = [foreign.pipelineId, foreign.stageIds[0], foreign.itemId, foreign.userId];
    for (const [index, filter] of filters.entries()) {
      const response = await call('GET', filter + values[index]);
      expect(response.statusCode).toBe(200);
      expect(response.json()).toEqual([]);
    }
    expect(await foreignSnapshot(t.db, foreign.companyId)).toBe(before);
  });
});

describe('API1: history and export', () => {
  it("never answer with another company's records or changes", async () => {
    const foreignIds = [foreign.itemId, foreign.taskId, foreign.companyId];
    for (const url of [
      '/export/items',
      '/export/tasks',
      `/items/${own.itemId}/history`,
      `/tasks/${own.taskId}/history`,
    ]) {
      const response = await call('GET', url);
      expect(response.statusCode, `${url}: ${response.body}`).toBe(200);
      for (const id of foreignIds) expect(response.body, url).not.toContain(id);
    }
    const exported = (await call('GET', '/export/items')).body.trim().split('\n');
    expect(exported.length).toBeGreaterThan(0);
    expectProblem(
      await call('GET', `/items/${foreign.itemId}?as_of=${encodeURIComponent(new Date().toISOString())}`),
      404,
      'not_found',
    );
  });
});

describe('API3 broken object property level authorization (mass assignment)', () => {
  const outputOnly = {
    short_id: 'I-999',
    version: 99,
    created_by: 'usr_000000000000000000000000',
    completed_at: '2026-01-01T00:00:00Z',
    created_at: '2020-01-01T00:00:00Z',
    updated_at: '2020-01-01T00:00:00Z',
    task_id: 'tsk_000000000000000000000000',
    item_id: 'itm_000000000000000000000000',
    company_id: 'cmp_000000000000000000000000',
    _id: 'x',
  };
  const itemBody = () => ({ name: 'Deal', pipeline_id: own.pipelineId, stage_id: own.stageIds[0] });
  const taskBody = { title: 'Call', due_at: '2026-11-22T09:30:00Z' };
  const count = (collection: string) => t.db.collection(collection).countDocuments({ company_id: own.companyId });
  const paths = (body: { errors: Array<{ path: string }> }) => body.errors.map((error) => error.path);

  it.each(Object.entries(outputOnly).filter(([field]) => field !== 'task_id'))(
    'refuses %s on item create and update, changing nothing',
    async (field, value) => {
      const items = await count('items');
      expect(
        paths(expectProblem(await call('POST', '/items', { ...itemBody(), [field]: value }), 400, 'validation_failed')),
      ).toContain(field);
      expect(await count('items')).toBe(items);
      if (field === 'version') return; // on update, version is the expected current version, not a value to set
      const before = (await call('GET', `/items/${own.itemId}`)).json();
      expect(
        paths(
          expectProblem(
            await call('PATCH', `/items/${own.itemId}`, { name: 'Changed', [field]: value }),
            400,
            'validation_failed',
          ),
        ),
      ).toContain(field);
      expect((await call('GET', `/items/${own.itemId}`)).json()).toEqual(before);
    },
  );

  it.each(Object.entries(outputOnly).filter(([field]) => field !== 'item_id'))(
    'refuses %s on task create and update, changing nothing',
    async (field, value) => {
      const tasks = await count('tasks');
      expect(
        paths(expectProblem(await call('POST', '/tasks', { ...taskBody, [field]: value }), 400, 'validation_failed')),
      ).toContain(field);
      expect(await count('tasks')).toBe(tasks);
      const before = (await call('GET', `/tasks/${own.taskId}`)).json();
      expect(
        paths(
          expectProblem(
            await call('PATCH', `/tasks/${own.taskId}`, { title: 'Changed', [field]: value }),
            400,
            'validation_failed',
          ),
        ),
      ).toContain(field);
      expect((await call('GET', `/tasks/${own.taskId}`)).json()).toEqual(before);
    },
  );
});

describe('API4 unrestricted resource consumption', () => {
  it.each(['/items', '/tasks'])('caps %s pages at 200 (201 is a 400, never clamped)', async (path) => {
    expect((await call('GET', `${path}?limit=200`)).statusCode).toBe(200);
    for (const limit of ['201', '0', '-1', '1e9', '100000000000000000000'])
      expectProblem(await call('GET', `${path}?limit=${limit}`), 400, 'validation_failed');
    expectProblem(await call('GET', `${path}?limit=1&limit=2`), 400, 'validation_failed');
  });

  it('refuses a body over 1 MiB with 413 before doing anything with it', async () => {
    const items = await t.db.collection('items').countDocuments({});
    const body = JSON.stringify({
      name: 'x'.repeat(1024 * 1024),
      pipeline_id: own.pipelineId,
      stage_id: own.stageIds[0],
    });
    const response = await t.app.inject({
      method: 'POST',
      url: '/v1/ext/items',
      headers: { 'x-api-key': own.key, 'content-type': 'application/json' },
      payload: body,
    });
    expectProblem(response, 413, 'payload_too_large');
    expect(await t.db.collection('items').countDocuments({})).toBe(items);
  });

  it.each([
    ['arrays', (depth: number) => '['.repeat(depth) + ']'.repeat(depth)],
    [
      'objects in metadata',
      (depth: number) =>
        `{"name":"x","pipeline_id":"${own.pipelineId}","stage_id":"${own.stageIds[0]}","metadata":{"deal_value":${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}}}`,
    ],
  ])('answers deeply nested %s with 400, with or without an Idempotency-Key', async (_, nested) => {
    for (const depth of [100, 10_000, 100_000]) {
      for (const headers of [{}, { 'idempotency-key': `deep-${depth}-${Math.random()}` }]) {
        const response = await t.app.inject({
          method: 'POST',
          url: '/v1/ext/items',
          headers: { 'x-api-key': own.key, 'content-type': 'application/json', ...headers },
          payload: nested(depth),
        });
        expectProblem(response, 400, 'validation_failed');
      }
    }
  });
});
