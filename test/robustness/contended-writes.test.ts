import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { admin, createItem, createTask, createTenant, expectProblem, ext, type Tenant } from '../helpers/fixtures.js';
import type { LightMyRequestResponse } from 'fastify';

// Every compare-and-set loses, as under many writers at once: the request runs out of attempts.
// One answer for every resource (src/shared/optimistic.ts): 503 unavailable with Retry-After, nothing changed.
let t: TestApp;
let tenant: Tenant;
beforeAll(async () => {
  t = await buildTestApp({ RATE_LIMIT_MAX: '1000000' });
  tenant = await createTenant(t.app);
});
afterAll(async () => t?.close());
afterEach(() => vi.restoreAllMocks());

function expectContended(response: LightMyRequestResponse) {
  const body = expectProblem(response, 503, 'unavailable');
  expect(response.headers['retry-after']).toBe('5');
  expect(body.detail).toMatch(/many writers at once/);
}

describe('a write that loses every race to other writers', () => {
  it('item PATCH answers 503 and leaves the item as it was', async () => {
    const item = await createItem(t.app, tenant, { name: 'Contended' });
    const cas = vi.spyOn(t.app.repos.items, 'updateIfVersion').mockResolvedValue(null);
    expectContended(await ext(t.app, tenant.key, 'PATCH', `/items/${item.item_id}`, { name: 'Renamed' }));
    expect(cas.mock.calls.length).toBeGreaterThan(1);
    vi.restoreAllMocks();
    const stored = (await ext(t.app, tenant.key, 'GET', `/items/${item.item_id}`)).json();
    expect(stored).toMatchObject({ name: 'Contended', version: item.version });
  });

  it('item PUT by external id answers 503', async () => {
    const body = { name: 'Upserted', pipeline_id: tenant.pipelineId, stage_id: tenant.stageIds[0] };
    const first = await ext(t.app, tenant.key, 'PUT', '/items/by-external-id/crm-contended', body);
    expect(first.statusCode, first.body).toBe(201);
    vi.spyOn(t.app.repos.items, 'updateIfVersion').mockResolvedValue(null);
    expectContended(
      await ext(t.app, tenant.key, 'PUT', '/items/by-external-id/crm-contended', { ...body, name: 'Again' }),
    );
  });

  it('item DELETE answers 503 and the item stays', async () => {
    const item = await createItem(t.app, tenant);
    vi.spyOn(t.app.repos.items, 'archive').mockResolvedValue(null);
    expectContended(await ext(t.app, tenant.key, 'DELETE', `/items/${item.item_id}`));
    vi.restoreAllMocks();
    expect((await ext(t.app, tenant.key, 'GET', `/items/${item.item_id}`)).statusCode).toBe(200);
  });

  it('task PATCH answers 503 and leaves the task as it was', async () => {
    const task = await createTask(t.app, tenant, { title: 'Contended' });
    vi.spyOn(t.app.repos.tasks, 'updateIfRevision').mockResolvedValue(null);
    expectContended(await ext(t.app, tenant.key, 'PATCH', `/tasks/${task.task_id}`, { title: 'Renamed' }));
    vi.restoreAllMocks();
    expect((await ext(t.app, tenant.key, 'GET', `/tasks/${task.task_id}`)).json()).toMatchObject({
      title: 'Contended',
    });
  });

  it('task DELETE answers 503 and the task stays', async () => {
    const task = await createTask(t.app, tenant);
    vi.spyOn(t.app.repos.tasks, 'archive').mockResolvedValue(null);
    expectContended(await ext(t.app, tenant.key, 'DELETE', `/tasks/${task.task_id}`));
    vi.restoreAllMocks();
    expect((await ext(t.app, tenant.key, 'GET', `/tasks/${task.task_id}`)).statusCode).toBe(200);
  });

  it('pipeline PATCH (admin) answers 503 and leaves the pipeline as it was', async () => {
    vi.spyOn(t.app.repos.pipelines, 'replaceIfRevision').mockResolvedValue(null);
    const url = `/companies/${tenant.companyId}/pipelines/${tenant.pipelineId}`;
    expectContended(await admin(t.app, 'PATCH', url, { name: 'Renamed' }));
    vi.restoreAllMocks();
    expect((await admin(t.app, 'GET', url, undefined, 200)).json().name).not.toBe('Renamed');
  });
});
