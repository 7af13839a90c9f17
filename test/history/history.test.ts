import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { createItem, createTask, createTenant, expectProblem, ext, type Tenant } from '../helpers/fixtures.js';
import { sleep, waitFor } from '../helpers/wait.js';

let t: TestApp;
let tenant: Tenant;
let other: Tenant;

beforeAll(async () => {
  t = await buildTestApp({ RATE_LIMIT_MAX: '100000' }, { publisher: true });
  tenant = await createTenant(t.app);
  other = await createTenant(t.app);
});
afterAll(async () => t?.close());

interface Entry {
  sequence: number;
  occurred_at: string;
  type: string;
  actor: { type: string; id?: string };
  version?: number;
  changes: Record<string, { from: unknown; to: unknown }> | null;
}

/** The record's history once it holds `count` entries (the sequencer writes it with the events' batch). */
async function historyOf(kind: 'items' | 'tasks', id: string, count: number, who = tenant): Promise<Entry[]> {
  return (await waitFor<Entry[] | undefined>(async () => {
    const response = await ext(t.app, who.key, 'GET', `/${kind}/${id}/history?limit=200`);
    expect(response.statusCode, response.body).toBe(200);
    const entries = response.json<Entry[]>();
    return entries.length >= count ? entries : undefined;
  }))!;
}

