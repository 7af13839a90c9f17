import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EventsRepository } from '../../src/events/repository.js';
import { scanOverdueTasks } from '../../src/tasks/overdue.js';
import { TasksRepository } from '../../src/tasks/repository.js';
import { buildTestApp, TEST_ADMIN_TOKEN, type TestApp } from '../helpers/app.js';
import { feedOf } from '../helpers/events.js';
import { createItem, createTask, createTenant, expectProblem, ext, type Tenant } from '../helpers/fixtures.js';
import type { EventEnvelope } from '../../src/contracts/envelope.js';

let t: TestApp;
let tenant: Tenant;
let other: Tenant;

beforeAll(async () => {
  t = await buildTestApp({ RATE_LIMIT_MAX: '1000000' }, { publisher: true });
  tenant = await createTenant(t.app, {
    duplicate_detection: { fields: ['name'], match: 'any', case_insensitive: true },
  });
  other = await createTenant(t.app);
});
afterAll(async () => t?.close());

const stored = async (collection: 'items' | 'tasks', id: string) =>
  (await t.db.collection(collection).findOne({ _id: id as never }))!;
/** A record's events in the feed, once its creation and deletion are readable. */
const events = (id: string): Promise<EventEnvelope[]> => feedOf(t.app, tenant.key, id, 2);
const del = (path: string, headers: Record<string, string> = {}, who = tenant) =>
  ext(t.app, who.key, 'DELETE', path, undefined, headers);