describe('GET /v1/ext/items/{item_id}/history', () => {
  it('lists every change newest first, with sequence, type, actor, version and changes; also once the item is deleted', async () => {
    const item = await createItem(t.app, tenant, { name: 'Acme renewal', metadata: { deal_value: 100 } });
    const moved = await ext(t.app, tenant.key, 'PATCH', `/items/${item.item_id}`, { stage_id: tenant.stageIds[1] });
    expect(moved.statusCode, moved.body).toBe(200);
    const valued = await ext(t.app, tenant.key, 'PATCH', `/items/${item.item_id}`, { metadata: { deal_value: 250 } });
    expect(valued.statusCode, valued.body).toBe(200);
    expect((await ext(t.app, tenant.key, 'DELETE', `/items/${item.item_id}`)).statusCode).toBe(204);

    const entries = await historyOf('items', item.item_id, 4);
    expect(entries.map((entry) => entry.type)).toEqual([
      'item.deleted',
      'item.updated',
      'item.updated',
      'item.created',
    ]);
    expect(entries.map((entry) => entry.version)).toEqual([3, 3, 2, 1]);
    const sequences = entries.map((entry) => entry.sequence);
    expect([...sequences].sort((a, b) => b - a)).toEqual(sequences);
    expect(new Set(sequences).size).toBe(4);
    expect(entries[1]!.changes).toEqual({ deal_value: { from: 100, to: 250 } });
    expect(entries[2]!.changes).toEqual({ stage: { from: tenant.stageIds[0], to: tenant.stageIds[1] } });
    expect(entries[3]!.changes).toBeNull();
    for (const entry of entries) {
      expect(Object.keys(entry).sort()).toEqual(['actor', 'changes', 'occurred_at', 'sequence', 'type', 'version']);
      expect(entry.actor).toEqual({ type: 'api_key', id: tenant.keyId });
      expect(entry.occurred_at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    }
    // The same sequences the feed shows for the item.
    const feed = await ext(t.app, tenant.key, 'GET', `/events?resource_id=${item.item_id}`);
    expect(feed.json<Entry[]>().map((event) => event.sequence)).toEqual([...sequences].reverse());
  });

  it('pages with limit and the cursor of Link / x-next-cursor, without skipping or repeating', async () => {
    const item = await createItem(t.app, tenant, { name: 'Paged' });
    for (let version = 1; version <= 6; version++) {
      const response = await ext(t.app, tenant.key, 'PATCH', `/items/${item.item_id}`, { name: `Paged ${version}` });
      expect(response.statusCode, response.body).toBe(200);
    }
    const all = await historyOf('items', item.item_id, 7);
    const seen: Entry[] = [];
    let url: string | undefined = `/items/${item.item_id}/history?limit=3`;
    while (url) {
      const response = await ext(t.app, tenant.key, 'GET', url);
      expect(response.statusCode, response.body).toBe(200);
      seen.push(...response.json<Entry[]>());
      const link = response.headers.link as string | undefined;
      const cursor = response.headers['x-next-cursor'] as string | undefined;
      if (link) expect(link).toContain(`cursor=${encodeURIComponent(cursor!)}`);
      url = cursor ? `/items/${item.item_id}/history?limit=3&cursor=${encodeURIComponent(cursor)}` : undefined;
    }
    expect(seen).toEqual(all);
    expect(seen.map((entry) => entry.version)).toEqual([7, 6, 5, 4, 3, 2, 1]);

    const first = await ext(t.app, tenant.key, 'GET', `/items/${item.item_id}/history?limit=3`);
    const cursor = first.headers['x-next-cursor'] as string;
    // A cursor is bound to its record.
    const other = await createItem(t.app, tenant, { name: 'Other' });
    expectProblem(
      await ext(t.app, tenant.key, 'GET', `/items/${other.item_id}/history?cursor=${encodeURIComponent(cursor)}`),
      400,
      'validation_failed',
    );
    expectProblem(
      await ext(t.app, tenant.key, 'GET', `/items/${item.item_id}/history?limit=0`),
      400,
      'validation_failed',
    );
  });

  it("answers 404 for another company's item, an unknown and a malformed id", async () => {
    const item = await createItem(t.app, tenant, { name: 'Private' });
    await historyOf('items', item.item_id, 1);
    expectProblem(await ext(t.app, other.key, 'GET', `/items/${item.item_id}/history`), 404, 'not_found');
    expectProblem(await ext(t.app, tenant.key, 'GET', '/items/itm_000000000000000000000000/history'), 404, 'not_found');
    expectProblem(await ext(t.app, tenant.key, 'GET', `/items/${'x'.repeat(300)}/history`), 404, 'not_found');
  });
});

describe('GET /v1/ext/tasks/{task_id}/history', () => {
  it('lists task.created, task.updated with its changes and task.completed, newest first, without version', async () => {
    const task = await createTask(t.app, tenant, { title: 'Call back' });
    const done = await ext(t.app, tenant.key, 'PATCH', `/tasks/${task.task_id}`, { is_completed: true });
    expect(done.statusCode, done.body).toBe(200);
    const entries = await historyOf('tasks', task.task_id, 3);
    expect(entries.map((entry) => entry.type)).toEqual(['task.completed', 'task.updated', 'task.created']);
    expect(entries[1]!.changes).toMatchObject({ is_completed: { from: false, to: true } });
    for (const entry of entries) expect(entry).not.toHaveProperty('version');
    expectProblem(await ext(t.app, other.key, 'GET', `/tasks/${task.task_id}/history`), 404, 'not_found');
  });
});

describe('GET /v1/ext/items/{item_id}?as_of=', () => {
  it('answers the item as it was at each time: before creation and after deletion 404', async () => {
    const beforeCreation = new Date().toISOString();
    await sleep(5);
    const item = await createItem(t.app, tenant, { name: 'Time travel', metadata: { deal_value: 1 } });
    await sleep(5);
    const atVersion1 = new Date().toISOString();
    await sleep(5);
    await ext(t.app, tenant.key, 'PATCH', `/items/${item.item_id}`, {
      name: 'Time travel 2',
      metadata: { deal_value: 2 },
    });
    await sleep(5);
    const atVersion2 = new Date().toISOString();
    await sleep(5);
    expect((await ext(t.app, tenant.key, 'DELETE', `/items/${item.item_id}`)).statusCode).toBe(204);
    await sleep(5);
    const afterDelete = new Date().toISOString();
    await historyOf('items', item.item_id, 3);

    const at = (when: string, who = tenant) =>
      ext(t.app, who.key, 'GET', `/items/${item.item_id}?as_of=${encodeURIComponent(when)}`);
    const first = await at(atVersion1);
    expect(first.statusCode, first.body).toBe(200);
    expect(first.json()).toEqual(item);
    const second = await at(atVersion2);
    expect(second.json()).toMatchObject({ version: 2, name: 'Time travel 2', deal_value: 2, item_id: item.item_id });
    expect(Object.keys(second.json())).toEqual(Object.keys(item));
    expectProblem(await at(beforeCreation), 404, 'not_found');
    expectProblem(await at(afterDelete), 404, 'not_found');
    expectProblem(await at(atVersion2, other), 404, 'not_found');
    // Any offset is accepted.
    const offset = new Date(Date.parse(atVersion2)).toISOString().replace('Z', '+00:00');
    expect((await at(offset)).json()).toMatchObject({ version: 2 });
  });

  it('refuses a malformed or future as_of with 400', async () => {
    const item = await createItem(t.app, tenant, { name: 'Now' });
    for (const bad of ['yesterday', '2026-13-01T00:00:00Z', new Date(Date.now() + 3_600_000).toISOString()]) {
      const body = expectProblem(
        await ext(t.app, tenant.key, 'GET', `/items/${item.item_id}?as_of=${encodeURIComponent(bad)}`),
        400,
        'validation_failed',
      );
      expect(body.errors[0].path).toBe('as_of');
    }
  });

  it('answers 404 for a time older than HISTORY_RETENTION_DAYS, even with a row kept from then', async () => {
    const item = await createItem(t.app, tenant, { name: 'Old' });
    const day = 24 * 3_600_000;
    const row = (daysAgo: number, version: number) => ({
      _id: `evt_old_${item.item_id}_${daysAgo}`,
      company_id: tenant.companyId,
      kind: 'item',
      resource_id: item.item_id,
      sequence: 1_000_000 + version,
      occurred_at: new Date(Date.now() - daysAgo * day),
      type: 'item.updated',
      actor: { type: 'admin' },
      version,
      changes: null,
      snapshot: { ...item, version },
      expires_at: new Date(Date.now() + day),
    });
    await t.db.collection('record_history').insertMany([row(400, 7), row(10, 8)] as never[]);
    const at = (daysAgo: number) =>
      ext(
        t.app,
        tenant.key,
        'GET',
        `/items/${item.item_id}?as_of=${new Date(Date.now() - daysAgo * day).toISOString()}`,
      );
    expect((await at(5)).json()).toMatchObject({ version: 8 });
    expectProblem(await at(399), 404, 'not_found');
    // The history leaves it out too.
    const entries = await historyOf('items', item.item_id, 2);
    expect(entries.map((entry) => entry.version)).not.toContain(7);
  });
});