describe('DELETE /v1/ext/items/{item_id}', () => {
  it('answers 204, archives the item (GET 404, kept in MongoDB) and records item.deleted with the item as it was', async () => {
    const item = await createItem(t.app, tenant, { name: 'Doomed deal', metadata: { deal_value: 5 } });
    const response = await del(`/items/${item.item_id}`);
    expect(response.statusCode, response.body).toBe(204);
    expect(response.body).toBe('');
    expectProblem(await ext(t.app, tenant.key, 'GET', `/items/${item.item_id}`), 404, 'not_found');

    const doc = await stored('items', item.item_id);
    expect(doc.archived_at).toBeInstanceOf(Date);
    expect(doc.name).toBe('Doomed deal');
    const deleted = (await events(item.item_id)).filter((event) => event.type === 'item.deleted');
    expect(deleted).toHaveLength(1);
    expect(deleted[0]).toMatchObject({ type: 'item.deleted', company_id: tenant.companyId, data: item });
  });

  it('answers 404 to a second DELETE, to PATCH, and to another company', async () => {
    const item = await createItem(t.app, tenant);
    expectProblem(await del(`/items/${item.item_id}`, {}, other), 404, 'not_found');
    expect((await del(`/items/${item.item_id}`)).statusCode).toBe(204);
    expectProblem(await del(`/items/${item.item_id}`), 404, 'not_found');
    expectProblem(await ext(t.app, tenant.key, 'PATCH', `/items/${item.item_id}`, { name: 'x' }), 404, 'not_found');
    expectProblem(await del('/items/itm_000000000000000000000000'), 404, 'not_found');
  });

  it('honours If-Match: 412 with current_version on a stale ETag and nothing changes; the current ETag deletes', async () => {
    const item = await createItem(t.app, tenant);
    await ext(t.app, tenant.key, 'PATCH', `/items/${item.item_id}`, { name: 'Renamed' });
    const stale = expectProblem(await del(`/items/${item.item_id}`, { 'if-match': '"1"' }), 412, 'precondition_failed');
    expect(stale.current_version).toBe(2);
    // A weak tag of the current version does not match either (strong comparison, RFC 9110).
    expectProblem(await del(`/items/${item.item_id}`, { 'if-match': 'W/"2"' }), 412, 'precondition_failed');
    expect((await ext(t.app, tenant.key, 'GET', `/items/${item.item_id}`)).statusCode).toBe(200);
    expect((await del(`/items/${item.item_id}`, { 'if-match': '"2"' })).statusCode).toBe(204);
  });

  it('leaves the item out of lists and duplicate checks, and keeps its tasks', async () => {
    const name = `Unique ${Date.now()}`;
    const item = await createItem(t.app, tenant, { name });
    const task = await createTask(t.app, tenant, { item_id: item.item_id });
    expect((await del(`/items/${item.item_id}`)).statusCode).toBe(204);

    const listed = (await ext(t.app, tenant.key, 'GET', '/items?limit=200')).json<Array<{ item_id: string }>>();
    expect(listed.map((row) => row.item_id)).not.toContain(item.item_id);
    const duplicates = await ext(t.app, tenant.key, 'POST', '/items/check-duplicates', {
      pipeline_id: tenant.pipelineId,
      name,
    });
    expect(duplicates.json()).toEqual({ has_duplicates: false, matches: [] });

    const kept = await ext(t.app, tenant.key, 'GET', `/tasks/${task.task_id}`);
    expect(kept.statusCode).toBe(200);
    expect(kept.json().item_id).toBe(item.item_id);
  });

  it('makes the item unusable as a new reference: a task cannot be linked to it', async () => {
    const item = await createItem(t.app, tenant);
    expect((await del(`/items/${item.item_id}`)).statusCode).toBe(204);
    const response = await ext(t.app, tenant.key, 'POST', '/tasks', {
      title: 'Follow up',
      due_at: '2026-11-22T09:30:00Z',
      item_id: item.item_id,
    });
    const body = expectProblem(response, 400, 'validation_failed');
    expect(body.errors).toEqual([{ path: 'item_id', message: expect.any(String) }]);
  });

  it('needs items:write', async () => {
    const item = await createItem(t.app, tenant);
    const key = (
      await t.app.inject({
        method: 'POST',
        url: `/v1/admin/companies/${tenant.companyId}/api-keys`,
        headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` },
        payload: { name: 'read only', created_by: tenant.userId, scopes: ['items:read'] },
      })
    ).json().key;
    const body = expectProblem(await ext(t.app, key, 'DELETE', `/items/${item.item_id}`), 403, 'insufficient_scope');
    expect(body.required_scope).toBe('items:write');
  });
});

describe('DELETE /v1/ext/tasks/{task_id}', () => {
  it('answers 204, archives the task (GET 404) and records task.deleted with the task as it was', async () => {
    const task = await createTask(t.app, tenant, { title: 'Doomed call' });
    const response = await del(`/tasks/${task.task_id}`);
    expect(response.statusCode, response.body).toBe(204);
    expectProblem(await ext(t.app, tenant.key, 'GET', `/tasks/${task.task_id}`), 404, 'not_found');
    expectProblem(await del(`/tasks/${task.task_id}`), 404, 'not_found');
    expectProblem(await ext(t.app, tenant.key, 'PATCH', `/tasks/${task.task_id}`, { title: 'x' }), 404, 'not_found');

    expect((await stored('tasks', task.task_id)).archived_at).toBeInstanceOf(Date);
    const deleted = (await events(task.task_id)).filter((event) => event.type === 'task.deleted');
    expect(deleted).toHaveLength(1);
    expect(deleted[0]).toMatchObject({ company_id: tenant.companyId, data: task });
  });

  it("honours If-Match against the task's ETag: 412 when stale, 204 with the current one", async () => {
    const task = await createTask(t.app, tenant);
    const created = await ext(t.app, tenant.key, 'GET', `/tasks/${task.task_id}`);
    const firstEtag = created.headers.etag as string;
    expect(firstEtag).toMatch(/^"[^"]+"$/);
    const patched = await ext(t.app, tenant.key, 'PATCH', `/tasks/${task.task_id}`, { title: 'Changed' });
    expect(patched.headers.etag).not.toBe(firstEtag);
    expectProblem(await del(`/tasks/${task.task_id}`, { 'if-match': firstEtag }), 412, 'precondition_failed');
    const weak = `W/${patched.headers.etag as string}`;
    expectProblem(await del(`/tasks/${task.task_id}`, { 'if-match': weak }), 412, 'precondition_failed');
    expect((await ext(t.app, tenant.key, 'GET', `/tasks/${task.task_id}`)).statusCode).toBe(200);
    expect((await del(`/tasks/${task.task_id}`, { 'if-match': patched.headers.etag as string })).statusCode).toBe(204);
  });

  it('leaves the task out of lists and out of the overdue scan', async () => {
    const task = await createTask(t.app, tenant, { due_at: new Date(Date.now() + 60_000).toISOString() });
    const witness = await createTask(t.app, tenant, { due_at: new Date(Date.now() + 60_000).toISOString() });
    expect((await del(`/tasks/${task.task_id}`)).statusCode).toBe(204);
    const listed = (await ext(t.app, tenant.key, 'GET', '/tasks?limit=200')).json<Array<{ task_id: string }>>();
    expect(listed.map((row) => row.task_id)).toContain(witness.task_id);
    expect(listed.map((row) => row.task_id)).not.toContain(task.task_id);

    const published: EventEnvelope[] = [];
    await scanOverdueTasks(
      {
        tasks: new TasksRepository(t.db, new EventsRepository(t.db)),
        publisher: { publishAndClear: async (_c, docs) => void published.push(...docs.flatMap((doc) => doc.events)) },
        logger: pino({ level: 'silent' }),
      },
      new Date(Date.now() + 3_600_000),
    );
    // The witness fired, so the scan did run over this due time; the archived task did not.
    const fired = published.map((event) => event.data.task_id);
    expect(fired).toContain(witness.task_id);
    expect(fired).not.toContain(task.task_id);
  });

  it('needs tasks:write and answers 404 for another company', async () => {
    const task = await createTask(t.app, tenant);
    expectProblem(await del(`/tasks/${task.task_id}`, {}, other), 404, 'not_found');
    expect((await ext(t.app, tenant.key, 'GET', `/tasks/${task.task_id}`)).statusCode).toBe(200);
  });
});
